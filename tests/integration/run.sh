#!/usr/bin/env bash
# Runs the integration tests on a real RDMA stack: inside tools/rdma-sandbox, starts a main
# kvserver and a small one (for the fill test), runs integration_test against them, checks the
# servers are still alive, and returns the test's exit status.
#   tests/integration/run.sh BUILD_DIR [gtest args...]
set -uo pipefail
build=$(cd "${1:?usage: run.sh BUILD_DIR}" && pwd) || exit 2
shift
src=$(cd "$(dirname "$0")/../.." && pwd)
if [ -z "${RKV_IN_SANDBOX:-}" ]; then
  export RKV_IN_SANDBOX=1
  exec "$src/tools/rdma-sandbox" --timeout 1100 -- "$0" "$build" "$@"
fi
addr=${RKV_SANDBOX_ADDR:?not in the sandbox}
logs=${RKV_LOG_DIR:-$(mktemp -d /tmp/rkv-it.XXXXXX)}
# A short --peer_timeout: every test runs with keepalives going on (IdleClientIsKeptAlive...).
export RKV_PEER_TIMEOUT=3
"$build/kvserver" --listen="$addr:7470" --memory=128M --workers=2 --peer_timeout=$RKV_PEER_TIMEOUT > "$logs/kvserver-main.log" 2>&1 &
main=$!
"$build/kvserver" --listen="$addr:7471" --memory=16M --buckets=1024 > "$logs/kvserver-small.log" 2>&1 &
small=$!
for i in $(seq 50); do
  "$build/kvctl" --server="$addr:7470" stats >/dev/null 2>&1 && "$build/kvctl" --server="$addr:7471" stats >/dev/null 2>&1 && break
  sleep 0.2
done
fds_start=$(ls /proc/$main/fd | wc -l)
export RKV_SERVER="$addr:7470" RKV_SMALL_SERVER="$addr:7471" RKV_KVSERVER="$build/kvserver"
rc=0
"$build/integration_test" "$@" || rc=$?
# kvctl from a shell: values from an argument and from stdin.
ctl() { "$build/kvctl" --server="$addr:7470" "$@"; }
ok=1
ctl put shellkey shellvalue && [ "$(ctl get shellkey)" = shellvalue ] || ok=0
printf 'from-stdin' | ctl put stdinkey && [ "$(ctl get stdinkey)" = from-stdin ] || ok=0
ctl del shellkey && { ctl get shellkey 2>/dev/null; [ $? -eq 1 ]; } || ok=0
ctl bogus 2>/dev/null; [ $? -eq 2 ] || ok=0
[ $ok = 1 ] && echo "kvctl checks: passed" || { echo "kvctl checks: FAILED"; rc=1; }
# kvbench smoke run: YCSB load, then workload a with every read verified.
bench() { "$build/kvbench" --server="$addr:7470" --records=2000 --threads=2 --verify "$@"; }
if bench load > "$logs/kvbench-load.txt" && bench run --workload=a --operations=5000 --json="$logs/run-a.json" > "$logs/kvbench-run.txt" &&
   grep -q "^\[VERIFY\], Failures, 0$" "$logs/kvbench-run.txt"; then
  echo "kvbench smoke (load + run a --verify): passed"; grep -E "OVERALL|RoundTripsPerGet|VERIFY" "$logs/kvbench-run.txt"
else
  echo "kvbench smoke: FAILED"; cat "$logs"/kvbench-*.txt; rc=1
fi
# Every kvbench knob at once, with every read verified: key and value size ranges, a custom mix
# with inserts and deletes, hotspot keys, 2 connections per thread and 8 operations in flight.
knobs=(--server="$addr:7470" --records=1500 --threads=2 --verify --key-size=12-40 --value-size=16-300)
if "$build/kvbench" load "${knobs[@]}" > "$logs/knobs-load.txt" 2>&1 &&
   "$build/kvbench" run "${knobs[@]}" --operations=6000 --depth=8 --connections=2 --distribution=hotspot \
     --read-proportion=0.7 --update-proportion=0.1 --insert-proportion=0.1 --delete-proportion=0.05 \
     --rmw-proportion=0.05 --duration=20 --json="$logs/run-knobs.json" > "$logs/knobs-run.txt" 2>&1 &&
   grep -q "^\[VERIFY\], Failures, 0$" "$logs/knobs-run.txt" && grep -q "^\[DELETE\], Operations" "$logs/knobs-run.txt"; then
  echo "kvbench every knob (ranges, custom mix, hotspot, connections, depth, --verify): passed"
else
  echo "kvbench every knob: FAILED"; cat "$logs"/knobs-*.txt; rc=1
fi
"$build/kvbench" run --server="$addr:7470" --value-size=9-3 >/dev/null 2>&1; [ $? -eq 2 ] || { echo "kvbench accepted --value-size=9-3"; rc=1; }
# bench/plot draws the real runs' JSON.
if HOME=/tmp MPLCONFIGDIR=$logs "$src/bench/plot" "$logs/run-a.json" "$logs/run-knobs.json" -o "$logs/plot.png" > /dev/null &&
   [ -s "$logs/plot.png" ]; then
  echo "bench/plot of two runs: passed"
else
  echo "bench/plot: FAILED"; rc=1
fi
"$build/kvbench" --server="$addr:7470" run --workload=e >/dev/null 2>&1; [ $? -eq 2 ] || { echo "kvbench accepted workload e"; rc=1; }
# --verify must catch values it did not write: overwrite 50 keys with plain values, expect failure.
"$build/kvbench" --server="$addr:7470" load --records=50 > /dev/null 2>&1
"$build/kvbench" --server="$addr:7470" run --records=50 --workload=c --operations=200 --verify > "$logs/kvbench-neg.txt" 2>&1
if [ $? -eq 1 ] && ! grep -q "^\[VERIFY\], Failures, 0$" "$logs/kvbench-neg.txt"; then
  echo "kvbench --verify detects wrong values: passed"
else
  echo "kvbench --verify did not detect wrong values: FAILED"; rc=1
fi
# Connection layer: rdma_cm and manual mode over tcp, file and etcd; kvctl info/check; one
# broken parameter per validator rule; clients that leave or are killed.
"$src/tests/integration/connection.sh" "$build" "$addr" "$logs" || rc=1
fds_end=$(ls /proc/$main/fd 2>/dev/null | wc -l)
if [ "$fds_end" -gt $((fds_start + 4)) ]; then echo "kvserver file descriptors grew: $fds_start -> $fds_end"; rc=1
else echo "kvserver file descriptors: $fds_start at start, $fds_end after all tests (no leak)"; fi
for p in $main $small; do
  if ! kill -0 $p 2>/dev/null; then echo "a kvserver died during the tests"; rc=1; fi
done
kill $main $small 2>/dev/null || true
wait $main $small 2>/dev/null || true
if [ $rc -ne 0 ]; then echo "--- kvserver-main.log (tail)"; tail -20 "$logs/kvserver-main.log"; fi
# The sandbox's native soft-RoCE branch: this kernel has rdma_rxe loaded but, once the VM's own
# link is gone, no RDMA device, so tools/rdma-sandbox must add rxe0 itself and run natively.
if [ -z "${RKV_SKIP_RXE_MODE:-}" ] && rdma link delete rxe0 2>/dev/null && ip link delete rkv0 2>/dev/null; then
  "$src/tools/rdma-sandbox" -- sh -c 'ibv_devices | grep -q rxe0 && rping -s -a $RKV_SANDBOX_ADDR -C 2 >/dev/null & sleep 1; rping -c -a $RKV_SANDBOX_ADDR -C 2' \
    > "$logs/sandbox-rxe.txt" 2>&1
  if [ $? -eq 0 ] && grep -q "soft-RoCE link rxe0 on veth rkv0" "$logs/sandbox-rxe.txt"; then
    echo "rdma-sandbox native rxe mode (no device, rdma_rxe loadable): passed"
  else
    echo "rdma-sandbox native rxe mode: FAILED"; cat "$logs/sandbox-rxe.txt"; rc=1
  fi
fi
exit $rc
