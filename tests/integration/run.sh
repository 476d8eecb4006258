#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# Runs the integration tests on a real RDMA stack: inside tools/rdma-sandbox, starts a main
# kvserver and a small one (for the fill test), runs integration_test against them, checks the
# servers are still alive, and returns the test's exit status.
#   tests/integration/run.sh BUILD_DIR [gtest args...]
# RKV_SERVER_EXTRA_FLAGS: more flags for both kvservers, e.g. --client_rkeys=registration (the
# registration mode's own PD, receive queue and drain under the whole suite).
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
read -ra extra <<< "${RKV_SERVER_EXTRA_FLAGS:-}"
# The main server signals one reply in 4 (selective signalling; the auto value on soft-RoCE is
# every reply), the small one keeps the auto value: both paths run.
"$build/kvserver" --listen="$addr:7470" --memory=128M --workers=2 --peer_timeout=$RKV_PEER_TIMEOUT --reply_signal_every=4 "${extra[@]}" > "$logs/kvserver-main.log" 2>&1 &
main=$!
"$build/kvserver" --listen="$addr:7471" --memory=16M --buckets=1024 "${extra[@]}" > "$logs/kvserver-small.log" 2>&1 &
small=$!
for i in $(seq 50); do
  "$build/kvctl" --server="$addr:7470" stats >/dev/null 2>&1 && "$build/kvctl" --server="$addr:7471" stats >/dev/null 2>&1 && break
  sleep 0.2
done
rc=0
# Both servers up before anything runs (their fd count is the baseline of the leak check).
up=1
for p in $main $small; do kill -0 $p 2>/dev/null || up=0; done
fds_start=$(ls /proc/$main/fd 2>/dev/null | wc -l)
if [ $up = 1 ] && [ "$fds_start" -gt 0 ]; then echo "[case PASS] run: both kvservers started ($fds_start fds)"
else echo "[case FAIL] run: a kvserver did not start"; tail -5 "$logs"/kvserver-*.log; rc=1; fi
export RKV_SERVER="$addr:7470" RKV_SMALL_SERVER="$addr:7471" RKV_KVSERVER="$build/kvserver"
"$build/integration_test" "$@" || rc=$?
# Connection layer: rdma_cm and manual mode over tcp, file and etcd; kvctl info/check; one
# broken parameter per validator rule; clients that leave or are killed.
"$src/tests/integration/connection.sh" "$build" "$addr" "$logs" || rc=1
# A dead server has no fd count (ls of its /proc/PID/fd counts 0): that is a failure, not "no leak".
if kill -0 $main 2>/dev/null && fds_end=$(ls /proc/$main/fd) && fds_end=$(wc -l <<< "$fds_end") &&
   [ "$fds_start" -gt 0 ]; then
  if [ "$fds_end" -gt $((fds_start + 4)) ]; then echo "[case FAIL] run: kvserver file descriptors grew: $fds_start -> $fds_end"; rc=1
  else echo "[case PASS] run: kvserver file descriptors: $fds_start at start, $fds_end after all tests (no leak)"; fi
else
  echo "[case FAIL] run: kvserver file descriptors (not counted: the main kvserver is gone or never started, $fds_start at start)"; rc=1
fi
alive=1
for p in $main $small; do kill -0 $p 2>/dev/null || alive=0; done
if [ $alive = 1 ]; then echo "[case PASS] run: both kvservers alive after every test"
else echo "[case FAIL] run: a kvserver died during the tests"; rc=1; fi
kill $main $small 2>/dev/null || true
wait $main $small 2>/dev/null || true
if [ $rc -ne 0 ]; then echo "--- kvserver-main.log (tail)"; tail -20 "$logs/kvserver-main.log"; fi
# The sandbox's native soft-RoCE branch: this kernel has rdma_rxe loaded but, once the VM's own
# link is gone, no RDMA device, so tools/rdma-sandbox must add rxe0 itself and run natively.
# The client retries (the server may not listen yet on a slow host; it serves one client).
# It runs wherever the sandbox made rxe0 on its veth rkv0 (the VM); RKV_SKIP_RXE_MODE or a
# native device (no rkv0) print a SKIP line, which CI counts as a failure unless allowed.
if [ -n "${RKV_SKIP_RXE_MODE:-}" ]; then
  echo "[case SKIP] run: rdma-sandbox native rxe mode (RKV_SKIP_RXE_MODE is set)"
elif ! rdma link show 2>/dev/null | grep -q "^link rxe0/[0-9]* .* netdev rkv0\b"; then
  echo "[case SKIP] run: rdma-sandbox native rxe mode (no soft-RoCE rxe0 on rkv0 here: $(rdma link show 2>&1 | head -1))"
elif ! rdma link delete rxe0 > "$logs/sandbox-rxe.txt" 2>&1 || ! ip link delete rkv0 >> "$logs/sandbox-rxe.txt" 2>&1; then
  echo "[case FAIL] run: rdma-sandbox native rxe mode (removing rxe0 and rkv0 failed: $(tr '\n' ' ' < "$logs/sandbox-rxe.txt"))"; rc=1
else
  "$src/tools/rdma-sandbox" -- sh -c 'ibv_devices | grep -q rxe0 && rping -s -a $RKV_SANDBOX_ADDR -C 2 >/dev/null & for i in 1 2 3 4 5 6 7 8 9 10; do sleep 1; rping -c -a $RKV_SANDBOX_ADDR -C 2 && exit 0; done; exit 1' \
    > "$logs/sandbox-rxe.txt" 2>&1
  if [ $? -eq 0 ] && grep -q "soft-RoCE link rxe0 on veth rkv0" "$logs/sandbox-rxe.txt"; then
    echo "[case PASS] run: rdma-sandbox native rxe mode (no device, rdma_rxe loadable)"
  else
    echo "[case FAIL] run: rdma-sandbox native rxe mode"; cat "$logs/sandbox-rxe.txt"; rc=1
  fi
fi
exit $rc
