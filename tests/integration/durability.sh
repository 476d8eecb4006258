#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# Durability of kvserver --data_dir (issue 11), in the RDMA sandbox. Six parts:
#  1. kill -9 cycles: one load (tests/integration/lin_load.cc --reconnect --owned_keys) runs
#     through DUR_CYCLES kill -9 / restart cycles of kvserver on one data directory (a guest
#     tmpfs), --fsync always, everysec, no in turn (a process crash loses nothing in any mode),
#     small --snapshot_log_size so that snapshots are taken (and killed) under the load. Each
#     kill comes 1-4 s (random) after the restarted server's first client connection, and only
#     once that server has logged a write (every kill is asserted to come under load: a client
#     connected, writes logged by the server being killed, lin_load running; and the clients,
#     over all, saw at least one restart per kill). Per cycle: fsync mode, time of the kill, the
#     restarted server's recovery line and warnings. After the last restart lin_load reads
#     every key once more; the whole history, across the restarts, must be linearizable
#     (tests/lincheck; lost writes have an unknown outcome), and the durability tally of the
#     owned keys (every acknowledged PUT readable, every acknowledged DELETE still deleted) must
#     find no violation.
#  2. Disk full: a 1 MiB tmpfs, --fsync=always; PUTs of 60 KB until one fails: IO_ERROR "No
#     space left"; GETs, STATS still answer (wal_failures > 0); after a remount with room a PUT
#     succeeds; after kill -9 and restart every acknowledged PUT is there, refused ones are not.
#  3. Torn tail and corruption: a partial record appended to the log is dropped at restart with a
#     warning (offset, bytes); a flipped byte in a record with records after it refuses the
#     start (exit non-zero, file and offset named, nothing changed on disk); --recover=truncate
#     starts and keeps the keys before the damage.
#  4. Lock: a second kvserver on the same --data_dir exits non-zero, "in use".
#  5. Memory-only: without --data_dir kvserver says "memory-only" in one line. Negative control
#     (DUR_NEGATIVE=1): the part-1 load across a restart of a memory-only server must make the
#     durability tally report violations (so that part 1's passes are not vacuous).
#  6. Snapshots: `kvctl snapshot` (skipped if this kvctl has no such command): snapshots_taken,
#     a snap-*.rkv, older logs removed, recovery from it after kill -9; automatic snapshots with
#     --snapshot_log_size=200K: several taken, every key back after kill -9.
# Every kvserver is killed on exit; server logs are searched for crash patterns. Ends with one
# line "durability: ... PASSED|FAILED".
#   tests/integration/durability.sh BUILD_DIR                 (ctest: enters the sandbox)
#   tests/integration/durability.sh BUILD_DIR ADDR LOGDIR     (inside the sandbox, as root)
# Environment (also as RKV_DUR_X, since tools/rdma-sandbox passes only RKV_* into the VM):
#   DUR_CYCLES     kill -9 cycles (default 10; CI needs at least 10)
#   DUR_CLIENTS    lin_load clients in part 1 (default 4; they busy-poll: more slow the VM)
#   DUR_OWNED      owned keys per client (default 8)
#   DUR_SEED       lin_load seed (default: random)
#   DUR_PORT       first port; parts use PORT..PORT+7 (default 7490)
#   DUR_MEMORY     kvserver --memory (default 8M)
#   DUR_SNAPSHOT_LOG_SIZE   --snapshot_log_size in part 1 (default 256K)
#   DUR_NEGATIVE   1 (default) runs the memory-only negative control, 0 skips it
#   DUR_SERVER     kvserver binary (default BUILD_DIR/kvserver)
# Logs, histories and server logs stay in LOGDIR.
set -uo pipefail
build=$(cd "${1:?usage: durability.sh BUILD_DIR [ADDR LOGDIR]}" && pwd) || exit 2
if [ $# -eq 1 ] && [ -z "${RKV_IN_SANDBOX:-}" ]; then
  export RKV_IN_SANDBOX=1
  for v in CYCLES CLIENTS OWNED SEED PORT MEMORY SNAPSHOT_LOG_SIZE NEGATIVE SERVER; do
    d="DUR_$v"
    [ -z "${!d:-}" ] || export "RKV_DUR_$v=${!d}"  # only RKV_* reaches the VM
  done
  c=${DUR_CYCLES:-${RKV_DUR_CYCLES:-10}}
  exec "$(dirname "$0")/../../tools/rdma-sandbox" --timeout $((540 + 30 * c)) -- sh -c \
    "$0 \"$build\" \$RKV_SANDBOX_ADDR \$(mktemp -d /tmp/rkv-dur.XXXXXX)"
fi
addr=${2:?usage: durability.sh BUILD_DIR ADDR LOGDIR}
logs=${3:?usage: durability.sh BUILD_DIR ADDR LOGDIR}
mkdir -p "$logs" || exit 2
logs=$(cd "$logs" && pwd)

KNOB_PREFIX=DUR
. "$(dirname "$0")/common.sh"
CYCLES=$(knob CYCLES 10)
CLIENTS=$(knob CLIENTS 4)
OWNED=$(knob OWNED 8)
SEED=$(knob SEED $((RANDOM * 32768 + RANDOM)))
PORT=$(knob PORT 7490)
MEMORY=$(knob MEMORY 8M)
SNAP_SIZE=$(knob SNAPSHOT_LOG_SIZE 256K)
NEGATIVE=$(knob NEGATIVE 1)
KVSERVER=$(knob SERVER "$build/kvserver")
KVCTL=$build/kvctl
LOAD=$build/lin_load
for t in "$KVSERVER" "$LOAD" "$KVCTL"; do
  [ -x "$t" ] || { echo "durability: $t is missing (build kvserver kvctl lin_load)"; exit 2; }
done

usage=$("$KVCTL" 2>&1)  # kvctl without a command prints its usage
has_snapshot=0
[[ $usage == *snapshot* ]] && has_snapshot=1
failures=()
fail() { echo "[case FAIL] durability: $*"; failures+=("$*"); }
pass() { echo "[case PASS] durability: $*"; }

# --- servers, mounts, clean-up -------------------------------------------------------------
declare -A live  # pids of the servers and loads this script started and has not reaped
mounts=()
cleanup() {
  local p m
  # TERM first: a lin_load runs under timeout(1), which passes TERM on to it
  for p in "${!live[@]}"; do kill -TERM "$p" 2>/dev/null; done
  [ ${#live[@]} -eq 0 ] || sleep 0.5
  for p in "${!live[@]}"; do kill -9 "$p" 2>/dev/null; done
  for p in "${!live[@]}"; do wait "$p" 2>/dev/null; done
  for m in "${mounts[@]}"; do umount "$m" 2>/dev/null; done
}
trap cleanup EXIT
trap 'exit 130' INT TERM

# tmpfs NAME SIZE : mounts a guest tmpfs of SIZE at $logs/NAME and sets $dir to it
tmpfs() {
  dir="$logs/$1"
  mkdir -p "$dir" || return 1
  mount -t tmpfs -o "size=$2,mode=0700" tmpfs "$dir" || return 1
  mounts+=("$dir")
}

ctl() {  # PORT ARGS... : kvctl against the server on PORT
  local p=$1; shift
  timeout 60 "$KVCTL" --server="$addr:$p" --timeout_ms=5000 "$@"
}

# Under TCG with busy-polling clients every process the shell starts costs 0.1 s or more, so
# the waits and the log parsing below use bash builtins.
srv=""      # pid of the last server started
srv_log=""  # its log: $logs/srv-NAME-NN.log, one file per start
declare -A starts
# start NAME PORT ARGS... : starts kvserver, waits until it logs "kvserver listening" (cheaper
# than a kvctl probe; connects that arrive before its rdma_cm thread runs wait in the listen
# queue); 0 if up, 1 if it exited (its status in $srv_rc) or was not listening within 90 s.
srv_rc=0
t_up=0
start() {
  local name=$1 port=$2 txt i; shift 2
  starts[$name]=$((${starts[$name]:-0} + 1))
  printf -v srv_log "%s/srv-%s-%02d.log" "$logs" "$name" "${starts[$name]}"
  echo "=== kvserver $*" > "$srv_log"
  "$KVSERVER" --listen="$addr:$port" --memory="$MEMORY" --workers=2 "$@" >> "$srv_log" 2>&1 &
  srv=$!
  live[$srv]=1
  for ((i = 0; i < 900; ++i)); do
    IFS= read -r -d '' txt < "$srv_log"
    if [[ $txt == *"kvserver listening on"* ]]; then
      t_up=${EPOCHREALTIME/./}  # microseconds
      return 0
    fi
    if ! kill -0 "$srv" 2>/dev/null; then
      wait "$srv"; srv_rc=$?
      unset "live[$srv]"
      return 1
    fi
    sleep 0.1
  done
  srv_rc="none (not listening after 90 s)"
  return 1
}
stop_rc=0
stop() {  # PID SIGNAL : signals and reaps it; its exit status in $stop_rc
  kill "-$2" "$1" 2>/dev/null
  wait "$1" 2>/dev/null; stop_rc=$?
  unset "live[$1]"
}
stat_of() {  # PORT NAME -> the STATS value (empty if none)
  ctl "$1" stats 2>/dev/null | awk -v n="$2" '$1 == n {print $2}'
}
# recovery LOGFILE : sets $rec_line to its "recovered ..." summary and $rec_warnings to its
# "recovery: ..." warnings (one per line, indented)
recovery() {
  local l
  rec_line="" rec_warnings=""
  while IFS= read -r l; do
    case $l in
      *"data_dir "*": recovered "*) rec_line="recovered ${l#*: recovered }" ;;
      *"] recovery: "*) rec_warnings+="      warning: ${l#*] recovery: }"$'\n' ;;
    esac
  done < "$1"
}
recovery_line() { recovery "$1"; echo "$rec_line"; }
warnings() { recovery "$1"; printf '%s' "$rec_warnings"; }
# newest_wal: $wal_now = the newest log file in $dir (names sort by generation), $wal_size = its
# size. A server opens a new one at its start; it grows, or a newer one follows it (a snapshot
# rotates the log only once the current one has records), only when the server logs writes.
newest_wal() {
  local f
  wal_now=""
  for f in "$dir"/wal-*.log; do [ -e "$f" ] && wal_now=$f; done
  wal_size=0
  [ -z "$wal_now" ] || wal_size=$(stat -c %s "$wal_now" 2>/dev/null || echo 0)
}
errtext() {  # FILE -> its lines that are not glog INFO/WARNING lines, on one line
  grep -v -E "^[IW][0-9]{8} " "$1" | tr '\n' ' ' | sed 's/ *$//'
}
vfile() {  # NAME BYTES -> writes a value file $logs/vals/NAME (the value: NAME-... of BYTES bytes)
  mkdir -p "$logs/vals"
  { printf '%s-' "$1"; head -c "$(($2 - ${#1} - 1))" /dev/zero | tr '\0' "${3:-v}"; } \
    > "$logs/vals/$1"
}
# Many PUTs and GETs on one connection (a kvctl process per key costs about a second under
# TCG): lin_load --batch (see lin_load.cc). batch PORT NAME runs $logs/NAME.batch, output in
# $logs/NAME.out; its exit status: 0 if every command did what it should.
batch() {
  timeout 300 "$LOAD" --server="$addr:$1" --timeout_ms=5000 --batch="$logs/$2.batch" \
    > "$logs/$2.out" 2> "$logs/$2.err"
}
# puts PORT NAME KEY... : PUTs each KEY with the value $logs/vals/KEY (stops at a failure)
puts() {
  local p=$1 n=$2 k; shift 2
  for k in "$@"; do echo "put $k @$logs/vals/$k"; done > "$logs/$n.batch"
  batch "$p" "$n"
}
# verify PORT NAME KEY=VALUEFILE|KEY=ABSENT... : each key holds exactly that value (or is
# absent); prints the keys that do not
verify() {
  local p=$1 n=$2 kv; shift 2
  for kv in "$@"; do
    if [ "${kv#*=}" = ABSENT ]; then echo "get ${kv%%=*} -"; else echo "get ${kv%%=*} @${kv#*=}"; fi
  done > "$logs/$n.batch"
  batch "$p" "$n" && return 0
  grep -E "MISMATCH|stopped" "$logs/$n.out" | head -5 | sed 's/^/    /'
  tail -2 "$logs/$n.err" | sed 's/^/    stderr: /'
  return 1
}

t_start=$SECONDS
t_part=""
part_done() {  # prints the time the previous part took
  [ -z "$t_part" ] || echo "  ($((SECONDS - t_part)) s)"
  t_part=$SECONDS
}
echo "durability: kvserver on $addr, ports $PORT.., $CYCLES kill -9 cycles, seed $SEED, logs in $logs"

# --- 5. memory-only warning (and the negative control) -------------------------------------
part_done; echo "--- memory-only (part 5)"
P=$((PORT + 5))
if start memonly $P; then
  n=$(grep -c "memory-only" "$srv_log")
  if [ "$n" = 1 ]; then
    pass "one line: $(grep "memory-only" "$srv_log" | sed 's/^[IWE][0-9]* [0-9:.]* *[0-9]* [a-z_.]*:[0-9]*\] //')"
  else
    fail "memory-only server printed $n lines containing 'memory-only'"
  fi
  if [ "$has_snapshot" = 1 ]; then
    ctl $P snapshot > /dev/null 2> "$logs/snap.err"; rc=$?
    [ $rc -ne 0 ] && grep -q "memory-only" "$logs/snap.err" &&
      pass "kvctl snapshot on it: exit $rc, $(errtext "$logs/snap.err")" ||
      fail "kvctl snapshot on a memory-only server: exit $rc, $(errtext "$logs/snap.err")"
  else
    echo "[case SKIP] durability: kvctl snapshot on a memory-only server (this kvctl has no 'snapshot' command)"
  fi
  if [ "$NEGATIVE" = 1 ]; then
    rm -f "$logs/neg.stop"
    timeout 300 "$LOAD" --server="$addr:$P" --clients=4 --prefill=0 --seed=$((SEED + 7)) \
      --hot_keys=2 --keys=20 --owned_keys=4 --reconnect --stop_file="$logs/neg.stop" \
      --duration_s=200 --history="$logs/negative.hist" > "$logs/negative.txt" 2> "$logs/negative.err" &
    load=$!; live[$load]=1
    for _ in $(seq 300); do grep -q "run phase started" "$logs/negative.txt" && break; sleep 0.2; done
    sleep 2.5
    stop "$srv" 9
    touch "$logs/neg.stop"  # no more writes after the restart: only the final reads
    start memonly $P || fail "memory-only kvserver did not restart"
    wait $load; r=$?; unset "live[$load]"
    tally=$(grep "^durability: [0-9]" "$logs/negative.txt")
    if [ $r -ne 0 ] && echo "$tally" | grep -q " [1-9][0-9]* violations"; then
      pass "negative control: a memory-only restart under the load is caught: ${tally#durability: }"
    else
      fail "negative control: lin_load exit $r, tally: ${tally:-none} (a restart that lost every write went unnoticed)"
      tail -5 "$logs/negative.txt" "$logs/negative.err" | sed 's/^/    /'
    fi
  else
    echo "[case SKIP] durability: negative control, a memory-only restart under the load (DUR_NEGATIVE=$NEGATIVE)"
  fi
  stop "$srv" TERM
else
  fail "memory-only kvserver did not start (exit $srv_rc)"; tail -5 "$srv_log"
fi

# --- 1. kill -9 cycles under load ------------------------------------------------------------
part_done; echo "--- kill -9 cycles (part 1): $CYCLES cycles, $CLIENTS clients + $OWNED owned keys each, --snapshot_log_size=$SNAP_SIZE"
P=$((PORT + 1))
modes=(always everysec no)
tmpfs kill 512M || fail "cannot mount a tmpfs for part 1 (root needed: the sandbox VM); using a plain directory"
cycles_done=0 inline_seen=0 inline_cycles=0
if start kill $P --data_dir="$dir" --fsync=always --snapshot_log_size="$SNAP_SIZE"; then
  rm -f "$logs/kill.stop"
  timeout $((240 + 30 * CYCLES)) "$LOAD" --server="$addr:$P" --clients="$CLIENTS" --prefill=0.3 --seed="$SEED" \
    --hot_keys=4 --keys=100 --owned_keys="$OWNED" --reconnect --stop_file="$logs/kill.stop" \
    --timeout_ms=3000 --duration_s=$((120 + 30 * CYCLES)) --history="$logs/kill.hist" \
    > "$logs/kill-load.txt" 2> "$logs/kill-load.err" &
  load=$!; live[$load]=1
  for _ in $(seq 900); do
    grep -q "run phase started" "$logs/kill-load.txt" && break
    kill -0 $load 2>/dev/null || break
    sleep 0.2
  done
  grep "^lin_load: server" "$logs/kill-load.txt" | sed 's/^/  /'
  if grep -q "run phase started" "$logs/kill-load.txt"; then
    mode=always
    newest_wal; wal0=$wal_now size0=$wal_size  # the run phase's writes come after this
    for c in $(seq "$CYCLES"); do
      # Under load, asserted for every kill: a client connected to this server, it logged a
      # write after its start (or the run phase's), and the load still runs. The kill comes
      # 1-4 s (random) after the first connection, or once the write is logged if that is later.
      # (A STATS probe would take seconds under TCG: the server log and the log files tell.)
      # Waits are deadlines (120 s each), not timings.
      t_wait=$SECONDS
      IFS= read -r -d '' txt < "$srv_log"
      while [[ $txt != *"connection established"* ]] && ((SECONDS - t_wait < 120)) && kill -0 "$srv" 2>/dev/null; do
        sleep 0.1
        IFS= read -r -d '' txt < "$srv_log"
      done
      if [[ $txt != *"connection established"* ]]; then
        fail "cycle $c: no client connected to the kvserver within 120 s (the kill would not come under load)"
        break
      fi
      t_conn=${EPOCHREALTIME/./}
      ms=$((1000 + RANDOM % 3000))
      wrote=0 t_wait=$SECONDS
      while ((SECONDS - t_wait < 120)); do
        newest_wal
        if [ "$wal_now" != "$wal0" ] || [ "$wal_size" -gt "$size0" ]; then wrote=1; break; fi
        kill -0 "$srv" 2>/dev/null || break
        sleep 0.2
      done
      ms_wrote=$(((${EPOCHREALTIME/./} - t_conn) / 1000))
      if [ $wrote != 1 ]; then
        fail "cycle $c: the kvserver logged no write within 120 s of a client's connection ($(basename "$wal0") stays $size0 bytes; the kill would not come under load)"
        break
      fi
      rest=$((ms - ms_wrote))
      if [ $rest -gt 0 ]; then
        printf -v frac %03d $((rest % 1000))
        sleep "$((rest / 1000)).$frac"
      fi
      kill -0 "$srv" 2>/dev/null || { fail "cycle $c: kvserver died before the kill"; break; }
      kill -0 "$load" 2>/dev/null || { fail "cycle $c: lin_load exited before the kill (no load)"; break; }
      # Under --fsync=no|everysec the workers log writes themselves (no hand-over): these kills
      # then come while workers, not pool threads, hold writes in flight.
      if [ "$mode" != always ]; then
        inline_cycles=$((inline_cycles + 1))
        wi=$(stat_of $P writes_inline)
        [ "${wi:-0}" -gt 0 ] && inline_seen=$((inline_seen + 1))
      fi
      t0=${EPOCHREALTIME/./}
      ms=$(((t0 - t_up) / 1000)) ms_conn=$(((t0 - t_conn) / 1000))
      stop "$srv" 9
      gone=$(((${EPOCHREALTIME/./} - t0) / 100000))
      next=${modes[$((c % 3))]}
      if ! start kill $P --data_dir="$dir" --fsync="$next" --snapshot_log_size="$SNAP_SIZE"; then
        fail "cycle $c: kvserver did not restart (exit $srv_rc)"
        tail -5 "$srv_log" | sed 's/^/    /'
        break
      fi
      up=$(((${EPOCHREALTIME/./} - t0) / 100000))
      newest_wal; wal0=$wal_now size0=$wal_size
      recovery "$srv_log"
      printf "  cycle %2d: --fsync=%-8s killed -9 %d.%d s after start (%d.%d s after a client was back, its first write logged after %d.%d s; gone after %d.%d s); restarted (--fsync=%s), listening %d.%d s after the kill: %s\n" \
        "$c" "$mode" $((ms / 1000)) $((ms % 1000 / 100)) $((ms_conn / 1000)) $((ms_conn % 1000 / 100)) $((ms_wrote / 1000)) $((ms_wrote % 1000 / 100)) $((gone / 10)) $((gone % 10)) "$next" $((up / 10)) $((up % 10)) "$rec_line"
      printf '%s' "$rec_warnings"
      mode=$next
      cycles_done=$c
    done
    sleep 2  # the load on the last server
  else
    fail "lin_load did not reach its run phase"
  fi
  if [ "$inline_cycles" -eq 0 ]; then
    echo "  no --fsync=no|everysec cycle ran (DUR_CYCLES=$CYCLES): writes_inline not checked"
  elif [ "$inline_seen" -gt 0 ]; then
    pass "writes logged by their worker (writes_inline > 0) in $inline_seen of $inline_cycles --fsync=no|everysec cycles before the kill"
  else
    fail "no --fsync=no|everysec cycle logged a write on its worker (writes_inline stayed 0 in $inline_cycles)"
  fi
  touch "$logs/kill.stop"
  wait $load; r=$?; unset "live[$load]"
  grep -v "^lin_load: history\|^lin_load: server" "$logs/kill-load.txt" | sed 's/^/  /'
  tally=$(grep "^durability: [0-9]" "$logs/kill-load.txt")
  lin=$(grep "^linearizability: " "$logs/kill-load.txt" | head -1)
  restarts=$(sed -n 's/.*server restarts seen \([0-9]*\) .*/\1/p' "$logs/kill-load.txt" | head -1)
  restarts_all=$(sed -n 's/.*server restarts seen [0-9]* (by the client that saw most; \([0-9]*\) over all clients).*/\1/p' "$logs/kill-load.txt" | head -1)
  if [ $r -eq 0 ]; then
    pass "lin_load across the kills: exit 0"
  else
    fail "lin_load exit $r"; tail -3 "$logs/kill-load.err" | sed 's/^/    stderr: /'
  fi
  echo "$lin" | grep -q " 0 violations (" && pass "linearizability across restarts: ${lin#linearizability: }" ||
    fail "linearizability across restarts: ${lin:-no verdict}"
  echo "$tally" | grep -q " 0 violations$" && pass "durability tally: ${tally#durability: }" ||
    fail "durability tally: ${tally:-none}"
  # Every killed server had written for a client (checked above), and that client, reconnecting,
  # finds another server instance: each kill is a restart some client saw.
  if [ "$cycles_done" -ge 1 ] && [ "${restarts_all:-0}" -ge "$cycles_done" ]; then
    pass "the clients saw every restart (${restarts_all} over all clients, ${restarts:-?} by the one that saw most, $cycles_done kills)"
  else
    fail "the clients saw ${restarts_all:-?} restarts over all clients (want at least the $cycles_done kills)"
  fi
  [ "$cycles_done" = "$CYCLES" ] && [ "$CYCLES" -ge 1 ] &&
    pass "$CYCLES kill -9 cycles, each under load (a client connected, the killed server had logged writes, lin_load running)" ||
    fail "only $cycles_done of $CYCLES cycles ran"
  [ "$CYCLES" -ge 10 ] || echo "  note: $CYCLES cycles (CI runs at least 10)"
  stop "$srv" TERM
  [ "$stop_rc" = 0 ] && pass "the last kvserver of part 1 exits 0 on SIGTERM" ||
    fail "the last kvserver exited $stop_rc on SIGTERM"
else
  fail "kvserver --data_dir did not start (exit $srv_rc)"; tail -5 "$srv_log"
fi
ls -la "$dir" > "$logs/kill-dir.txt" 2>&1

# --- 2. disk full -----------------------------------------------------------------------------
part_done; echo "--- disk full (part 2): 1 MiB tmpfs, --fsync=always, 60 KB values"
P=$((PORT + 2))
declare -A want  # key -> value file or ABSENT
if tmpfs full 1M && start full $P --data_dir="$dir" --fsync=always; then
  keys=()
  for i in $(seq 40); do vfile "full$i" 60000 f; keys+=("full$i"); done
  puts $P fill "${keys[@]}"
  acked=0 refused="" msg=""
  while read -r _ _ k status; do
    k=${k%:}
    if [ "$status" = OK ]; then
      want[$k]=$logs/vals/$k; acked=$((acked + 1))
    else
      refused=$k msg=$status; want[$k]=ABSENT
    fi
  done < <(grep "^batch: put " "$logs/fill.out")
  if [ -z "$refused" ]; then
    fail "40 PUTs of 60 KB into a 1 MiB file system: no refusal ($(tail -1 "$logs/fill.out"; errtext "$logs/fill.err"))"
  else
    if echo "$msg" | grep -q "IO_ERROR" && echo "$msg" | grep -q "No space left"; then
      pass "$acked PUTs acknowledged, then PUT $refused refused: $msg"
    else
      fail "PUT $refused failed without IO_ERROR 'No space left': $msg"
    fi
    # An update of an acknowledged key while full: refused (then the old value stays) or not.
    vfile full1b 60000 g
    if ctl $P put full1 < "$logs/vals/full1b" 2> "$logs/put.err"; then
      want[full1]=$logs/vals/full1b; echo "  note: an update of full1 while full was acknowledged"
    else
      pass "update of full1 refused too: $(errtext "$logs/put.err")"
    fi
    verify $P full-get "full1=${want[full1]}" "$refused=ABSENT" &&
      pass "GETs while the disk is full: full1 has its value, $refused is absent" ||
      fail "GETs while the disk is full"
    st=$(ctl $P stats 2> /dev/null)
    wf=$(echo "$st" | awk '$1 == "wal_failures" {print $2}')
    wb=$(echo "$st" | awk '$1 == "wal_broken" {print $2}')
    [ "${wf:-0}" -gt 0 ] && pass "STATS answers: wal_failures $wf, wal_broken ${wb:-?}, durable $(echo "$st" | awk '$1 == "durable" {print $2}')" ||
      fail "STATS: wal_failures ${wf:-missing} (want > 0)"
    kill -0 "$srv" 2>/dev/null && pass "kvserver alive" || fail "kvserver died when the disk was full"
    mount -o remount,size=16M "$dir" || fail "remount of $dir failed"
    vfile after 60000 a
    ok=0
    for try in 1 2 3; do
      if ctl $P put after < "$logs/vals/after" 2> "$logs/put.err"; then ok=1; break; fi
      sleep 1
    done
    if [ $ok = 1 ]; then
      want[after]=$logs/vals/after; pass "after the remount to 16M a PUT succeeds (attempt $try)"
    else
      fail "after the remount a PUT still fails: $(errtext "$logs/put.err")"
    fi
    wb=$(stat_of $P wal_broken)
    [ "${wb:-1}" = 0 ] && pass "wal_broken 0 after space returned" || fail "wal_broken ${wb:-?} after space returned"
    stop "$srv" 9
    if start full $P --data_dir="$dir" --fsync=always; then
      echo "  restart: $(recovery_line "$srv_log")"
      args=()
      for k in "${!want[@]}"; do args+=("$k=${want[$k]}"); done
      verify $P full-after "${args[@]}" &&
        pass "after kill -9 and restart: ${#args[@]} keys as acknowledged ($refused absent)" ||
        fail "after kill -9 and restart: keys not as acknowledged"
      stop "$srv" TERM
    else
      fail "restart after the disk-full test failed (exit $srv_rc)"; tail -5 "$srv_log"
    fi
  fi
  [ -n "$srv" ] && kill -0 "$srv" 2>/dev/null && stop "$srv" 9
else
  fail "disk-full setup failed (tmpfs or kvserver; exit $srv_rc)"
fi

# --- 3. torn tail, corruption; 4. lock --------------------------------------------------------
part_done; echo "--- torn tail, corruption (part 3) and lock (part 4)"
P=$((PORT + 3))
if tmpfs corrupt 16M && start corrupt $P --data_dir="$dir" --fsync=always; then
  # 4. lock
  timeout 60 "$KVSERVER" --listen="$addr:$((P + 1))" --memory="$MEMORY" --data_dir="$dir" \
    > "$logs/srv-lock.log" 2>&1; rc=$?
  msg=$(grep -v "^I[0-9]" "$logs/srv-lock.log" | tail -1)
  if [ $rc -ne 0 ] && [ $rc -ne 124 ] && grep -q "in use" "$logs/srv-lock.log"; then
    pass "lock: a second kvserver on $dir exits $rc: $msg"
  else
    fail "lock: a second kvserver on the same --data_dir: exit $rc, $msg"
  fi
  mkdir -p "$logs/vals"
  for i in 1 2 3 4 5 6; do printf 'corrupt-marker-%d' $i > "$logs/vals/c$i"; done
  puts $P c-put c1 c2 c3 c4 c5 c6 || fail "PUTs c1..c6: $(tail -2 "$logs/c-put.out")"
  stop "$srv" TERM
  [ "$stop_rc" = 0 ] && pass "kvserver with c1..c6 exits 0 on SIGTERM" || fail "kvserver exit $stop_rc on SIGTERM"
  wal=$(ls "$dir"/wal-*.log | sort | tail -1)
  size=$(stat -c %s "$wal")
  # torn tail: a record header announcing 100 bytes of body, then 5 bytes
  printf '\x64\x00\x00\x00torn!' >> "$wal"
  if start corrupt $P --data_dir="$dir" --fsync=always; then
    w=$(grep "recovery: .*torn" "$srv_log" | tail -1 | sed 's/.*recovery: //')
    if echo "$w" | grep -q "offset $size\b" && echo "$w" | grep -q "9 bytes"; then
      pass "torn tail (9 bytes appended at offset $size of $(basename "$wal")): $w"
    else
      fail "torn tail at offset $size (9 bytes): warning '${w:-none}'"
    fi
    args=()
    for i in 1 2 3 4 5 6; do args+=("c$i=$logs/vals/c$i"); done
    verify $P c-torn "${args[@]}" && pass "c1..c6 intact after the torn-tail restart" ||
      fail "keys lost after the torn-tail restart"
    stop "$srv" TERM
  else
    fail "restart with a torn tail refused (exit $srv_rc): $(tail -2 "$srv_log")"
  fi
  # corruption in the middle: one byte of c3's value, with c4..c6 after it
  off=$(grep -boa "corrupt-marker-3" "$wal" | head -1 | cut -d: -f1)
  if [ -z "$off" ]; then
    fail "c3's record not found in $(basename "$wal")"
  else
    printf 'X' | dd of="$wal" bs=1 seek="$off" conv=notrunc status=none
    before=$(cd "$dir" && ls; md5sum "$wal")
    timeout 60 "$KVSERVER" --listen="$addr:$P" --memory="$MEMORY" --data_dir="$dir" \
      > "$logs/srv-corrupt-strict.log" 2>&1; rc=$?
    after=$(cd "$dir" && ls; md5sum "$wal")
    msg=$(grep -E "corrupt|offset" "$logs/srv-corrupt-strict.log" | tail -1)
    if [ $rc -ne 0 ] && [ $rc -ne 124 ] && echo "$msg" | grep -q "$(basename "$wal")" &&
       echo "$msg" | grep -q "offset"; then
      pass "flipped byte at $off: start refused, exit $rc: $msg"
    else
      fail "flipped byte at $off in $(basename "$wal"): exit $rc, message '${msg:-none}'"
    fi
    [ "$before" = "$after" ] && pass "the refused start left the data directory unchanged" ||
      fail "the refused start changed the data directory"
    if start corrupt $P --data_dir="$dir" --recover=truncate; then
      echo "  --recover=truncate: $(recovery_line "$srv_log")"
      warnings "$srv_log"
      verify $P c-trunc "c1=$logs/vals/c1" "c2=$logs/vals/c2" c3=ABSENT c4=ABSENT && pass "--recover=truncate: c1, c2 (before the damage) there, c3, c4 dropped" ||
        fail "--recover=truncate: wrong keys"
      stop "$srv" TERM
    else
      fail "--recover=truncate did not start (exit $srv_rc): $(tail -2 "$srv_log")"
    fi
  fi
else
  fail "corruption setup failed (exit $srv_rc)"
fi

# --- 6. snapshots -----------------------------------------------------------------------------
part_done; echo "--- snapshots (part 6)"
P=$((PORT + 6))
if [ "$has_snapshot" = 1 ]; then
  if tmpfs snap 64M && start snap $P --data_dir="$dir" --fsync=always --snapshot_log_size=0; then
    for i in 1 2 3 4 5; do vfile "s$i" $((i * 3000)) s; done
    puts $P s-put s1 s2 s3 s4 s5 || fail "PUTs s1..s5: $(tail -2 "$logs/s-put.out")"
    logs_before=$(cd "$dir" && ls wal-*.log)
    out=$(ctl $P snapshot 2> "$logs/snap.err"); rc=$?
    [ $rc -eq 0 ] || out="$out $(errtext "$logs/snap.err")"
    # `kvctl snapshot` only starts one: wait (up to 60 s) until it is taken and done.
    for _ in $(seq 120); do
      taken=$(stat_of $P snapshots_taken)
      [ "${taken:-0}" -ge 1 ] && [ "$(stat_of $P snapshot_running)" = 0 ] && break
      sleep 0.5
    done
    snaps=$(cd "$dir" && ls snap-*.rkv 2>/dev/null)
    if [ $rc -eq 0 ] && [ "${taken:-0}" -ge 1 ] && [ -n "$snaps" ]; then
      pass "kvctl snapshot: '$out'; snapshots_taken $taken; $snaps"
    else
      fail "kvctl snapshot: exit $rc '$out', snapshots_taken ${taken:-?}, files: $(cd "$dir" && ls | tr '\n' ' ')"
    fi
    left=""
    for f in $logs_before; do [ -e "$dir/$f" ] && left="$left $f"; done
    [ -z "$left" ] && pass "older logs removed ($(echo $logs_before))" || fail "old logs still there:$left"
    vfile s6 100 s; ctl $P put s6 < "$logs/vals/s6" 2> "$logs/put.err" || fail "PUT s6: $(errtext "$logs/put.err")"
    stop "$srv" 9
    if start snap $P --data_dir="$dir" --fsync=always --snapshot_log_size=0; then
      line=$(recovery_line "$srv_log")
      echo "$line" | grep -q "snap-" && pass "recovery: $line" || fail "the recovery does not name the snapshot: $line"
      args=()
      for i in 1 2 3 4 5 6; do args+=("s$i=$logs/vals/s$i"); done
      verify $P s-after "${args[@]}" && pass "s1..s6 back after kill -9" || fail "keys lost after a restart from a snapshot"
      stop "$srv" TERM
    else
      fail "restart from a snapshot failed (exit $srv_rc)"
    fi
  else
    fail "snapshot setup failed (exit $srv_rc)"
  fi
else
  echo "[case SKIP] durability: kvctl snapshot, then recovery from it (this kvctl has no 'snapshot' command)"
fi
P=$((PORT + 7))
if tmpfs autosnap 64M && start autosnap $P --data_dir="$dir" --fsync=everysec --snapshot_log_size=200K; then
  # Three rounds of 4 x 60 KB: each grows the log past 200K; the snapshotter checks the log
  # size twice a second, so each round is followed by a snapshot (waited for).
  taken=0
  for round in 0 1 2; do
    keys=()
    for i in $(seq $((round * 4 + 1)) $((round * 4 + 4))); do vfile "a$i" 60000 a; keys+=("a$i"); done
    puts $P a-put$round "${keys[@]}" || fail "PUTs ${keys[*]}: $(tail -2 "$logs/a-put$round.out")"
    for _ in $(seq 40); do
      taken=$(stat_of $P snapshots_taken)
      [ "${taken:-0}" -gt "$round" ] && [ "$(stat_of $P snapshot_running)" = 0 ] && break
      sleep 0.25
    done
  done
  failed=$(stat_of $P snapshots_failed)
  [ "${taken:-0}" -ge 3 ] && pass "automatic snapshots: $taken taken, ${failed:-?} failed, 720 KB in 3 rounds ($(cd "$dir" && ls | tr '\n' ' '))" ||
    fail "automatic snapshots: snapshots_taken ${taken:-?} after 3 rounds of 240 KB with --snapshot_log_size=200K"
  [ "$failed" = 0 ] && pass "automatic snapshots: snapshots_failed 0" || fail "snapshots_failed ${failed:-missing}"
  stop "$srv" 9
  if start autosnap $P --data_dir="$dir" --fsync=everysec --snapshot_log_size=200K; then
    echo "  restart: $(recovery_line "$srv_log")"
    args=()
    for i in $(seq 12); do args+=("a$i=$logs/vals/a$i"); done
    verify $P a-after "${args[@]}" && pass "a1..a12 back after kill -9" ||
      fail "keys wrong after a restart with automatic snapshots"
    stop "$srv" TERM
  else
    fail "restart after automatic snapshots failed (exit $srv_rc)"
  fi
else
  fail "automatic snapshot setup failed (exit $srv_rc)"
fi

part_done
# --- crash patterns in every server log -------------------------------------------------------
for f in "$logs"/srv-*.log; do
  crash=$(grep -v -E "^[IW][0-9]{8} " "$f" | grep -m1 -E "$CRASH_PATTERN")
  [ -z "$crash" ] && pass "$(basename "$f"): no crash report" || fail "$(basename "$f"): $crash"
done

tally=$(grep "^durability: [0-9]" "$logs/kill-load.txt" 2>/dev/null)
acked_puts=$(echo "$tally" | sed -n 's/.*acknowledged PUTs \([0-9]*\).*/\1/p')
acked_dels=$(echo "$tally" | sed -n 's/.*acknowledged DELETEs \([0-9]*\).*/\1/p')
unknown=$(echo "$tally" | sed -n 's/.*unknown-outcome writes \([0-9]*\).*/\1/p')
viol=$(echo "$tally" | sed -n 's/.* \([0-9]*\) violations$/\1/p')
ops=$(grep "^linearizability: " "$logs/kill-load.txt" 2>/dev/null | awk '{print $2}')
result=PASSED
[ ${#failures[@]} -eq 0 ] || result=FAILED
echo "durability: $cycles_done kill -9 cycles; owned keys: ${acked_puts:-?} acknowledged PUTs, ${acked_dels:-?} acknowledged DELETEs, ${unknown:-?} of unknown outcome, ${viol:-?} violations; ${ops:-?} ops linearizable across restarts; ${#failures[@]} failures; $((SECONDS - t_start)) s; $result"
for f in "${failures[@]}"; do echo "  - $f"; done
[ $result = PASSED ]
