#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# Replicas and failover when a server's link is cut (issue 25), in the two-host sandbox:
#   tests/integration/replicas_linkcut.sh BUILD_DIR
# VM A: etcd (data on a tmpfs, listening on A's rxe address), two memory-only kvservers on two
# addresses of A's rxe interface, and the clients (lin_load --failover: 4 clients, 2 with an
# unwatched stale map). VM B: a third memory-only kvserver, started first so that it is the
# elected coordinator. `cluster init --replicas=2`, every slot a primary and a backup; then B's
# cable is pulled (tools/sandbox-peer link off: no packet in or out, no DREQ, nothing) under
# load, so the cut server is at once a primary, a backup and the coordinator:
#  - another server is elected and fails the cut server's primaries over to their backups in A
#    (its lease expires); the slots it was a backup of are re-replicated between A's servers;
#  - the cable is plugged back: the cut server (a zombie: alive, with its old map and data)
#    learns the new map, registers again and serves none of its old slots;
#  - over the whole run: linearizable (checker), every acknowledged write there and every
#    acknowledged delete still deleted (lin_load's durability tally), the longest stretches
#    without a successful write and read reported;
#  - a partial partition: server 0 killed, so that server 1 (A) is every slot's primary and the
#    server in B their backup; server 0 restarted empty; then `tc` drops every RoCE packet from
#    host A to B (B stays registered: its etcd session is TCP): server 1 reports B
#    (NAME/suspects/), the coordinator drops B from its slots, re-replication puts their
#    backups on server 0 instead, and writes go on (lin_load --failover, linearizable, nothing
#    acknowledged lost); the filter removed, server 1 reaches B again and deletes its report.
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
pass() { echo "[case PASS] replicas-linkcut: $1"; }
fail() { echo "[case FAIL] replicas-linkcut: $1${2:+ ($2)}"; rc=1; }
pids=()
cleanup() {
  tools/sandbox-peer link on > /dev/null 2>&1
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
# B's server first: it wins the election, so the cut also takes the coordinator away.
tools/sandbox-peer spawn --timeout 1200 sh -c "exec '$build/kvserver' \
  --listen=$peer:${sport[2]} --memory=32M --allow_unauthenticated --cluster=$cl \
  >> '$logs/server2.log' 2>&1" > /dev/null
up 2 || fail "server 2 (host B) started" "$(tail -5 "$logs/server2.log")"
for i in 0 1; do
  "$build/kvserver" --listen="${saddr[$i]}:${sport[$i]}" --memory=32M --allow_unauthenticated \
    --cluster="$cl" >> "$logs/server$i.log" 2>&1 &
  pids+=($!)
  spid[$i]=$!
  up "$i" || fail "server $i started" "$(tail -5 "$logs/server$i.log")"
done
ctl --server="$cl" cluster rebalance > "$logs/rebalance.out" 2>&1
if full "$cl" 2 60; then
  pass "three servers on two hosts, R=2: every slot has a primary and a live backup"
else
  fail "placement" "$(cat "$logs/rebalance.out" "$logs/status.now")"
fi
coord=$(stat_of 2 cluster_coordinator)
p2=$(stat_of 2 cluster_slots_owned)
b2=$(stat_of 2 cluster_backup_slots)
[ "${coord:-0}" = 1 ] && [ "${p2:-0}" -gt 0 ] && [ "${b2:-0}" -gt 0 ] &&
  pass "the server in host B is the coordinator, a primary of $p2 slots and a backup of $b2" ||
  fail "roles of the server in host B" "coordinator ${coord:-?} primary ${p2:-?} backup ${b2:-?}"

# abandon_probe --mode=get: from just before the cable is pulled, GETs of a key whose primary is
# in B (60 s rpc and connect timeouts) until one wait at B was abandoned: each must return its
# value, the one at the cut from the new primary.
timeout 600 "$build/abandon_probe" --mode=get --cluster="$cl" --stopped="$peer:${sport[2]}" \
  --go_file="$logs/abandon.go" > "$logs/abandon.out" 2>&1 &
apid=$!
for _ in $(seq 300); do grep -q "ready" "$logs/abandon.out" && break; sleep 0.1; done
"$build/lin_load" --server="$cl" --failover --clients=4 --stale_map_clients=2 --hot_keys=4 \
  --keys=60 --owned_keys=12 --prefill=0 --max_value=2000 --timeout_ms=8000 --seed=31 \
  --stop_file="$logs/cut.stop" --history="$logs/cut.hist" > "$logs/cut.out" 2>&1 &
lpid=$!
# The cut falls in lin_load's run phase (not in its first phase or between the phases, where
# it reads the servers' statistics).
for _ in $(seq 600); do grep -q "run phase started" "$logs/cut.out" 2>/dev/null && break; sleep 0.2; done
sleep 2
touch "$logs/abandon.go"
tools/sandbox-peer link off > "$logs/link.out" 2>&1 || fail "B's cable pulled" "$(cat "$logs/link.out")"
down="server [0-9]+ [^ ]+:${sport[2]} down slots 0 backups 0"
if wait_status "$cl" "$down" 40; then
  pass "B's cable pulled: another coordinator failed its primaries over and dropped it as a backup"
else
  fail "failover after the cut" "$(cat "$logs/status.now")"
fi
wait $apid &&
  pass "a GET waiting on the cut primary read the new one once the map named it: $(grep -m1 "returned in" "$logs/abandon.out")" ||
  fail "a GET at the cut primary" "$(tail -5 "$logs/abandon.out")"
full "$cl" 2 120 && pass "the slots it was a backup of re-replicated in host A" ||
  fail "re-replication in A" "$(cat "$logs/status.now")"
sleep 2
tools/sandbox-peer link on >> "$logs/link.out" 2>&1 || fail "B's cable plugged back" "$(cat "$logs/link.out")"
for _ in $(seq 30); do
  tools/sandbox-peer run sh -c "ping -c 1 -W 2 $addr || busybox ping -c 1 -W 2 $addr" > /dev/null 2>&1 && break
  sleep 1
done
# The zombie registers again (a new lease) and serves nothing of its old slots: its words
# follow the new map (clients with a stale map are sent away by them and by their map lease).
back=0
for _ in $(seq 60); do
  if wait_status "$cl" "server [0-9]+ [^ ]+:${sport[2]} live slots 0 backups 0" 1 &&
     [ "$(stat_of 2 cluster_slots_owned)" = 0 ] && [ "$(stat_of 2 cluster_backup_slots)" = 0 ]; then
    back=1; break
  fi
done
[ $back = 1 ] && pass "the cut server, plugged back, registered again and owns no slot (re-registrations $(stat_of 2 cluster_reregistrations))" ||
  fail "the cut server after the cable came back" "$(cat "$logs/status.now") owned $(stat_of 2 cluster_slots_owned) backups $(stat_of 2 cluster_backup_slots)"
sleep 4
touch "$logs/cut.stop"
wait $lpid; lrc=$?
if [ $lrc = 0 ] && grep -q "^durability: " "$logs/cut.out"; then
  pass "a primary, backup and coordinator cut off under load: linearizable, no acknowledged write lost: $(grep -m1 -E "^lin_load: [0-9]+ " "$logs/cut.out" | cut -c1-80); $(grep -m1 "^durability: " "$logs/cut.out" | cut -c1-160); $(grep -m1 "longest stretch" "$logs/cut.out" | sed 's/.*; longest/longest/')"
else
  fail "lin_load across the cut" "rc $lrc: $(grep -E "violation|durability|error|failover" "$logs/cut.out" | head -5)"
fi
# Still a working cluster with the cut server back: a write and a read through it from host B.
if tools/sandbox-peer run "$build/kvctl" --server="$cl" put linkcut-after from-b > /dev/null 2>&1 &&
   [ "$(ctl --server="$cl" get linkcut-after 2>/dev/null)" = from-b ]; then
  pass "after the cut, a client in host B writes and one in host A reads it"
else
  fail "a write from host B after the cut"
fi
# A partial partition (docs/cluster.md, "Partial partitions"): host A's servers cannot reach
# B's server over RoCE (every RoCE packet from A to B dropped: an outgoing connection takes the
# route's source address, A's first one, whichever server opens it), while B keeps its etcd
# session (TCP) and so its lease. First make server 1 every slot's primary and B its backup.
kill -9 "${spid[0]}" 2>/dev/null
if wait_status "$cl" "server [0-9]+ [^ ]+:${sport[0]} down slots 0 backups 0" 40 && full "$cl" 2 120 &&
   [ "$(stat_of 2 cluster_backup_slots)" -gt 0 ]; then
  pass "server 0 killed: server 1 primary of every slot, B's server a backup of $(stat_of 2 cluster_backup_slots)"
else
  fail "placement for the partial partition" "$(cat "$logs/status.now")"
fi
"$build/kvserver" --listen="${saddr[0]}:${sport[0]}" --memory=32M --allow_unauthenticated \
  --cluster="$cl" >> "$logs/server0.log" 2>&1 &
pids+=($!)
up 0 || fail "server 0 restarted" "$(tail -5 "$logs/server0.log")"
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
  echo "# server $i: repl_writes $(stat_of "$i" repl_writes) repl_retries $(stat_of "$i" repl_retries) repl_failures $(stat_of "$i" repl_failures) promotions $(stat_of "$i" cluster_promotions) reregistrations $(stat_of "$i" cluster_reregistrations) suspects reported $(stat_of "$i" cluster_suspects_reported) healed $(stat_of "$i" cluster_suspects_healed) suspect drops $(stat_of "$i" cluster_suspect_drops)"
done
[ $rc = 0 ] || { echo "--- logs in $logs"; tail -15 "$logs/server2.log"; }
exit $rc
