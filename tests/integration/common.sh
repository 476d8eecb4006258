# Shared by the sandbox test scripts (durability.sh, linearizability.sh, hostile.sh); sourced.
# Before sourcing, set KNOB_PREFIX (e.g. DUR): `knob NAME DEFAULT` then reads $DUR_NAME, else
# $RKV_DUR_NAME (tools/rdma-sandbox passes only RKV_* variables into the VM), else DEFAULT.
knob() {
  local a="${KNOB_PREFIX}_$1" b="RKV_${KNOB_PREFIX}_$1"
  echo "${!a:-${!b:-$2}}"
}
# What a crashed or sanitizer-reporting kvserver leaves in its log.
CRASH_PATTERN="ERROR: AddressSanitizer|WARNING: ThreadSanitizer|runtime error:|SUMMARY: (Address|Thread|UndefinedBehavior)Sanitizer|Segmentation fault|terminate called|Check failed"
# Leak reports at exit are noise for a server killed on purpose.
export ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=0}
