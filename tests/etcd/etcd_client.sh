#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# tests/etcd/etcd_client.sh TEST_BINARY: starts a real three-member etcd cluster (Debian's
# etcd-server) on loopback, its data on /dev/shm, and runs the EtcdClient tests against it
# (tests/etcd_client_test.cc: keys, transactions, leases, watches, failover between members).
# No RDMA needed: runs on the host.
set -uo pipefail
bin=${1:?usage: etcd_client.sh TEST_BINARY}
command -v etcd > /dev/null || { echo "etcd not found (tools/setup-deps installs etcd-server)" >&2; exit 1; }
base=$((23000 + RANDOM % 2000 * 4))
dir=$(mktemp -d /dev/shm/rkv-etcd-client.XXXXXX)
pids=()
cleanup() {
  for p in "${pids[@]}"; do kill -CONT "$p" 2> /dev/null; kill "$p" 2> /dev/null; done
  wait 2> /dev/null
  rm -rf "$dir"
}
trap cleanup EXIT
cluster=""
for i in 0 1 2; do
  cluster+="${cluster:+,}m$i=http://127.0.0.1:$((base + 2 * i + 1))"
done
endpoints=""
for i in 0 1 2; do
  client=$((base + 2 * i)) peer=$((base + 2 * i + 1))
  etcd --name "m$i" --data-dir "$dir/m$i" \
    --listen-client-urls "http://127.0.0.1:$client" --advertise-client-urls "http://127.0.0.1:$client" \
    --listen-peer-urls "http://127.0.0.1:$peer" --initial-advertise-peer-urls "http://127.0.0.1:$peer" \
    --initial-cluster "$cluster" --initial-cluster-state new --initial-cluster-token "rkv-$base" \
    > "$dir/m$i.log" 2>&1 &
  pids+=($!)
  endpoints+="${endpoints:+,}http://127.0.0.1:$client"
done
ok=0
for _ in $(seq 120); do
  if ETCDCTL_API=3 etcdctl --endpoints="${endpoints//http:\/\//}" endpoint health > /dev/null 2>&1; then ok=1; break; fi
  sleep 0.5
done
if [ $ok != 1 ]; then
  echo "the etcd cluster did not become healthy; logs:" >&2
  tail -n 20 "$dir"/m*.log >&2
  exit 1
fi
RKV_ETCD_ENDPOINTS=$endpoints RKV_ETCD_PIDS="${pids[*]}" "$bin"
