#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# kvserver refuses bad or dangerous flags before it touches any device (so this runs on any
# host, no RDMA needed): each refused case must exit non-zero with a message naming the flag;
# each accepted case (--check_config) must exit 0 printing exactly "kvserver: configuration OK".
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
refused "--cluster_disk_hold_ms must be 1000..600000" --cluster=etcd://127.0.0.1:1/x --cluster_disk_hold_ms=5
refused "--cluster_disk_hold_ms must be 1000..600000" --cluster=etcd://127.0.0.1:1/x --cluster_disk_hold_ms=600001
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
# --check_config: the flags a start would accept give exit 0 and "configuration OK" (no device
# touched, so this runs anywhere); it checks exactly what a start checks, so a refused flag is
# still refused with it.
accepted() {  # WHAT FLAGS...
  local what=$1; shift
  local out rc=0
  out=$(timeout 20 "$kvserver" --listen=127.0.0.1:7999 --check_config "$@" 2>&1) || rc=$?
  if [ "$rc" -eq 0 ] && [ "$out" = "kvserver: configuration OK" ]; then
    pass=$((pass + 1)); echo "[case PASS] kvserver-flags: $what"
  else
    fail=$((fail + 1)); echo "[case FAIL] kvserver-flags: $what (exit $rc): $out"
  fi
}
accepted "--check_config accepts the defaults"
accepted "--test_mode allows --psn, --force_rq_psn and --force_dest_qp_num" --test_mode --psn=5 \
  --force_rq_psn=5 --force_dest_qp_num=99
refused "--test_mode" --check_config --psn=5
refused "--workers must be 1..64" --check_config --workers=0
refused "is too small for the index" --check_config --memory=1M --buckets=1000000
tok=$(mktemp -d)
head -c 32 /dev/urandom | base64 > "$tok/token"
chmod 600 "$tok/token"
accepted "--check_config reads a good --auth_token_file" --auth_token_file="$tok/token"
chmod 644 "$tok/token"
refused "--auth_token_file" --check_config --auth_token_file="$tok/token"
rm -rf "$tok"
echo "kvserver flags: $pass passed, $fail failed"
[ "$fail" -eq 0 ]
