#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# kvctl and kvbench as a user's shell meets them (issue 13), against a running kvserver:
#   tests/integration/tools.sh BUILD_DIR           (enters the RDMA sandbox, starts its kvserver)
#   tests/integration/tools.sh BUILD_DIR ADDR LOG_DIR  (inside it)
# kvctl: quiet on success (logs only with -v); byte-exact values through pipes (64 KiB of random
# bytes, NULs, no trailing newline); a value on stdin over the server's limit refused before it is
# sent; stdout on a full disk reported; --json for stats and info; the documented exit codes.
# kvbench: load + run with every read verified; every knob at once; a plain load (no --verify)
# then `run --verify` finds no failure, at every value size; values written by something else
# are reported as not written by kvbench; bench/plot draws real runs.
# One "[case PASS|FAIL] tools: ..." line per case; exit 1 if any failed.
set -uo pipefail
build=$(cd "${1:?usage: tools.sh BUILD_DIR [ADDR LOG_DIR]}" && pwd) || exit 2
if [ $# -eq 1 ] && [ -z "${RKV_IN_SANDBOX:-}" ]; then
  export RKV_IN_SANDBOX=1
  exec "$(dirname "$0")/../../tools/rdma-sandbox" --timeout 1100 -- sh -c \
    "$0 \"$build\" \$RKV_SANDBOX_ADDR \$(mktemp -d /tmp/rkv-tools.XXXXXX)"
fi
addr=${2:?usage: tools.sh BUILD_DIR ADDR LOG_DIR}
logs=${3:?usage: tools.sh BUILD_DIR ADDR LOG_DIR}
server=$addr:7490
src=$(cd "$(dirname "$0")/../.." && pwd)
rc=0
"$build/kvserver" --listen="$server" --memory=64M --allow_unauthenticated > "$logs/kvserver.log" 2>&1 &
srv=$!
for _ in $(seq 100); do
  "$build/kvctl" --server="$server" stats > /dev/null 2>&1 && break
  kill -0 $srv 2>/dev/null || { echo "[case FAIL] tools: kvserver did not start"; cat "$logs/kvserver.log"; exit 1; }
  sleep 0.2
done
pass() { echo "[case PASS] tools: $1"; }
fail() { echo "[case FAIL] tools: $1${2:+ ($2)}"; rc=1; }
ctl() { "$build/kvctl" --server="$server" "$@"; }
t=$(mktemp -d /tmp/rkv-tools.XXXXXX)

# --- kvctl -------------------------------------------------------------------------------------
ctl put shellkey shellvalue 2> "$t/put.err" && [ "$(ctl get shellkey 2> "$t/get.err")" = shellvalue ] &&
  [ ! -s "$t/put.err" ] && [ ! -s "$t/get.err" ] &&
  pass "put/get from arguments, nothing on stderr on success" ||
  fail "kvctl put/get or quiet" "stderr: $(cat "$t/put.err" "$t/get.err" | head -3)"
ctl -v get shellkey > /dev/null 2> "$t/verbose.err"; r=$?
[ $r -eq 0 ] && grep -q "connected to" "$t/verbose.err" && pass "-v shows the library's log" ||
  fail "-v shows the library's log" "exit $r: $(head -2 "$t/verbose.err")"
head -c 65536 /dev/urandom > "$t/blob"
ctl put blob < "$t/blob" && ctl get blob > "$t/copy" && cmp -s "$t/blob" "$t/copy" &&
  pass "64 KiB random value through pipes, byte-exact ($(stat -c %s "$t/copy") bytes)" ||
  fail "64 KiB binary round trip" "$(stat -c %s "$t/copy" 2>/dev/null) bytes back; $(cmp "$t/blob" "$t/copy" 2>&1 | head -1)"
printf 'a\0b\0\n\n' > "$t/nul"
ctl put nulkey < "$t/nul" && ctl get nulkey | cmp -s "$t/nul" - &&
  pass "NULs and trailing newlines kept both ways" || fail "NULs and trailing newlines"
printf 'no-newline' | ctl put nonl && [ "$(ctl get nonl | od -An -c | tr -d ' \n')" = "no-newline" ] &&
  pass "no newline added when stdout is not a terminal" || fail "no newline added to a pipe"
# A GET that fails (NOT_FOUND) prints 0 bytes too: its exit status must be 0.
: | ctl put emptykey && ctl get emptykey > "$t/empty" && [ ! -s "$t/empty" ] && pass "empty value" ||
  fail "empty value" "$(stat -c %s "$t/empty" 2>/dev/null) bytes back"
max=$(ctl info --json | python3 -c 'import json,sys; print(json.load(sys.stdin)["max_value_size"])')
head -c $((max + 1)) /dev/zero | ctl put toobig 2> "$t/big.err"; r=$?
[ $r -eq 2 ] && grep -q "larger than the server's limit of $max bytes" "$t/big.err" &&
  { ctl get toobig > /dev/null 2>&1; [ $? -eq 1 ]; } &&
  pass "stdin over the server's limit ($max bytes) refused with exit 2, nothing stored" ||
  fail "stdin over the limit" "exit $r: $(cat "$t/big.err")"
yes | ctl put endless 2> "$t/endless.err"; r=$?
[ $r -eq 2 ] && grep -q "larger than" "$t/endless.err" && pass "an endless stdin is cut at the limit" ||
  fail "endless stdin" "exit $r: $(cat "$t/endless.err")"
ctl get blob > /dev/full 2> "$t/full.err"; r=$?
[ $r -eq 2 ] && grep -q "write(stdout): No space left on device" "$t/full.err" &&
  pass "stdout on a full disk: exit 2, '$(cat "$t/full.err")'" || fail "stdout on a full disk" "exit $r: $(cat "$t/full.err")"
ctl stats --json > "$t/stats.json" && python3 - "$t/stats.json" <<'PY' && pass "stats --json: one object, counters as numbers" || fail "stats --json"
import json, sys
d = json.load(open(sys.argv[1]))
assert isinstance(d["rpc_put"], int) and d["rpc_put"] > 0, d.get("rpc_put")
assert isinstance(d["connections_active"], int)
PY
ctl info --json > "$t/info.json" && python3 - "$t/info.json" <<'PY' && pass "info --json: region, limits and both QPs' parameters" || fail "info --json"
import json, sys
d = json.load(open(sys.argv[1]))
assert d["region_addr"] == 0 and d["rkey"] > 0 and d["max_key_size"] > 0, d
for side in ("local", "peer"):
    for k in ("qp_num", "psn", "path_mtu", "gid", "timeout", "retry_cnt", "max_rd_atomic"):
        assert k in d[side], (side, k)
assert d["local"]["qp_num"] == d["qp_num"]
PY
# After get/put/del every word is literal: values that look like flags are values.
ok=1
for v in -5 -v --verbose --server=1.2.3.4:1 --; do
  printf 'from-stdin' | ctl put dashkey "$v" 2> "$t/dash.err" && [ "$(ctl get dashkey)" = "$v" ] || { ok=0; echo "  value '$v': $(cat "$t/dash.err")"; }
done
ctl put -- -dashkey -value && [ "$(ctl get -- -dashkey)" = -value ] && [ "$(ctl -- get -dashkey)" = -value ] || ok=0
[ $ok = 1 ] && pass "KEY and VALUE starting with '-' are taken literally (-5, -v, --verbose, --server=..., --)" ||
  fail "KEY/VALUE starting with '-'"
# A closed stdout must not become the next file kvctl opens (an RDMA device): nothing is written.
ctl get blob >&- 2> "$t/closed.err"; r=$?
[ $r -eq 0 ] && [ ! -s "$t/closed.err" ] && pass "closed stdout: the value goes to /dev/null, exit 0" ||
  fail "closed stdout" "exit $r: $(head -2 "$t/closed.err")"
# Exit codes (docs/kvctl.md): 0 ok, 1 not found, 2 anything else.
ctl del shellkey && { ctl get shellkey 2>/dev/null; [ $? -eq 1 ]; } && { ctl del shellkey 2>/dev/null; [ $? -eq 1 ]; } &&
  pass "exit 1 for a missing key (get, del)" || fail "exit 1 for a missing key"
codes=""
ctl bogus 2>/dev/null; codes+="$? "
ctl get 2>/dev/null; codes+="$? "
ctl --json get shellkey 2>/dev/null; codes+="$? "
"$build/kvctl" --server="${server%:*}:1" --timeout_ms=2000 get k 2>/dev/null; codes+="$? "
ctl --no_such_flag get k 2>/dev/null; codes+="$? "
ctl --timeout_ms=abc get k 2>/dev/null; codes+="$? "
[ "$codes" = "2 2 2 2 2 2 " ] &&
  pass "exit 2 for usage, --json misuse, no server, unknown flag, bad flag value ($codes)" || fail "exit 2 cases" "got $codes"

# --- kvbench -----------------------------------------------------------------------------------
bench() { "$build/kvbench" --server="$server" --records=2000 --threads=2 "$@"; }
if bench load --verify > "$logs/kvbench-load.txt" && bench run --verify --workload=a --operations=5000 --json="$logs/run-a.json" > "$logs/kvbench-run.txt" &&
   grep -q "^\[VERIFY\], Failures, 0$" "$logs/kvbench-run.txt"; then
  pass "kvbench load + run a --verify ($(grep -E 'OVERALL.*Throughput|RoundTripsPerGet' "$logs/kvbench-run.txt" | tr '\n' ' '))"
else
  fail "kvbench load + run a --verify"; cat "$logs"/kvbench-*.txt
fi
# Every kvbench knob at once, with every read verified: key and value size ranges, a custom mix
# with inserts and deletes, hotspot keys, 2 connections per thread and 8 operations in flight.
knobs=(--server="$server" --records=1500 --threads=2 --verify --key-size=12-40 --value-size=16-300)
if "$build/kvbench" load "${knobs[@]}" > "$logs/knobs-load.txt" 2>&1 &&
   "$build/kvbench" run "${knobs[@]}" --operations=6000 --depth=8 --connections=2 --distribution=hotspot \
     --read-proportion=0.7 --update-proportion=0.1 --insert-proportion=0.1 --delete-proportion=0.05 \
     --rmw-proportion=0.05 --duration=20 --json="$logs/run-knobs.json" > "$logs/knobs-run.txt" 2>&1 &&
   grep -q "^\[VERIFY\], Failures, 0$" "$logs/knobs-run.txt" && grep -q "^\[DELETE\], Operations" "$logs/knobs-run.txt"; then
  pass "kvbench every knob (ranges, custom mix, hotspot, connections, depth, --verify)"
else
  fail "kvbench every knob"; cat "$logs"/knobs-*.txt
  # What the soft-RoCE device counted (RNR NAKs, retransmissions, duplicate requests): a wait
  # that timed out is told apart from a lost completion by these.
  for c in /sys/class/infiniband/*/ports/*/hw_counters/*; do
    [ -r "$c" ] && echo "# $(basename "$c") $(cat "$c")"
  done
fi
# A load without --verify, then run --verify: every value kvbench writes is verifiable, at every
# size (short values 1-15 B carry a key pattern, longer ones a checksum and marker).
for vs in 0-15 16-64 1000; do
  "$build/kvbench" --server="$server" load --records=300 --threads=2 --value-size=$vs > "$logs/plain-load-$vs.txt" 2>&1 &&
    "$build/kvbench" --server="$server" run --records=300 --threads=2 --workload=c --operations=900 --verify \
      > "$logs/plain-run-$vs.txt" 2>&1 &&
    grep -q "^\[VERIFY\], Failures, 0$" "$logs/plain-run-$vs.txt" &&
    pass "kvbench load without --verify (--value-size=$vs), then run --verify: 0 failures" ||
    { fail "kvbench plain load (--value-size=$vs) then run --verify"; tail -5 "$logs/plain-run-$vs.txt"; }
done
# Values written by something else are named as that, not as torn (and still fail the run).
"$build/kvbench" --server="$server" load --records=50 > "$logs/kvbench-foreign-load.txt" 2>&1; lr=$?
# kvbench's key names (bench/workload.cc KeyOf: "user" + FNV-1a of the insert number, as YCSB).
keys=$(python3 -c '
def fnv(v):
    h = 0xCBF29CE484222325
    for _ in range(8):
        h = ((h ^ (v & 0xFF)) * 1099511628211) % (1 << 64)
        v >>= 8
    return h
print(" ".join("user%d" % fnv(n) for n in range(10)))')
nforeign=0
for key in $keys; do ctl put "$key" "hello world, written by kvctl, not by kvbench" && nforeign=$((nforeign + 1)); done
"$build/kvbench" --server="$server" run --records=50 --workload=c --operations=400 --verify > "$logs/kvbench-foreign.txt" 2>&1
r=$?
if [ $lr -eq 0 ] && [ $nforeign = 10 ] && [ $r -eq 1 ] && grep -q "^\[VERIFY\], NotWrittenByKvbench, [1-9]" "$logs/kvbench-foreign.txt" &&
   grep -q "value not written by kvbench" "$logs/kvbench-foreign.txt" && ! grep -q "torn" "$logs/kvbench-foreign.txt"; then
  pass "kvbench --verify names values written by kvctl ($(grep NotWrittenByKvbench "$logs/kvbench-foreign.txt")), exit 1"
else
  fail "kvbench --verify on foreign values" "load exit $lr, $nforeign of 10 keys overwritten by kvctl, run exit $r"; grep -E "VERIFY" "$logs/kvbench-foreign.txt" | head -5
fi
"$build/kvbench" run --server="$server" --value-size=9-3 >/dev/null 2>&1; r1=$?
"$build/kvbench" --server="$server" run --workload=e >/dev/null 2>&1; r2=$?
[ $r1 -eq 2 ] && [ $r2 -eq 2 ] && pass "kvbench refuses --value-size=9-3 and workload e (exit 2)" ||
  fail "kvbench bad options" "exits $r1 $r2"
# bench/plot draws the real runs' JSON.
if HOME=/tmp MPLCONFIGDIR=$logs "$src/bench/plot" "$logs/run-a.json" "$logs/run-knobs.json" -o "$logs/plot.png" > /dev/null &&
   [ -s "$logs/plot.png" ]; then
  pass "bench/plot of two runs"
else
  fail "bench/plot"
fi
kill -0 $srv 2>/dev/null && pass "kvserver alive after every case" || fail "kvserver died"
kill $srv 2>/dev/null
wait $srv 2>/dev/null
rm -rf "$t"
[ $rc = 0 ] || { echo "--- kvserver.log (tail)"; tail -20 "$logs/kvserver.log"; }
echo "tools: logs in $logs"
exit $rc
