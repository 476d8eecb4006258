# SPDX-License-Identifier: Apache-2.0
# Sourced by the replica tests (replicas.sh, replicas_linkcut.sh, replicas_partition.sh); needs their `ctl` function
# and $logs.
#   wait_status CLUSTER REGEX SECONDS: polls `kvctl cluster status` every 0.5 s until its output
#     (kept in $logs/status.now) matches REGEX; 1 if it never did within SECONDS.
#   full CLUSTER R SECONDS: until no slot is without a live replica and each has R live.
wait_status() {
  for _ in $(seq $((2 * $3))); do
    ctl --server="$1" cluster status > "$logs/status.now" 2>&1
    grep -qE "$2" "$logs/status.now" && return 0
    sleep 0.5
  done
  return 1
}
full() { wait_status "$1" "with no live replica; at least $2 live per slot" "$3"; }
