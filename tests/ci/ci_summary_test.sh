#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# tools/ci-summary on made-up JUnit files: a skip nothing allows fails the run, an allowed one is
# counted as skipped, a ctest test that never ran fails, a test named in --must-run but absent
# fails, and every skipped or not-run case is listed by name. One "[case ...]" line per check.
#   tests/ci/ci_summary_test.sh
set -uo pipefail
src=$(cd "$(dirname "$0")/../.." && pwd)
sum=$src/tools/ci-summary
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
failed=0
check() {  # WHAT EXPECTED_RC PATTERN... -- ARGS...  (each PATTERN must appear in the output)
  local what=$1 want_rc=$2; shift 2
  local pats=()
  while [ "$1" != -- ]; do pats+=("$1"); shift; done
  shift
  local out rc=0 p why=""
  out=$("$sum" "$@" 2>&1) || rc=$?
  [ "$rc" = "$want_rc" ] || why="exit $rc, wanted $want_rc"
  for p in "${pats[@]}"; do grep -qF -- "$p" <<< "$out" || why="${why:+$why; }no line '$p'"; done
  if [ -z "$why" ]; then echo "[case PASS] ci-summary: $what"
  else echo "[case FAIL] ci-summary: $what ($why)"; echo "$out" | sed 's/^/    /'; failed=1; fi
}
junit() {  # FILE then testcase XML bodies
  local f=$1; shift
  { echo '<?xml version="1.0" encoding="UTF-8"?><testsuite name="x">'; printf '%s\n' "$@"; echo '</testsuite>'; } > "$f"
}
out() { printf '<testcase name="%s" status="%s"><system-out>%s</system-out></testcase>' "$1" "$2" "$3"; }
: > "$tmp/none"
printf 'x: Ok*\n' > "$tmp/must"
printf '^x: gt: A\\.Skipped  needs a thing this machine lacks\n' > "$tmp/allow"
junit "$tmp/pass.xml" "$(out Ok.One run '[       OK ] Ok.One (1 ms)')"
junit "$tmp/other.xml" "$(out Other.One run '[       OK ] Other.One (1 ms)')"
junit "$tmp/gskip.xml" "$(out gt run $'[       OK ] A.Ok (1 ms)\n[  SKIPPED ] A.Skipped (0 ms)')"
junit "$tmp/cskip.xml" "$(out suite run $'[case PASS] s: one\n[case SKIP] s: two (no etcd)')"
junit "$tmp/notrun.xml" '<testcase name="debs" status="notrun"><skipped message="SKIP_RETURN_CODE=77"/></testcase>'
junit "$tmp/skipafter.xml" '<testcase name="debs" status="notrun"><skipped message="SKIP_RETURN_CODE=77"/><system-out>[case PASS] debs: setup</system-out></testcase>'
junit "$tmp/tsan.xml" "$(out durability-tsan run $'[case PASS] durability: kill cycles\n[case SKIP] durability: negative control, a memory-only restart under the load (DUR_NEGATIVE=0)')"
junit "$tmp/missing.xml" '<testcase name="notrun-exe" status="notrun"><skipped message="Unable to find executable"/></testcase>'

check "all passing: exit 0" 0 "1 passed, 0 failed" -- --must-run "$tmp/none" --allowed-skips "$tmp/none" "x=$tmp/pass.xml"
check "a gtest skip nothing allows fails, named" 1 "FAIL  x: gt: A.Skipped" "1 passed, 1 failed" -- \
  --must-run "$tmp/none" --allowed-skips "$tmp/none" "x=$tmp/gskip.xml"
check "an allowed gtest skip is counted skipped, with its reason" 0 "SKIP  x: gt: A.Skipped (allowed: needs a thing" \
  "1 passed, 0 failed, 1 skipped" -- --must-run "$tmp/none" --allowed-skips "$tmp/allow" "x=$tmp/gskip.xml"
check "a script's case-SKIP line fails unless allowed" 1 "FAIL  x: suite: s: two (no etcd)" "1 passed, 1 failed" -- \
  --must-run "$tmp/none" --allowed-skips "$tmp/none" "x=$tmp/cskip.xml"
check "a ctest SKIP_RETURN_CODE skip fails unless allowed" 1 "FAIL  x: debs: debs" "0 passed, 1 failed" -- \
  --must-run "$tmp/none" --allowed-skips "$tmp/none" "x=$tmp/notrun.xml"
check "a test ctest could not run fails" 1 "0 passed, 1 failed" -- --must-run "$tmp/none" --allowed-skips "$tmp/none" \
  "x=$tmp/missing.xml"
check "a must-run test that is absent fails" 1 "x: Ok*: must run on this machine" "1 passed, 1 failed" -- \
  --must-run "$tmp/must" --allowed-skips "$tmp/none" "x=$tmp/other.xml"
check "a must-run test that is present passes" 0 "1 passed, 0 failed" -- --must-run "$tmp/must" --allowed-skips "$tmp/none" \
  "x=$tmp/pass.xml"
check "a test that prints a case and then skips fails unless allowed" 1 "1 passed, 1 failed" -- \
  --must-run "$tmp/none" --allowed-skips "$tmp/none" "x=$tmp/skipafter.xml"
check "a must-run label whose JUnit file was not given fails" 1 "none was given" -- \
  --must-run "$tmp/must" --allowed-skips "$tmp/none" "y=$tmp/other.xml"
check "the committed tools/ci-allowed-skips allows durability-tsan's disabled negative control" 0 \
  "1 passed, 0 failed, 1 skipped" -- --must-run "$tmp/none" "$tmp/tsan.xml"
check "the committed lists parse (tools/ci-must-run, tools/ci-allowed-skips)" 1 "must run on this machine" -- \
  "=$tmp/pass.xml"
check "the committed extended tier's list parses (tools/ci-must-run-extended)" 1 "must run on this machine" -- \
  --must-run "$src/tools/ci-must-run-extended" "=$tmp/pass.xml"
# Every test the extended list names is one CMakeLists.txt puts in the tier (the gate never runs
# them, so a misspelt name would show only in an extended run).
why=""
while read -r name; do
  grep -q "rkv_extended_test($name)" "$src/CMakeLists.txt" || why="${why:+$why, }$name"
done < <(sed -n 's/^: //p' "$src/tools/ci-must-run-extended")
[ -z "$why" ] && echo "[case PASS] ci-summary: each test of tools/ci-must-run-extended is labelled extended in CMakeLists.txt" ||
  { echo "[case FAIL] ci-summary: tests of tools/ci-must-run-extended not labelled extended: $why"; failed=1; }
exit $failed
