#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# Hostile-client checks: kvserver against clients that vanish with requests in flight, ignore
# their request credits, flood it, leave rdma_cm connects half-open, stall the tcp parameter
# exchange, or stay connected without traffic. Uses tests/integration/raw_client.cc. Run INSIDE
# the RDMA sandbox, like connection.sh:
#   RKV_SANDBOX_ACCEL=tcg tools/rdma-sandbox -- tests/integration/hostile.sh build 10.77.0.1 /tmp/hostile-logs
#   tests/integration/hostile.sh BUILD_DIR ADDR LOGDIR
# Starts its own kvservers (ports from HOSTILE_PORT_BASE, default 7490) and prints one
# `[case PASS|FAIL] hostile: <case> ...` line per case (plus indented figures); exit 1 if any failed.
# Environment (tools/rdma-sandbox passes only RKV_* variables into the VM, so each HOSTILE_X
# may also be given as RKV_HOSTILE_X, or set inside: `tools/rdma-sandbox -- env HOSTILE_X=...`):
#   RKV_HOSTILE_SERVER  kvserver binary (default BUILD_DIR/kvserver; e.g. an ASan or TSan build)
#   HOSTILE_ROUNDS      vanish rounds per stream (default 200; 3 streams)
#   HOSTILE_CASES       cases to run (default: vanish credits flood halfopen slow-exchange get-only)
#   HOSTILE_PORT_BASE, HOSTILE_ACCEPT_TIMEOUT, HOSTILE_VICTIM_OPS, HOSTILE_FLOOD_MAX_P99_RATIO,
#   HOSTILE_CREDITS_OVER_BY, HOSTILE_EXTRA_FLAGS
# The server flags of each case, the new server's deadlines and the thresholds are the variables
# below; each case is one function, so its assertions are easy to adjust.
set -uo pipefail
build=$(cd "${1:?usage: hostile.sh BUILD_DIR [ADDR LOGDIR]}" && pwd) || exit 2
# Given only BUILD_DIR (ctest), enter the RDMA sandbox first.
if [ $# -eq 1 ] && [ -z "${RKV_IN_SANDBOX:-}" ]; then
  export RKV_IN_SANDBOX=1
  exec "$(dirname "$0")/../../tools/rdma-sandbox" --timeout 1400 -- sh -c \
    "$0 \"$build\" \$RKV_SANDBOX_ADDR \$(mktemp -d /tmp/rkv-hostile.XXXXXX)"
fi
addr=${2:?usage: hostile.sh BUILD_DIR ADDR LOGDIR}
logs=${3:?usage: hostile.sh BUILD_DIR ADDR LOGDIR}
mkdir -p "$logs" || exit 2

# LeakSanitizer: an ASan kvserver checks for leaks as it exits, and every case ends with a clean
# stop (SIGTERM; stop_server judges the exit status and the log), so a leak fails the case that
# leaked. Suppressed: only what a library owns, in tests/integration/lsan.supp (each entry says
# why). log_threads=1 makes the check leave "Processing thread" lines in the log, which
# stop_server requires of an ASan build: a leak check that did not run is no pass. Set before
# common.sh, whose detect_leaks=0 is for the scripts that kill -9; a caller's ASAN_OPTIONS and
# LSAN_OPTIONS come last and win.
export ASAN_OPTIONS="detect_leaks=1${ASAN_OPTIONS:+:$ASAN_OPTIONS}"
export LSAN_OPTIONS="suppressions=$(cd "$(dirname "$0")" && pwd)/lsan.supp:log_threads=1${LSAN_OPTIONS:+:$LSAN_OPTIONS}"
KNOB_PREFIX=HOSTILE
. "$(dirname "$0")/common.sh"
KVSERVER=${RKV_HOSTILE_SERVER:-$build/kvserver}
RAW=$build/raw_client
KVCTL=$build/kvctl
KVBENCH=$build/kvbench
ROUNDS=$(knob ROUNDS 200)
CASES=$(knob CASES "vanish credits flood halfopen slow-exchange get-only")
PORT_BASE=$(knob PORT_BASE 7490)
# Sanitizer builds: report, keep running (a report in a server's log fails its case); leaks by
# LeakSanitizer at each server's clean stop (above) and by the RSS check of the vanish case.
# ThreadSanitizer: glibc's tzset_internal runs under glibc's own lock (tzset_lock), which TSan
# cannot see, so concurrent glog lines (LogMessageTime::CalcGmtOffset -> localtime_r) are
# reported as a race in every kvserver log. Suppressed by that frame only; a caller's
# TSAN_OPTIONS come last and win.
printf 'race:tzset_internal\n' > "$logs/tsan.supp"
export TSAN_OPTIONS="suppressions=$logs/tsan.supp${TSAN_OPTIONS:+ $TSAN_OPTIONS}"

# --- server flags per case (arrays) and the server's deadlines -----------------------------
# HOSTILE_EXTRA_FLAGS: more kvserver flags for every case, e.g. --client_rkeys=registration.
read -ra EXTRA_FLAGS <<< "$(knob EXTRA_FLAGS "")"
# One reply in 4 signalled (selective signalling; soft-RoCE's auto value signals every reply):
# the hostile cases meet the unsignalled path, and the credit arithmetic below assumes it.
COMMON_FLAGS=(--memory=64M --workers=2 --reply_signal_every=4 "${EXTRA_FLAGS[@]}")
VANISH_FLAGS=("${COMMON_FLAGS[@]}")
CREDITS_FLAGS=("${COMMON_FLAGS[@]}")
# Requests beyond the announced credits (4, kvserver's default) in the second batch. The server
# tolerates 2 x credits + 2 unacknowledged requests (a pipelining client's replies may not have
# completed at the server when its next requests arrive; docs/design.md, "Credits"), plus N - 1
# with N = min(credits, 16) for unsignalled replies ("Selective signalling"), and does not count
# the unsignalled replies after its last signalled send (at most N - 1 more), so
# 2C + 2 + 2(N - 1) + 1 = 17 at once (credits + 13) is the smallest batch that must be dropped
# whatever the alignment: over_by 13.
CREDITS_OVER_BY=$(knob CREDITS_OVER_BY 13)
FLOOD_FLAGS=("${COMMON_FLAGS[@]}")
ACCEPT_TIMEOUT_S=$(knob ACCEPT_TIMEOUT 5)  # the server's --accept_timeout: connect-to-established deadline
HALFOPEN_MAX_CONNECTIONS=8
HALFOPEN_METRICS_PORT=$((PORT_BASE + 2000))  # read over HTTP: asking needs no connection slot
HALFOPEN_FLAGS=("${COMMON_FLAGS[@]}" "--max_connections=$HALFOPEN_MAX_CONNECTIONS"
                "--accept_timeout=$ACCEPT_TIMEOUT_S" "--metrics_listen=$addr:$HALFOPEN_METRICS_PORT")
EXCHANGE_TIMEOUT_MS=60000  # the server's --exchange_timeout_ms: a server that served handshakes
                           # one at a time would hold kvctl behind a stalled peer this long
SLOW_FLAGS=("${COMMON_FLAGS[@]}" --exchange=tcp "--exchange_timeout_ms=$EXCHANGE_TIMEOUT_MS"
            "--accept_timeout=$((EXCHANGE_TIMEOUT_MS / 1000))")
PEER_TIMEOUT_S=3           # the server's --peer_timeout (seconds without a sign of life)
STOP_WAIT_S=120            # SIGTERM to exit (an ASan build's leak check runs then; TCG is slow)
GETONLY_FLAGS=("${COMMON_FLAGS[@]}" "--peer_timeout=$PEER_TIMEOUT_S")

# --- workloads and thresholds --------------------------------------------------------------
VANISH_PARALLEL=3
VANISH_PUTS=4
VANISH_VALUE=65536
SETTLE_S=20              # how long the server may take to release what vanished clients left
RSS_SLACK_KIB=$((32 * 1024))
# Under ThreadSanitizer the RSS bound is not applied (reported only): its shadow and history
# memory grow with every new address the server touches (+140 MiB over 600 connections).
RSS_BOUND=1
grep -q -a -m1 __tsan_init "$KVSERVER" 2>/dev/null && RSS_BOUND=0
LEAK_CHECK=0  # an ASan kvserver: its stop must show that LeakSanitizer ran
grep -q -a -m1 __asan_init "$KVSERVER" 2>/dev/null && LEAK_CHECK=1
FLOOD_SECONDS=20
FLOOD_DEPTH=16
FLOOD_VALUE=65536
VICTIM_RECORDS=500
VICTIM_OPS=$(knob VICTIM_OPS 2000)
# A bound on the victim's p99 ratio (under flood / alone), off by default: a test never asserts
# a timing (one preemption on a shared 2-core host moves a p99 by milliseconds); the ratio is
# reported, and the victim must finish every operation without an error.
FLOOD_MAX_P99_RATIO=$(knob FLOOD_MAX_P99_RATIO "")
HALFOPEN_COUNT=$HALFOPEN_MAX_CONNECTIONS
HALFOPEN_HOLD=60         # the holder keeps its connects this long unless released (SIGUSR1)
HALFOPEN_RETRY_S=40      # kvctl retries until this long after the connects, well before they end
SLOW_HOLD=90             # the stalled peers hold this long unless released (SIGUSR1)
SLOW_KVCTL_TIMEOUT_MS=30000  # kvctl's exchange timeout: half the server's, so a server that
                             # served handshakes one at a time fails kvctl on any host's speed
GETONLY_SECONDS=20

failed=0 passed=0
pass() { echo "[case PASS] hostile: $1${2:+ ($2)}"; passed=$((passed + 1)); }
fail() { echo "[case FAIL] hostile: $1${2:+ ($2)}"; failed=$((failed + 1)); }
note() { echo "  $*"; }
verdict() {  # case why [what passed] -> pass if why is empty; on failure the crash report
  if [ -z "$2" ]; then pass "$1" "${3:-}"; return; fi
  fail "$1" "$2"
  if grep -q -E "$CRASH_PATTERN" "$srv_log" 2>/dev/null; then
    grep -v -E "^[IW][0-9]{8} " "$srv_log" | grep -m1 -A12 -E "$CRASH_PATTERN" | sed 's/^/  log: /'
  fi
}

now_ms() { date +%s%3N; }

ctl() {  # port args...
  local port=$1; shift
  timeout 60 "$KVCTL" --server="$addr:$port" --timeout_ms=8000 "$@"
}
stat_of() {  # port field -> value or "?"
  local v
  v=$(ctl "$1" stats 2>/dev/null | awk -v f="$2" '$1==f{print $2}')
  echo "${v:-?}"
}
# connections_active once earlier connections (the readiness probe's kvctl, say) have drained:
# waits up to 10 s for the idle value 1 (the asking kvctl's own connection) and prints the last
# value seen. Sampling at once could catch a connection still draining and take it as the idle count.
idle_active() {  # port -> value
  local v="?" i
  for i in $(seq 10); do
    v=$(stat_of "$1" connections_active)
    [ "$v" = 1 ] && break
    sleep 1
  done
  echo "$v"
}
# release PID...: ends the --hold of the raw_client under each `timeout` PID (SIGUSR1 to the child;
# `timeout` itself would die of it and leave the raw_client running).
release() { local p; for p in "$@"; do pkill -USR1 -P "$p" 2>/dev/null; done; }
metric_of() {  # NAME -> the halfopen server's figure over HTTP, or "?"
  local v
  v=$(curl -sS --max-time 10 "http://$addr:$HALFOPEN_METRICS_PORT/metrics" 2>/dev/null |
      awk -v k="$1" '$1 == k { print $2 }')
  echo "${v:-?}"
}
await_metric() {  # NAME WANT SECONDS -> polls metric_of every 0.5 s until it reads WANT; prints
  local v="?" i   # the last value read, returns 0 if it got there
  for i in $(seq $(($3 * 2))); do
    v=$(metric_of "$1")
    [ "$v" = "$2" ] && break
    sleep 0.5
  done
  echo "$v"
  [ "$v" = "$2" ]
}
fds_of() { find /proc/"$1"/fd -mindepth 1 -maxdepth 1 2>/dev/null | wc -l; }
rss_of() { awk '/^VmRSS:/{print $2}' /proc/"$1"/status 2>/dev/null || echo "?"; }

# start_server NAME PORT FLAGS...: sets srv_pid and srv_log; waits (30 s) until kvctl stats
# answers. Returns 1 if the server died or never listened. A server that listens but that
# kvctl refuses (e.g. a protocol mismatch) counts as started; srv_note says so.
srv_pid="" srv_log="" srv_note=""
start_server() {
  local name=$1 port=$2; shift 2
  srv_log="$logs/kvserver-$name.log" srv_note=""
  "$KVSERVER" --listen="$addr:$port" "$@" > "$srv_log" 2>&1 &
  srv_pid=$!
  local out end=$((SECONDS + 30))
  while [ $SECONDS -lt $end ]; do
    if ! kill -0 "$srv_pid" 2>/dev/null; then
      wait "$srv_pid" 2>/dev/null
      srv_note="kvserver exited at start (flags: $*): $(tail -2 "$srv_log" | tr '\n' ' ')"
      srv_pid=""
      return 1
    fi
    if out=$(ctl "$port" stats 2>&1 >/dev/null); then return 0; fi
    if grep -q "PROTOCOL_ERROR" <<< "$out"; then
      srv_note="kvserver listens but kvctl refuses it: $(tr '\n' ' ' <<< "$out")"
      return 0
    fi
    sleep 0.3
  done
  srv_note="kvserver never answered kvctl stats within 30 s: $(tr '\n' ' ' <<< "$out")"
  return 0
}
# stop_server PID LOG: the clean stop every case ends with. SIGTERM, then up to STOP_WAIT_S for
# kvserver to exit (an ASan build runs LeakSanitizer as it exits), SIGKILL after that. Sets
# stop_why to why the stop was not clean ("" if it was): it had died before, it outlived
# STOP_WAIT_S, its exit status was not 0 (LeakSanitizer's included), or its log holds a
# sanitizer report (a leak, or one written while it shut down). Returns 1 if not clean.
# (Not called in $(...): only this shell can wait for the server.)
stop_why=""
stop_server() {
  local pid=$1 log=$2 st rep i
  stop_why=""
  [ -n "$pid" ] || { stop_why="no kvserver to stop"; return 1; }
  if ! kill -0 "$pid" 2>/dev/null; then
    wait "$pid" 2>/dev/null
    stop_why="kvserver had died before the stop (exit $?)"
  else
    kill "$pid" 2>/dev/null
    for i in $(seq $((STOP_WAIT_S * 5))); do kill -0 "$pid" 2>/dev/null || break; sleep 0.2; done
    if kill -0 "$pid" 2>/dev/null; then
      kill -9 "$pid" 2>/dev/null
      stop_why="kvserver still running $STOP_WAIT_S s after SIGTERM (killed)"
    fi
    wait "$pid" 2>/dev/null
    st=$?
    [ -n "$stop_why" ] || [ $st -eq 0 ] || stop_why="kvserver exit status $st after SIGTERM, not 0"
  fi
  rep=$(crash_report "$log")
  [ -n "$rep" ] && stop_why="${stop_why:+$stop_why; }$rep"
  if [ $LEAK_CHECK = 1 ] && [ -z "$stop_why" ] && ! grep -q "Processing thread" "$log"; then
    stop_why="no sign in the log that LeakSanitizer ran at exit (ASAN_OPTIONS=$ASAN_OPTIONS)"
  fi
  [ -z "$stop_why" ]
}
# Sanitizer or crash reports in a server log ("" if none).
crash_report() { grep -m1 -E "$CRASH_PATTERN" "$1" 2>/dev/null; }
# Common end of a case: the server must still be alive and its log free of sanitizer reports.
server_ok() {  # -> 0 if fine, else prints why not
  local why=""
  kill -0 "$srv_pid" 2>/dev/null || why="kvserver died"
  local rep; rep=$(crash_report "$srv_log")
  [ -n "$rep" ] && why="${why:+$why; }$rep"
  [ -z "$why" ] && return 0
  echo "$why"
  return 1
}
# field_of LINE KEY: the value of KEY in a `raw_client MODE: key=value ...` line ("" if absent;
# for the unquoted values: numbers, single words).
field_of() { tr ' ' '\n' <<< "$1" | sed -n "s/^$2=//p" | head -1; }
last_err() { local l; l=$(tail -1 "$1" 2>/dev/null); echo "${l:+: $l}"; }  # FILE -> ": <last line>"
kv_roundtrip() {  # port [kvctl flags...] -> 0 if put+get work
  local port=$1; shift
  local v="hostile-$RANDOM"
  ctl "$port" "$@" put hostile-key "$v" 2>>"$logs/kvctl.err" &&
    [ "$(ctl "$port" "$@" get hostile-key 2>>"$logs/kvctl.err")" = "$v" ]
}

# (a) Vanish storm: 3 streams x ROUNDS rounds of connect, post PUTs + PARAMS, vanish. Every
# round must have connected, posted its requests (none refused at the transport) and vanished
# (raw_client exit 0 and its counts), or the storm did not happen. The server must survive,
# serve a put/get, and return to its baseline fds, connections and RSS.
case_vanish() {
  local c=vanish port=$((PORT_BASE + 0))
  if ! start_server $c $port "${VANISH_FLAGS[@]}"; then fail $c "$srv_note"; return; fi
  [ -n "$srv_note" ] && note "$srv_note"
  local pid=$srv_pid
  local fds0 act0 rss0
  act0=$(idle_active $port)
  fds0=$(fds_of $pid) rss0=$(rss_of $pid)
  note "baseline: fds $fds0, connections_active $act0 (kvctl's own connection included), VmRSS $rss0 KiB"
  local t0=$SECONDS
  timeout 900 "$RAW" vanish --server="$addr:$port" --rounds="$ROUNDS" --parallel=$VANISH_PARALLEL \
    --puts=$VANISH_PUTS --value_size=$VANISH_VALUE > "$logs/raw-vanish.txt" 2> "$logs/raw-vanish.err"
  local rrc=$?
  note "storm ($((SECONDS - t0)) s, raw_client exit $rrc): $(cat "$logs/raw-vanish.txt")"
  local storm="" line f v want=$((VANISH_PARALLEL * ROUNDS))
  line=$(grep -m1 "^raw_client vanish:" "$logs/raw-vanish.txt")
  [ $rrc -eq 0 ] || storm="raw_client vanish exit $rrc$(last_err "$logs/raw-vanish.err")"
  for f in connected done; do
    v=$(field_of "$line" $f)
    [ "$v" = "$want" ] || storm="${storm:+$storm; }$f ${v:-?} of $want rounds"
  done
  for f in refused connect_failed errors send_errors streams_stopped; do
    v=$(field_of "$line" $f)
    [ "$v" = 0 ] || storm="${storm:+$storm; }$f ${v:-?}"
  done
  local fds1="?" act1="?" rss1="?" i
  for i in $(seq "$SETTLE_S"); do
    kill -0 "$pid" 2>/dev/null || break
    act1=$(stat_of $port connections_active) fds1=$(fds_of "$pid")
    [ "$fds1" = "$fds0" ] && [ "$act1" = "$act0" ] && [ "$act1" != "?" ] && break
    sleep 1
  done
  rss1=$(rss_of "$pid")
  note "after: fds $fds1, connections_active $act1, VmRSS $rss1 KiB (settled within ${i} s)"
  local why="$storm" bad
  bad=$(server_ok) || why="${why:+$why; }$bad"
  if [ -z "$bad" ]; then
    kv_roundtrip $port || why="put/get via kvctl failed: $(tail -1 "$logs/kvctl.err")"
    [ "$fds1" = "$fds0" ] || why="${why:+$why; }fds $fds0 -> $fds1"
    [ "$act1" = "$act0" ] && [ "$act1" != "?" ] || why="${why:+$why; }connections_active $act0 -> $act1"
    if [ $RSS_BOUND = 0 ]; then
      note "VmRSS not bounded: kvserver is a ThreadSanitizer build"
    elif [[ "$rss0" =~ ^[0-9]+$ && "$rss1" =~ ^[0-9]+$ ]]; then
      [ "$rss1" -le $((rss0 + RSS_SLACK_KIB)) ] || why="${why:+$why; }VmRSS grew $rss0 -> $rss1 KiB"
    else
      why="${why:+$why; }VmRSS unreadable"
    fi
  fi
  stop_server "$pid" "$srv_log" || why="${why:+$why; }$stop_why"
  verdict $c "$why" "$VANISH_PARALLEL x $ROUNDS rounds"
}

# (b) Credits: exactly `credits` requests at once are all answered; credits + CREDITS_OVER_BY
# at once get the client dropped: raw_client saw the server disconnect it (over=dropped is
# RDMA_CM_EVENT_DISCONNECTED, not a timeout or an error completion alone) and the server's
# credit_drops rose by one, this connection.
case_credits() {
  local c=credits port=$((PORT_BASE + 1))
  if ! start_server $c $port "${CREDITS_FLAGS[@]}"; then fail $c "$srv_note"; return; fi
  [ -n "$srv_note" ] && note "$srv_note"
  local out rrc why="" bad drops0 drops1 over
  drops0=$(stat_of $port credit_drops)
  out=$(timeout 120 "$RAW" credits --server="$addr:$port" --over_by="$CREDITS_OVER_BY" 2> "$logs/raw-credits.err")
  rrc=$?
  note "$out (raw_client exit $rrc)"
  [ $rrc -eq 0 ] || why="raw_client credits exit $rrc$(last_err "$logs/raw-credits.err")"
  [ "$(field_of "$out" within)" = ok ] || why="${why:+$why; }within-credits requests not all answered OK"
  over=$(field_of "$out" over)
  [ "$over" = dropped ] ||
    why="${why:+$why; }a client exceeding its credits was not dropped (over=${over:-?})"
  drops1=$(stat_of $port credit_drops)
  note "credit_drops: $drops0 before, $drops1 after"
  if ! [[ "$drops0" =~ ^[0-9]+$ ]] || [ "$drops1" != $((drops0 + 1)) ]; then
    why="${why:+$why; }credit_drops $drops0 -> $drops1, expected one more"
  fi
  bad=$(server_ok) || why="${why:+$why; }$bad"
  [ -z "$why" ] && { kv_roundtrip $port || why="put/get after the test failed"; }
  stop_server "$srv_pid" "$srv_log" || why="${why:+$why; }$stop_why"
  verdict $c "$why"
}

p99_of() {  # kvbench-stdout [op] -> p99 (us) of op, or of READ and UPDATE the larger; "?" if none
  awk -F', ' -v op="${2:-}" '$2=="99thPercentileLatency(us)" &&
      ((op == "" && ($1=="[READ]" || $1=="[UPDATE]")) || $1=="[" op "]") {
        if ($3 + 0 > m) m = $3 + 0; n++ } END { if (n) print m; else print "?" }' "$1"
}
errors_of() {  # kvbench-stdout -> sum of Return=ERROR
  awk -F', ' '$2=="Return=ERROR"{e += $3} END {print e + 0}' "$1"
}
ratio_of() {  # a b -> b/a with one decimal, or "?"
  if [[ "$1" =~ ^[0-9]+$ && "$2" =~ ^[0-9]+$ && "$1" -gt 0 ]]; then
    awk -v a="$1" -v b="$2" 'BEGIN{printf "%.1f", b / a}'
  else
    echo "?"
  fi
}
# The flooder for FLOOD_SECONDS: raw_client flood, started again whenever the server drops it,
# so that the pressure lasts the whole time. One summary line per connection.
flood_for() {  # port out-file
  local end=$((SECONDS + FLOOD_SECONDS)) left
  while left=$((end - SECONDS)); [ "$left" -gt 0 ]; do
    timeout $((left + 60)) "$RAW" flood --server="$addr:$1" --seconds="$left" \
      --value_size=$FLOOD_VALUE --depth=$FLOOD_DEPTH >> "$2" 2>> "$logs/raw-flood.err" || sleep 0.5
  done
}

# (c) Flood: a client pipelines 64 KiB PUTs past its credits for FLOOD_SECONDS (reconnecting
# when dropped) while a kvbench victim runs a 50/50 mix; the victim must not fail any
# operation. p99 alone and under flood are reported (bounded if FLOOD_MAX_P99_RATIO is set).
case_flood() {
  local c=flood port=$((PORT_BASE + 2))
  if ! start_server $c $port "${FLOOD_FLAGS[@]}"; then fail $c "$srv_note"; return; fi
  [ -n "$srv_note" ] && note "$srv_note"
  local bench=(--server="$addr:$port" "--records=$VICTIM_RECORDS")
  local run=(run "${bench[@]}" --operations="$VICTIM_OPS" --read-proportion=0.5 --update-proportion=0.5)
  local why="" bad
  timeout 300 "$KVBENCH" load "${bench[@]}" > "$logs/flood-load.txt" 2>&1 || why="kvbench load failed"
  timeout 300 "$KVBENCH" "${run[@]}" --json="$logs/flood-alone.json" > "$logs/flood-alone.txt" 2> "$logs/flood-alone.err" ||
    why="${why:+$why; }victim alone: kvbench exit $?"
  : > "$logs/raw-flood.txt"
  flood_for $port "$logs/raw-flood.txt" &
  local flooder=$! t0=$SECONDS
  sleep 1
  timeout 300 "$KVBENCH" "${run[@]}" --json="$logs/flood-under.json" > "$logs/flood-under.txt" 2> "$logs/flood-under.err"
  local vrc=$? vtime=$((SECONDS - t0))
  wait $flooder
  local p0 p1 e0 e1 ratio op
  p0=$(p99_of "$logs/flood-alone.txt") p1=$(p99_of "$logs/flood-under.txt")
  e0=$(errors_of "$logs/flood-alone.txt") e1=$(errors_of "$logs/flood-under.txt")
  ratio=$(ratio_of "$p0" "$p1")
  for op in READ UPDATE; do
    note "victim $op p99: alone $(p99_of "$logs/flood-alone.txt" $op) us, under flood $(p99_of "$logs/flood-under.txt" $op) us"
  done
  note "victim p99 (larger of READ, UPDATE): alone ${p0} us, under flood ${p1} us, ratio ${ratio}x; failed operations alone $e0, under flood $e1 (victim exit $vrc, finished ${vtime} s after the flood began)"
  local conns flooded drops
  conns=$(grep -c "^raw_client flood:" "$logs/raw-flood.txt") drops=$(grep -c "fate=\"dropped" "$logs/raw-flood.txt")
  # Connections that got requests to the server (a failed connect prints connected=0, no sent=).
  flooded=$(awk '/^raw_client flood:/ { for (i = 1; i <= NF; i++) if ($i ~ /^sent=[1-9]/) n++ }
                 END { print n + 0 }' "$logs/raw-flood.txt")
  note "flooder: $conns connection(s) in ${FLOOD_SECONDS} s ($flooded got requests through), $drops dropped by the server; first: $(head -1 "$logs/raw-flood.txt")"
  [ "$vrc" -eq 0 ] || why="${why:+$why; }victim under flood: kvbench exit $vrc"
  [ "$e1" = 0 ] && [ "$e0" = 0 ] || why="${why:+$why; }victim had failed operations"
  [ "$p0" != "?" ] || why="${why:+$why; }no victim p99 alone"
  [ "$p1" != "?" ] || why="${why:+$why; }no victim p99 under flood"
  [ "$flooded" -gt 0 ] || why="${why:+$why; }the flooder never got a request through ($conns attempt(s)$(last_err "$logs/raw-flood.err"))"
  if [ -n "$FLOOD_MAX_P99_RATIO" ] && [ "$ratio" != "?" ] &&
     awk -v r="$ratio" -v m="$FLOOD_MAX_P99_RATIO" 'BEGIN{exit !(r > m)}'; then
    why="${why:+$why; }p99 ratio $ratio above $FLOOD_MAX_P99_RATIO"
  fi
  bad=$(server_ok) || why="${why:+$why; }$bad"
  stop_server "$srv_pid" "$srv_log" || why="${why:+$why; }$stop_why"
  verdict $c "$why" "p99 ${p0} -> ${p1} us"
}

# (d) Half-open connects: HALFOPEN_COUNT rdma_cm connects that never complete, against a server
# with --max_connections=HALFOPEN_MAX_CONNECTIONS. After the accept deadline, while the holder
# still keeps its connects, a real client connects; setup_timeouts counts every connect, and
# connections_active returns to its idle value.
case_halfopen() {
  local c=halfopen port=$((PORT_BASE + 3))
  if ! start_server $c $port "${HALFOPEN_FLAGS[@]}"; then fail $c "$srv_note"; return; fi
  [ -n "$srv_note" ] && note "$srv_note"
  # Every slot must go to the holder: start_server's kvctl connection is torn down some 350 ms
  # after it exits (300 ms grace on rxe, a worker tick), so wait until the server reports none
  # (over HTTP, which takes no slot); while the holder connects, nothing else connects either.
  local idle
  idle=$(await_metric rkv_connections_active 0 30) ||
    note "rkv_connections_active still $idle before the half-open connects"
  timeout $((HALFOPEN_HOLD + 60)) "$RAW" halfopen --server="$addr:$port" --count=$HALFOPEN_COUNT \
    --hold=$HALFOPEN_HOLD > "$logs/raw-halfopen.txt" 2> "$logs/raw-halfopen.err" &
  local holder=$! t0=$SECONDS
  sleep 2
  note "rkv_connections_active with $HALFOPEN_COUNT half-open connects: $(metric_of rkv_connections_active)"
  sleep "$(awk -v t="$ACCEPT_TIMEOUT_S" 'BEGIN{print t + 3}')"
  # The holder keeps its connects for HALFOPEN_HOLD s: a kvctl that gets in before then got a
  # slot the accept deadline freed. Retried (a slow host may reach the deadline later than
  # the sleep above; the server refuses at --max_connections meanwhile) up to HALFOPEN_RETRY_S.
  local why="" bad t1 rt=failed tries=0
  t1=$(now_ms)
  while [ $((SECONDS - t0)) -lt $HALFOPEN_RETRY_S ]; do
    tries=$((tries + 1))
    kv_roundtrip $port && { rt=ok; break; }
    sleep 1
  done
  [ $rt = ok ] || why="kvctl put/get within $HALFOPEN_RETRY_S s of the connects (held $HALFOPEN_HOLD s) failed: $(tail -1 "$logs/kvctl.err")"
  release $holder
  note "$((SECONDS - t0)) s after the connects (--accept_timeout=$ACCEPT_TIMEOUT_S): kvctl put/get $rt after $tries attempt(s), $(( $(now_ms) - t1 )) ms"
  local tmo; tmo=$(metric_of rkv_connection_setup_timeouts_total)
  note "setup_timeouts $tmo (half-open connects $HALFOPEN_COUNT)"
  [ "$tmo" != "?" ] && [ "$tmo" -ge $HALFOPEN_COUNT ] || why="${why:+$why; }setup_timeouts $tmo, expected >= $HALFOPEN_COUNT"
  local act1
  act1=$(await_metric rkv_connections_active 0 10) || why="${why:+$why; }rkv_connections_active $act1, not 0"
  note "rkv_connections_active after the deadline: $act1"
  wait $holder
  local hrc=$? sent
  note "holder: $(cat "$logs/raw-halfopen.txt") (exit $hrc)"
  sent=$(field_of "$(grep -m1 "^raw_client halfopen:" "$logs/raw-halfopen.txt")" connects_sent)
  [ $hrc -eq 0 ] && [ "$sent" = $HALFOPEN_COUNT ] ||
    why="${why:+$why; }the holder sent ${sent:-?} of $HALFOPEN_COUNT connects (exit $hrc)"
  bad=$(server_ok) || why="${why:+$why; }$bad"
  stop_server "$srv_pid" "$srv_log" || why="${why:+$why; }$stop_why"
  verdict $c "$why"
}

# (e) Slow exchange peers: with a half header, a PARAMS without READY and a finished handshake
# whose socket is then silent all stalled on the tcp exchange, a real manual-mode client
# still connects, within half of the server's exchange timeout (a server that served one
# handshake at a time would hold it behind a stalled peer for the whole timeout). The peers are
# released (SIGUSR1) once kvctl is done.
case_slow_exchange() {
  local c=slow-exchange port=$((PORT_BASE + 4))
  if ! start_server $c $port "${SLOW_FLAGS[@]}"; then fail $c "$srv_note"; return; fi
  [ -n "$srv_note" ] && note "$srv_note"
  local t1 alone stalled why="" bad
  t1=$(now_ms)
  ctl $port --exchange=tcp put slow-alone v 2>>"$logs/kvctl.err"
  alone=$(( $(now_ms) - t1 ))
  # tcp-hold first (its handshake completes), then tcp-noready (answered, never READY), then
  # tcp-half (half a header): each stalls a later stage of the exchange.
  local pids=() m
  for m in tcp-hold tcp-noready tcp-half; do
    timeout $((SLOW_HOLD + 60)) "$RAW" $m --server="$addr:$port" --hold=$SLOW_HOLD \
      --timeout_ms=$EXCHANGE_TIMEOUT_MS > "$logs/raw-$m.txt" 2> "$logs/raw-$m.err" &
    pids+=($!)
    sleep 2
  done
  t1=$(now_ms)
  local rc=0
  ctl $port --exchange=tcp --exchange_timeout_ms=$SLOW_KVCTL_TIMEOUT_MS put slow-key slow-value 2>>"$logs/kvctl.err" || rc=$?
  stalled=$(( $(now_ms) - t1 ))
  note "kvctl --exchange=tcp put: alone $alone ms; with 3 stalled peers $stalled ms (exit $rc, kvctl exchange timeout $SLOW_KVCTL_TIMEOUT_MS ms, server's $EXCHANGE_TIMEOUT_MS ms)"
  [ $rc -eq 0 ] || why="kvctl --exchange=tcp put behind 3 stalled peers failed: $(tail -1 "$logs/kvctl.err")"
  release "${pids[@]}"
  local i prc peers=(tcp-hold tcp-noready tcp-half)
  for i in 0 1 2; do
    m=${peers[$i]}
    wait "${pids[$i]}"
    prc=$?
    note "$(cat "$logs/raw-$m.txt") (exit $prc)"
    # Each peer got as far as it should (connected; tcp-hold and tcp-noready answered with the
    # server's PARAMS, tcp-hold's READY sent), or it stalled nothing.
    [ $prc -eq 0 ] || why="${why:+$why; }$m exit $prc$(last_err "$logs/raw-$m.err")"
    if [ $m != tcp-half ] && ! grep -q 'received="PARAMS (' "$logs/raw-$m.txt"; then
      why="${why:+$why; }$m got no PARAMS from the server"
    fi
    if [ $m = tcp-hold ] && ! grep -q ' sent=PARAMS,READY ' "$logs/raw-$m.txt"; then
      why="${why:+$why; }tcp-hold did not finish its handshake"
    fi
    # The two that stall the exchange must still have been stalling it (not yet given up on by
    # the server) when kvctl was done.
    [ $m = tcp-hold ] || grep -q 'server_closed="\?no' "$logs/raw-$m.txt" ||
      why="${why:+$why; }$m was no longer stalling the server when kvctl ran"
  done
  bad=$(server_ok) || why="${why:+$why; }$bad"
  stop_server "$srv_pid" "$srv_log" || why="${why:+$why; }$stop_why"
  verdict $c "$why" "${stalled} ms"
}

# (f) A GET-only client (no RPC, no traffic at all) outlives the server's --peer_timeout.
case_get_only() {
  local c=get-only port=$((PORT_BASE + 5))
  if ! start_server $c $port "${GETONLY_FLAGS[@]}"; then fail $c "$srv_note"; return; fi
  [ -n "$srv_note" ] && note "$srv_note"
  local out why="" bad
  out=$(timeout $((GETONLY_SECONDS + 60)) "$RAW" hold --server="$addr:$port" --seconds=$GETONLY_SECONDS \
    --get_every_ms=0 2> "$logs/raw-hold.err")
  note "$out (server "--peer_timeout=$PEER_TIMEOUT_S")"
  grep -q " alive=1" <<< "$out" || why="the idle client was dropped: $(tail -1 "$logs/raw-hold.err")"
  bad=$(server_ok) || why="${why:+$why; }$bad"
  stop_server "$srv_pid" "$srv_log" || why="${why:+$why; }$stop_why"
  verdict $c "$why"
}

for t in "$KVSERVER" "$RAW" "$KVCTL" "$KVBENCH"; do
  [ -x "$t" ] || { echo "hostile: $t is missing (build raw_client kvserver kvctl kvbench)"; exit 2; }
done
echo "hostile: kvserver $KVSERVER, logs in $logs, cases: $CASES"
for case_name in $CASES; do
  case $case_name in
    vanish) case_vanish ;;
    credits) case_credits ;;
    flood) case_flood ;;
    halfopen) case_halfopen ;;
    slow-exchange) case_slow_exchange ;;
    get-only) case_get_only ;;
    *) fail "$case_name" "unknown case" ;;
  esac
done
echo "hostile checks: $passed passed, $failed failed"
[ $failed -eq 0 ]
