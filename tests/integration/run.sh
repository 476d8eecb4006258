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
"$build/kvserver" --listen="$addr:7470" --memory=128M --workers=2 > "$logs/kvserver-main.log" 2>&1 &
main=$!
"$build/kvserver" --listen="$addr:7471" --memory=4M --buckets=256 > "$logs/kvserver-small.log" 2>&1 &
small=$!
for i in $(seq 50); do
  "$build/kvctl" --server="$addr:7470" stats >/dev/null 2>&1 && "$build/kvctl" --server="$addr:7471" stats >/dev/null 2>&1 && break
  sleep 0.2
done
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
for p in $main $small; do
  if ! kill -0 $p 2>/dev/null; then echo "a kvserver died during the tests"; rc=1; fi
done
kill $main $small 2>/dev/null || true
wait $main $small 2>/dev/null || true
if [ $rc -ne 0 ]; then echo "--- kvserver-main.log (tail)"; tail -20 "$logs/kvserver-main.log"; fi
exit $rc
