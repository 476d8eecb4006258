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
refused "--metrics_listen" --metrics_listen=bogus
refused "unknown flag '--auth_token_fil=/x'" --auth_token_fil=/x
refused "bad value 'lots' for flag --workers" --workers=lots
# A flagfile is held to the command line's rules (gflags alone ignores unknown flags there, and
# a line without dashes silently switches off the lines after it).
ff=$(mktemp -d)
printf '# comment\n\n--memory=64M\n--auth_token_fil=/etc/rkv/token\n' > "$ff/typo.flags"
printf -- '--memory=64M\nauth_token_file=/etc/rkv/token\n--allow_unauthenticated\n' > "$ff/nodash.flags"
printf -- '--flagfile=%s\n' "$ff/typo.flags" > "$ff/nested.flags"
refused "typo.flags:4: unknown flag '--auth_token_fil=/etc/rkv/token'" --flagfile="$ff/typo.flags"
refused "nodash.flags:2: 'auth_token_file=/etc/rkv/token' is not a flag" --flagfile="$ff/nodash.flags"
refused "typo.flags:4: unknown flag" --flagfile="$ff/nested.flags"
refused "--flagfile $ff/missing.flags: open: No such file or directory" --flagfile="$ff/missing.flags"
rm -rf "$ff"
# --test_mode lets them through to the device (which may be absent here: any later error).
out=$(timeout 20 "$kvserver" --listen=127.0.0.1:7999 --psn=5 --test_mode 2>&1 | head -3)
if [[ "$out" == *"--test_mode"* ]]; then
  fail=$((fail + 1)); echo "[case FAIL] kvserver-flags: --test_mode did not allow --psn: $out"
else
  pass=$((pass + 1)); echo "[case PASS] kvserver-flags: --psn allowed with --test_mode"
fi
echo "kvserver flags: $pass passed, $fail failed"
[ "$fail" -eq 0 ]
