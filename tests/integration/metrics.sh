#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# kvserver's Prometheus endpoint (--metrics_listen; docs/metrics.md), in the RDMA sandbox:
#   start-up: an --metrics_listen that does not parse, one that is not an address of this host
#     and one whose port another kvserver serves are refused (exit != 0, the flag named); a
#     wildcard one is served with a warning
#   http: GET /metrics is 200 text/plain; version=0.0.4, other paths 404, POST refused
#   format: every scrape parses with prometheus_client's parser (python3-prometheus-client),
#     histograms' +Inf bucket equals _count
#   load: scrapes during a short kvbench load + run; afterwards the put counters, connections
#     accepted and the put latency histogram's count have moved, and rkv_rpcs_total{op="put"}
#     equals the histogram's count
#   durable: a --data_dir server counts its writes (write pool path) and shows the log figures
#   idle: idle HTTP connections (slowloris) neither block a scrape nor a kvctl put/get
#   kvctl stats still works; SIGTERM stops kvserver cleanly with an HTTP connection open
#   tests/integration/metrics.sh BUILD_DIR [ADDR LOGDIR]   (only BUILD_DIR: enters the sandbox)
# Prints `[case PASS] metrics: <what>` / `[case FAIL] metrics: <what> (<why>)` per case; exit 1
# if any failed. No timing is asserted (every wait has a generous deadline).
# Environment: METRICS_PORT_BASE (RDMA ports, default 7590), METRICS_HTTP_PORT (9470),
# METRICS_RECORDS (2000), METRICS_OPS (4000); also as RKV_METRICS_*.
set -uo pipefail
build=$(cd "${1:?usage: metrics.sh BUILD_DIR [ADDR LOGDIR]}" && pwd) || exit 2
if [ $# -eq 1 ] && [ -z "${RKV_IN_SANDBOX:-}" ]; then
  export RKV_IN_SANDBOX=1
  exec "$(dirname "$0")/../../tools/rdma-sandbox" --timeout 850 -- sh -c \
    "$0 \"$build\" \$RKV_SANDBOX_ADDR \$(mktemp -d /tmp/rkv-metrics.XXXXXX)"
fi
addr=${2:?usage: metrics.sh BUILD_DIR ADDR LOGDIR}
logs=${3:?usage: metrics.sh BUILD_DIR ADDR LOGDIR}
mkdir -p "$logs" || exit 2
KNOB_PREFIX=METRICS
. "$(dirname "$0")/common.sh"
PORT=$(knob PORT_BASE 7590)
HTTP=$(knob HTTP_PORT 9470)
RECORDS=$(knob RECORDS 2000)
OPS=$(knob OPS 4000)
KVSERVER=$build/kvserver KVCTL=$build/kvctl KVBENCH=$build/kvbench
rc=0
pass() { echo "[case PASS] metrics: $1"; }
fail() { echo "[case FAIL] metrics: $1 ($(echo "$2" | tr '\n' ' ' | cut -c1-300))"; rc=1; }
pids=()
cleanup() { for p in "${pids[@]}"; do kill "$p" 2>/dev/null; done; wait 2>/dev/null; }
trap cleanup EXIT
wait_up() { for _ in $(seq 300); do grep -q "kvserver listening on" "$1" && return 0; sleep 0.1; done; return 1; }
# scrape URL FILE: the body into FILE; prints the HTTP status.
scrape() { curl -sS --max-time 60 -o "$2" -w '%{http_code}' "$1" 2>>"$logs/curl.err"; }

# The check of a page: parses it with prometheus_client and prints the figures the cases use.
cat > "$logs/check.py" <<'EOF'
import sys
from prometheus_client.parser import text_string_to_metric_families
text = open(sys.argv[1]).read()
fams = list(text_string_to_metric_families(text))
names = [f.name for f in fams]
assert len(names) == len(set(names)), "a family twice"
out = {"families": len(fams), "put_total": 0, "put_count": 0, "accepted": 0, "up": 0,
       "durable": 0, "wal_records": 0}
for f in fams:
    if f.type == "histogram":
        series = {}
        for s in f.samples:
            key = tuple(sorted((k, v) for k, v in s.labels.items() if k != "le"))
            d = series.setdefault(key, {"last": -1, "inf": None, "count": None})
            if s.name.endswith("_bucket"):
                assert s.value >= d["last"], "buckets not cumulative in %s %s" % (f.name, key)
                d["last"] = s.value
                if s.labels["le"] == "+Inf":
                    d["inf"] = s.value
            elif s.name.endswith("_count"):
                d["count"] = s.value
        for key, d in series.items():
            assert d["inf"] is not None and d["inf"] == d["count"], "+Inf != _count in %s %s" % (f.name, key)
    for s in f.samples:
        if s.name == "rkv_rpcs_total" and s.labels.get("op") == "put":
            out["put_total"] += s.value
        if s.name == "rkv_request_duration_seconds_count" and s.labels.get("op") == "put":
            out["put_count"] = s.value
        if s.name == "rkv_connections_accepted_total":
            out["accepted"] = s.value
        if s.name == "rkv_up":
            out["up"] = s.value
        if s.name == "rkv_durable":
            out["durable"] = s.value
        if s.name == "rkv_wal_records_total":
            out["wal_records"] = s.value
for k, v in out.items():
    print(k, int(v))
EOF
# check FILE: prints "name value" lines, or fails (exit status) with the reason on stderr.
check() { python3 "$logs/check.py" "$1"; }
fig() { awk -v k="$1" '$1 == k { print $2 }' "$2"; }

if ! command -v curl > /dev/null; then fail "curl" "no curl in the sandbox"; exit 1; fi
if ! python3 -c "import prometheus_client.parser" 2>/dev/null; then
  fail "prometheus-client" "python3-prometheus-client is not installed (tools/setup-deps)"; exit 1
fi

# --- start-up checks ---------------------------------------------------------------------------
out=$(timeout 60 "$KVSERVER" --listen="$addr:$PORT" --memory=8M --metrics_listen=nonsense 2>&1)
st=$?
[ $st -ne 0 ] && [[ $out == *"--metrics_listen"* ]] && pass "bad-listen-unparsable" ||
  fail "bad-listen-unparsable" "exit $st: $out"
out=$(timeout 60 "$KVSERVER" --listen="$addr:$PORT" --memory=8M --metrics_listen=192.0.2.1:$HTTP 2>&1)
st=$?
[ $st -ne 0 ] && [[ $out == *"--metrics_listen"* ]] && pass "bad-listen-not-local" ||
  fail "bad-listen-not-local" "exit $st: $out"

# --- the main server ---------------------------------------------------------------------------
M="http://$addr:$HTTP"
"$KVSERVER" --listen="$addr:$PORT" --memory=64M --workers=2 --metrics_listen="$addr:$HTTP" \
  > "$logs/kvserver.log" 2>&1 &
main=$!; pids+=($main)
wait_up "$logs/kvserver.log" || { fail "start" "$(tail -3 "$logs/kvserver.log")"; exit 1; }

out=$(timeout 60 "$KVSERVER" --listen="$addr:$((PORT + 1))" --memory=8M --metrics_listen="$addr:$HTTP" 2>&1)
st=$?
[ $st -ne 0 ] && [[ $out == *"--metrics_listen"* ]] && pass "bad-listen-port-in-use" ||
  fail "bad-listen-port-in-use" "exit $st: $out"

code=$(curl -sS --max-time 60 -D "$logs/headers" -o "$logs/page0.txt" -w '%{http_code}' "$M/metrics")
if [ "$code" = 200 ] && grep -qi "^content-type: text/plain; version=0.0.4" "$logs/headers"; then
  pass "get-metrics" 
else
  fail "get-metrics" "status $code, $(grep -i content-type "$logs/headers")"
fi
if check "$logs/page0.txt" > "$logs/fig0.txt" 2> "$logs/check0.err" && [ "$(fig up "$logs/fig0.txt")" = 1 ]; then
  pass "format-parses ($(fig families "$logs/fig0.txt") families)"
else
  fail "format-parses" "$(tail -2 "$logs/check0.err")"
fi
code=$(scrape "$M/" /dev/null); c2=$(scrape "$M/metricsx" /dev/null)
[ "$code" = 404 ] && [ "$c2" = 404 ] && pass "other-paths-404" || fail "other-paths-404" "$code $c2"
code=$(curl -sS --max-time 60 -o /dev/null -w '%{http_code}' -X POST --data 'a=b' "$M/metrics")
c2=$(curl -sS --max-time 60 -o /dev/null -w '%{http_code}' -X POST "$M/metrics")
if [[ $code == 405 || $code == 413 ]] && [ "$c2" = 405 ]; then pass "post-refused"; else
  fail "post-refused" "with a body $code, without $c2"; fi

# --- counters move under a kvbench load ----------------------------------------------------------
bench() { timeout 600 "$KVBENCH" "$1" --server="$addr:$PORT" --records="$RECORDS" --threads=2 "${@:2}"; }
( bench load > "$logs/load.txt" 2>&1 && bench run --workload=a --operations="$OPS" > "$logs/run.txt" 2>&1
  echo $? > "$logs/bench.rc" ) &
bpid=$!
scrapes=0 bad=0
while kill -0 $bpid 2>/dev/null; do
  if [ "$(scrape "$M/metrics" "$logs/during.txt")" = 200 ] && check "$logs/during.txt" > /dev/null 2>> "$logs/during.err"; then
    scrapes=$((scrapes + 1))
  else
    bad=$((bad + 1))
  fi
  sleep 0.5
done
wait $bpid
brc=$(cat "$logs/bench.rc" 2>/dev/null || echo missing)
[ "$brc" = 0 ] && pass "kvbench" || fail "kvbench" "exit $brc: $(tail -3 "$logs/load.txt" "$logs/run.txt")"
[ $bad = 0 ] && [ $scrapes -gt 0 ] && pass "scrapes-during-load ($scrapes)" ||
  fail "scrapes-during-load" "$scrapes good, $bad bad: $(tail -2 "$logs/during.err" 2>/dev/null)"
sleep 0.5  # past the endpoint's 100 ms gathering interval
if [ "$(scrape "$M/metrics" "$logs/page1.txt")" = 200 ] && check "$logs/page1.txt" > "$logs/fig1.txt" 2> "$logs/check1.err"; then
  p0=$(fig put_total "$logs/fig0.txt"); p1=$(fig put_total "$logs/fig1.txt")
  c1=$(fig put_count "$logs/fig1.txt"); a1=$(fig accepted "$logs/fig1.txt")
  if [ "$p1" -gt "$p0" ] && [ "$p1" -ge "$RECORDS" ] && [ "$c1" = "$p1" ] && [ "$a1" -gt 0 ]; then
    pass "counters-moved (put rpcs $p0 -> $p1, put latency count $c1, connections $a1)"
  else
    fail "counters-moved" "put rpcs $p0 -> $p1, put latency count $c1, connections $a1"
  fi
else
  fail "counters-moved" "scrape failed: $(tail -2 "$logs/check1.err")"
fi
grep -E '^rkv_request_duration_seconds_(count|sum)\{op="put"\}|^rkv_table_entries|^rkv_heap_used_bytes' \
  "$logs/page1.txt" | sed 's/^/  /'

# --- kvctl stats ---------------------------------------------------------------------------------
if timeout 120 "$KVCTL" --server="$addr:$PORT" stats > "$logs/stats.txt" 2>&1 &&
   [ "$(awk '$1 == "rpc_put" { print $2 }' "$logs/stats.txt")" -ge "$RECORDS" ] 2>/dev/null &&
   grep -q "^load_factor " "$logs/stats.txt"; then
  pass "kvctl-stats"
else
  fail "kvctl-stats" "$(head -3 "$logs/stats.txt")"
fi

# --- idle HTTP connections -----------------------------------------------------------------------
idle_fds=()
for i in 1 2 3 4 5 6; do
  exec {fd}<>"/dev/tcp/$addr/$HTTP" && idle_fds+=($fd)
done
slow=""
exec {slow}<>"/dev/tcp/$addr/$HTTP" && printf 'GET /met' >&$slow || slow=""
okput=0
timeout 120 "$KVCTL" --server="$addr:$PORT" put idle-key idle-value > /dev/null 2>&1 &&
  [ "$(timeout 120 "$KVCTL" --server="$addr:$PORT" get idle-key 2>/dev/null)" = idle-value ] && okput=1
code=$(scrape "$M/metrics" "$logs/page2.txt")
# The idle connections must be open for the case to mean anything.
if [ ${#idle_fds[@]} = 6 ] && [ -n "$slow" ] && [ "$code" = 200 ] && [ $okput = 1 ] &&
   check "$logs/page2.txt" > /dev/null 2>&1; then
  pass "idle-connections (${#idle_fds[@]} idle + 1 partial request: scrape and kvctl served)"
else
  fail "idle-connections" "${#idle_fds[@]} of 6 idle connections and ${slow:+the}${slow:-no} partial request open; scrape $code, kvctl put/get ok=$okput"
fi

# --- durable server: writes through the write pool, log figures ----------------------------------
D="http://$addr:$((HTTP + 1))"
"$KVSERVER" --listen="$addr:$((PORT + 2))" --memory=16M --data_dir="$logs/data" --fsync=always \
  --metrics_listen="0.0.0.0:$((HTTP + 1))" > "$logs/durable.log" 2>&1 &
dpid=$!; pids+=($dpid)
if wait_up "$logs/durable.log"; then
  grep -q "wildcard address" "$logs/durable.log" && pass "wildcard-warning" ||
    fail "wildcard-warning" "no warning for --metrics_listen=0.0.0.0"
  n=0
  for i in $(seq 20); do
    timeout 60 "$KVCTL" --server="$addr:$((PORT + 2))" put "dk$i" "dv$i" > /dev/null 2>&1 && n=$((n + 1))
  done
  sleep 0.5
  if [ "$(scrape "$D/metrics" "$logs/durable.txt")" = 200 ] && check "$logs/durable.txt" > "$logs/figd.txt" 2> "$logs/checkd.err" &&
     [ "$(fig durable "$logs/figd.txt")" = 1 ] && [ "$(fig put_total "$logs/figd.txt")" -ge 20 ] &&
     [ "$(fig put_count "$logs/figd.txt")" = "$(fig put_total "$logs/figd.txt")" ] &&
     [ "$(fig wal_records "$logs/figd.txt")" -ge 20 ] && [ $n = 20 ]; then
    pass "durable (put rpcs $(fig put_total "$logs/figd.txt"), wal records $(fig wal_records "$logs/figd.txt"))"
  else
    fail "durable" "$n puts; $(tr '\n' ' ' < "$logs/figd.txt" 2>/dev/null) $(tail -1 "$logs/checkd.err" 2>/dev/null)"
  fi
else
  fail "durable" "did not start: $(tail -3 "$logs/durable.log")"
fi

# --- shutdown with an HTTP connection open ------------------------------------------------------
# A request half sent just before SIGTERM: Stop must shut its connection down, not wait for it.
inflight=""
exec {inflight}<>"/dev/tcp/$addr/$HTTP" && printf 'GET /metr' >&$inflight || inflight=""
sleep 0.3
kill -TERM $main
st=timeout
for _ in $(seq 600); do
  if ! kill -0 $main 2>/dev/null; then wait $main; st=$?; break; fi
  sleep 0.1
done
if [ -n "$inflight" ] && [ "$st" = 0 ] && grep -q "kvserver stopped" "$logs/kvserver.log"; then
  pass "sigterm-clean (a request half sent when it came)"
else
  fail "sigterm-clean" "half-sent request ${inflight:+open}${inflight:-not open}, exit $st: $(tail -2 "$logs/kvserver.log")"
fi
for fd in "${idle_fds[@]}" $slow $inflight; do exec {fd}>&-; done
kill -TERM $dpid 2>/dev/null; wait $dpid 2>/dev/null

crash=$(grep -v -E "^[IWE][0-9]{8} " "$logs"/kvserver.log "$logs"/durable.log | grep -m1 -E "$CRASH_PATTERN")
[ -z "$crash" ] && pass "no-crash" || fail "no-crash" "$crash"
echo "metrics: logs in $logs"
exit $rc
