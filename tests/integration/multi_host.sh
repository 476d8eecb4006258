# SPDX-License-Identifier: Apache-2.0
# Sourced by the multi-host replica tests (replicas_linkcut.sh, replicas_partition.sh), in VM A;
# needs $addr (A's address), $logs, $build and a `pids` array.
#   start_etcd NAME: etcd with its data on a tmpfs (its directory in $etcd_dir, for the
#     caller's cleanup), listening on $addr:2379 and 127.0.0.1:2379; returns once healthy
#     (at most 60 s); its pid added to pids.
#   ctl ARGS...: kvctl with a 10 s timeout.
#   up I / stat_of I NAME: server I (at ${saddr[I]}:${sport[I]}) answers within 30 s / one
#     figure of its `kvctl stats`.
#   stats_line I NAME...: "NAME VALUE " for each NAME server I reports, from one `kvctl stats`
#     (a kvctl costs a second or two on a loaded TCG VM).
start_etcd() {
  etcd_dir=$(mktemp -d "/dev/shm/rkv-$1-etcd.XXXXXX")
  etcd --data-dir "$etcd_dir" --listen-client-urls "http://$addr:2379,http://127.0.0.1:2379" \
    --advertise-client-urls "http://$addr:2379" --listen-peer-urls http://127.0.0.1:2380 \
    > "$logs/etcd.log" 2>&1 &
  pids+=($!)
  for _ in $(seq 120); do
    etcdctl --endpoints=127.0.0.1:2379 endpoint health > /dev/null 2>&1 && return 0
    sleep 0.5
  done
  return 1
}
ctl() { "$build/kvctl" --timeout_ms=10000 "$@"; }
up() {
  for _ in $(seq 150); do
    "$build/kvctl" --server="${saddr[$1]}:${sport[$1]}" stats > /dev/null 2>&1 && return 0
    sleep 0.2
  done
  return 1
}
stat_of() {
  "$build/kvctl" --server="${saddr[$1]}:${sport[$1]}" stats 2>/dev/null |
    awk -v n="$2" '$1 == n {print $2}'
}
stats_line() {
  local i=$1; shift
  local names
  names=$(IFS='|'; echo "$*")
  "$build/kvctl" --server="${saddr[$i]}:${sport[$i]}" stats 2>/dev/null |
    awk -v re="^($names)\$" '$1 ~ re {printf "%s %s ", $1, $2}'
}
