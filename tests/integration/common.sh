# SPDX-License-Identifier: Apache-2.0
# Shared by the sandbox test scripts (durability.sh, linearizability.sh, hostile.sh); sourced.
# Before sourcing, set KNOB_PREFIX (e.g. DUR): `knob NAME DEFAULT` then reads $DUR_NAME, else
# $RKV_DUR_NAME (tools/rdma-sandbox passes only RKV_* variables into the VM), else DEFAULT.
knob() {
  local a="${KNOB_PREFIX}_$1" b="RKV_${KNOB_PREFIX}_$1"
  echo "${!a:-${!b:-$2}}"
}
# What a crashed or sanitizer-reporting kvserver leaves in its log.
CRASH_PATTERN="ERROR: AddressSanitizer|ERROR: LeakSanitizer|LeakSanitizer has encountered|WARNING: ThreadSanitizer|runtime error:|SUMMARY: (Address|Thread|UndefinedBehavior)Sanitizer|Segmentation fault|terminate called|Check failed"
# Leak checking at exit is off unless the caller set ASAN_OPTIONS: durability.sh and
# linearizability.sh kill servers (-9) on purpose, and a killed process is not leak-checked anyway.
# hostile.sh stops every server cleanly and sets detect_leaks=1 before sourcing this file.
export ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=0}
