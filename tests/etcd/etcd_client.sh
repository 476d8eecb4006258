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
rc=$?

# kvctl's cluster commands against the same etcd (docs/cluster.md): init once, refused twice,
# status in text and JSON, and bad input refused with a reason.
kvctl=$(dirname "$bin")/kvctl
failed=0
check() {  # NAME EXPECTED-EXIT COMMAND... ; output in $out
  local name=$1 want=$2
  shift 2
  out=$("$@" 2>&1)
  local got=$?
  if [ "$got" = "$want" ]; then echo "[case PASS] etcd: kvctl $name"
  else echo "[case FAIL] etcd: kvctl $name (exit $got, want $want): $out"; failed=1; fi
}
hosts=${endpoints//http:\/\//}
addr="etcd://$hosts/kvctl-test"
check "cluster init" 0 "$kvctl" --server="$addr" cluster init --slots=64 --replicas=2
check "cluster init again is refused" 2 "$kvctl" --server="$addr" cluster init
[[ "$out" == *"already exists"* ]] || { echo "[case FAIL] etcd: refusal says why: $out"; failed=1; }
check "cluster status" 0 "$kvctl" --server="$addr" cluster status
[[ "$out" == *"epoch 1 slots 64 replicas 2 unassigned 64"* ]] ||
  { echo "[case FAIL] etcd: status text: $out"; failed=1; }
check "cluster status --json" 0 "$kvctl" --server="$addr" cluster status --json
echo "$out" | python3 -c 'import json,sys; j=json.load(sys.stdin); assert j["slots"]==64 and j["replicas"]==2 and j["epoch"]==1 and j["suspects"]==[], j' ||
  { echo "[case FAIL] etcd: status JSON: $out"; failed=1; }
check "status of a cluster that does not exist" 2 "$kvctl" --server="etcd://$hosts/nope" cluster status
check "slots not a power of two" 2 "$kvctl" --server="etcd://$hosts/bad1" cluster init --slots=100
check "four replicas" 2 "$kvctl" --server="etcd://$hosts/bad2" cluster init --replicas=4
check "a bad cluster address" 2 "$kvctl" --server="etcd://$hosts" cluster status
check "cluster with a server address" 2 "$kvctl" --server=127.0.0.1:7470 cluster status
check "get through a cluster address (not built yet)" 2 "$kvctl" --server="$addr" get k
check "every endpoint dead" 2 "$kvctl" --server="etcd://127.0.0.1:1,127.0.0.1:2/x" cluster status
[ $rc = 0 ] && [ $failed = 0 ]
