#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# A partial partition between replicas (issue 25; docs/cluster.md, "Partial partitions"), in
# the two-host sandbox:
#   tests/integration/replicas_linkcut.sh BUILD_DIR
# VM A: etcd (data on a tmpfs, listening on A's rxe address), two memory-only kvservers on two
# addresses of A's rxe interface, and the clients. VM B: a third memory-only kvserver.
# `cluster init --replicas=2`, every slot a primary and a backup; server 0 killed, so that
# server 1 (A) is every slot's primary and the server in B their backup; server 0 restarted
# empty; then, under lin_load --failover, `tc` drops every RoCE packet from host A to B (B stays
# registered: its etcd session is TCP): server 1 reports B (NAME/suspects/), the coordinator
# drops B from its slots, re-replication puts their backups on server 0 instead, and writes go
# on (linearizable, nothing acknowledged lost); the filter removed, server 1 reaches B again
# and deletes its report.
# A whole host cut off (its cable pulled: a primary, a backup and the coordinator at once) is
# tests/integration/replicas_partition.sh, in the four-host sandbox.
# RKV_REPL_SERVER_FLAGS: more kvserver flags for every server (e.g. --replication_rings=false).
# One "[case PASS|FAIL] replicas-linkcut: ..." line per case; exit 1 if any failed.
set -uo pipefail
build=$(cd "${1:?usage: replicas_linkcut.sh BUILD_DIR}" && pwd) || exit 2
src=$(cd "$(dirname "$0")/../.." && pwd)
if [ -z "${RKV_IN_SANDBOX:-}" ]; then
  export RKV_IN_SANDBOX=1 RKV_SANDBOX_HOSTS=2
  exec "$src/tools/rdma-sandbox" --timeout 1500 -- "$0" "$build"
fi
cd "$src"
addr=${RKV_SANDBOX_ADDR:?not in the two-host sandbox}
peer=${RKV_SANDBOX_PEER_ADDR:?not in the two-host sandbox}
logs=$(mktemp -d /tmp/rkv-replicas-linkcut.XXXXXX)
chmod 777 "$logs"
rc=0
pass() { echo "[case PASS] replicas-linkcut: $1"; echo "  (at ${SECONDS} s)"; }
fail() { echo "[case FAIL] replicas-linkcut: $1${2:+ ($2)}"; rc=1; }
pids=()
cleanup() {
  tools/sandbox-peer kill > /dev/null 2>&1
  for p in "${pids[@]}"; do kill "$p" 2>/dev/null; done
  wait 2>/dev/null
  rm -rf "${etcd_dir:-/nonexistent}"
}
trap cleanup EXIT

. "$src/tests/integration/multi_host.sh"  # start_etcd, ctl, up, stat_of
start_etcd linkcut || fail "etcd started" "$(tail -3 "$logs/etcd.log")"
cl="etcd://$addr:2379/lc"

# Servers 0 and 1 in A (two addresses of its rxe interface), server 2 in B.
dev=$(ip -o -4 addr show | awk -v a="$addr" '$4 ~ "^"a"/" {print $2; exit}')
a2="${addr%.*}.$(( ${addr##*.} + 100 ))"
[ -n "$dev" ] && ip addr add "$a2/24" dev "$dev" 2>> "$logs/ip.log" || a2=$addr
saddr=("$addr" "$a2" "$peer")
sport=(7761 7762 7763)
. "$src/tests/integration/cluster_status.sh"  # wait_status, full

ctl --server="$cl" cluster init --slots=128 --replicas=2 > "$logs/init.out" 2>&1 ||
  fail "cluster init --replicas=2" "$(cat "$logs/init.out")"
# Servers 1 and 0 in A first (server 1 wins the election and stays up throughout: the
# coordinator), placed by a rebalance: every slot a replica on each. Then B's server joins (it
# gets nothing: every slot has its two replicas).
start_local() {  # start_local I
  "$build/kvserver" --listen="${saddr[$1]}:${sport[$1]}" --memory=32M --allow_unauthenticated \
    --cluster="$cl" ${RKV_REPL_SERVER_FLAGS:-} >> "$logs/server$1.log" 2>&1 &
  pids+=($!)
  spid[$1]=$!
  up "$1" || fail "server $1 started" "$(tail -5 "$logs/server$1.log")"
}
start_local 1
start_local 0
ctl --server="$cl" cluster rebalance > "$logs/rebalance.out" 2>&1
if full "$cl" 2 60; then
  pass "two servers in host A, R=2: every slot has a primary and a live backup"
else
  fail "placement" "$(cat "$logs/rebalance.out" "$logs/status.now")"
fi
tools/sandbox-peer spawn --timeout 1200 sh -c "exec '$build/kvserver' \
  --listen=$peer:${sport[2]} --memory=32M --allow_unauthenticated --cluster=$cl \
  ${RKV_REPL_SERVER_FLAGS:-} >> '$logs/server2.log' 2>&1" > /dev/null
up 2 || fail "server 2 (host B) started" "$(tail -5 "$logs/server2.log")"
wait_status "$cl" "server [0-9]+ [^ ]+:${sport[2]} live slots 0 backups 0" 30 ||
  fail "server 2 (host B) registered, holding nothing" "$(cat "$logs/status.now")"
# A partial partition (docs/cluster.md, "Partial partitions"): host A's servers cannot reach
# B's server over RoCE (every RoCE packet from A to B dropped: an outgoing connection takes the
# route's source address, A's first one, whichever server opens it), while B keeps its etcd
# session (TCP) and so its lease. First make server 1 every slot's primary and B its backup:
# server 0 killed, its primaries fail over to server 1, re-replication copies every slot to B.
kill -9 "${spid[0]}" 2>/dev/null
if wait_status "$cl" "server [0-9]+ [^ ]+:${sport[0]} down slots 0 backups 0" 40 && full "$cl" 2 120 &&
   grep -qE "^server [0-9]+ [^ ]+:${sport[1]} live slots 128 backups 0" "$logs/status.now" &&
   grep -qE "^server [0-9]+ [^ ]+:${sport[2]} live slots 0 backups 128" "$logs/status.now" &&
   [ "$(stat_of 1 cluster_coordinator)" = 1 ]; then
  pass "server 0 killed: server 1 (the coordinator) primary of every slot, B's server the backup of every slot"
else
  fail "placement for the partial partition" "$(cat "$logs/status.now")"
fi
start_local 0  # empty: every slot has its two replicas, so it gets none
"$build/lin_load" --server="$cl" --failover --clients=2 --hot_keys=4 --keys=40 --owned_keys=8 \
  --prefill=0 --max_value=2000 --timeout_ms=8000 --seed=37 --stop_file="$logs/pp.stop" \
  --history="$logs/pp.hist" > "$logs/pp.out" 2>&1 &
ppid=$!
for _ in $(seq 600); do grep -q "run phase started" "$logs/pp.out" 2>/dev/null && break; sleep 0.2; done
sleep 2
tcok=1
{ tc qdisc add dev "$dev" root handle 1: prio &&
  tc filter add dev "$dev" parent 1: protocol ip prio 1 u32 match ip dst "$peer/32" \
    match ip protocol 17 0xff match ip dport 4791 0xffff action drop; } \
  > "$logs/tc.out" 2>&1 || tcok=0
if [ $tcok = 1 ]; then
  pass "every RoCE packet from host A to B dropped (tc u32 on $dev; etcd's TCP passes)"
  # B is live in etcd (its lease kept) and owns nothing once dropped; server 1 reported it.
  if wait_status "$cl" "server [0-9]+ [^ ]+:${sport[2]} live slots 0 backups 0" 60; then
    pass "server 1 reported B unreachable (reports $(stat_of 1 cluster_suspects_reported)) and the coordinator dropped B from its slots, B still live"
  else
    fail "B dropped from server 1's slots" "$(cat "$logs/status.now") reports $(stat_of 1 cluster_suspects_reported)"
  fi
  full "$cl" 2 120 && pass "re-replication gave server 1's slots their backups on server 0 (never on B)" ||
    fail "re-replication around the partition" "$(cat "$logs/status.now")"
  tc qdisc del dev "$dev" root >> "$logs/tc.out" 2>&1
  healed=0
  for _ in $(seq 60); do
    [ "$(stat_of 1 cluster_suspects_healed)" -ge 1 ] 2>/dev/null &&
      [ "$(stat_of 1 cluster_suspects)" = 0 ] &&
      [ -z "$(etcdctl --endpoints=127.0.0.1:2379 get --prefix --keys-only /rkv/cluster/lc/suspects/)" ] &&
      { healed=1; break; }
    sleep 1
  done
  [ $healed = 1 ] && pass "the filter removed: server 1 reached B again and deleted its report" ||
    fail "the report after the partition healed" "healed $(stat_of 1 cluster_suspects_healed) suspects $(stat_of 1 cluster_suspects)"
else
  fail "tc could not drop RoCE packets" "$(cat "$logs/tc.out")"
fi
touch "$logs/pp.stop"
wait $ppid; prc=$?
if [ $prc = 0 ] && grep -q "^durability: " "$logs/pp.out"; then
  pass "writes went on through the partial partition: linearizable, no acknowledged write lost: $(grep -m1 "^durability: " "$logs/pp.out" | cut -c1-120); $(grep -m1 "longest stretch" "$logs/pp.out" | sed 's/.*; longest/longest/')"
else
  fail "lin_load across the partial partition" "rc $prc: $(grep -E "violation|durability|error|failover" "$logs/pp.out" | head -5)"
fi
for i in 0 1 2; do
  echo "# server $i: $(stats_line "$i" repl_writes repl_retries repl_failures cluster_promotions \
    cluster_reregistrations cluster_suspects_reported cluster_suspects_healed cluster_suspect_drops)"
done
[ $rc = 0 ] || { echo "--- logs in $logs"; tail -15 "$logs/server2.log"; }
exit $rc
