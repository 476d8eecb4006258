#!/usr/bin/env bash
# kvserver refuses bad or dangerous flags before it touches any device (so this runs on any
# host, no RDMA needed): each case must exit non-zero with a message naming the flag.
#   tests/kvserver_flags.sh BUILD_DIR
set -uo pipefail
kvserver=${1:?usage: kvserver_flags.sh BUILD_DIR}/kvserver
pass=0 fail=0
refused() {  # EXPECTED_TEXT FLAGS...
  local want=$1; shift
  local out rc=0
  out=$(timeout 20 "$kvserver" --listen=127.0.0.1:7999 "$@" 2>&1) || rc=$?
  if [ "$rc" -ne 0 ] && [[ "$out" == *"$want"* ]]; then
    pass=$((pass + 1)); echo "[case PASS] kvserver-flags: $* refused"
  else
    fail=$((fail + 1)); echo "[case FAIL] kvserver-flags: $* (exit $rc): $out"
  fi
}
refused "--test_mode" --psn=5
refused "--test_mode" --force_rq_psn=5
refused "--test_mode" --force_dest_qp_num=99
refused "--max_conns_per_source" --max_conns_per_source=-1
refused "--max_connects_per_source_per_s" --max_connects_per_source_per_s=-2
refused "--connect_burst_per_source" --connect_burst_per_source=0
refused "--max_pending_per_source" --max_pending_per_source=-2
# --test_mode lets them through to the device (which may be absent here: any later error).
out=$(timeout 20 "$kvserver" --listen=127.0.0.1:7999 --psn=5 --test_mode 2>&1 | head -3)
if [[ "$out" == *"--test_mode"* ]]; then
  fail=$((fail + 1)); echo "[case FAIL] kvserver-flags: --test_mode did not allow --psn: $out"
else
  pass=$((pass + 1)); echo "[case PASS] kvserver-flags: --psn allowed with --test_mode"
fi
echo "kvserver flags: $pass passed, $fail failed"
[ "$fail" -eq 0 ]
