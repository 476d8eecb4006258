#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# R=3 across real hosts, two of them cut off one after the other (issue 25), in the four-host
# sandbox (tools/rdma-sandbox with RKV_SANDBOX_HOSTS=4, every VM's cable in one hub):
#   tests/integration/replicas_partition.sh BUILD_DIR
# VM A: etcd (data on a tmpfs) and the clients (lin_load --failover: 4 clients, 2 with an
# unwatched stale map); VMs B, C and D: one memory-only kvserver each (B's started first, so it
# is the elected coordinator). `cluster init --replicas=3`: every slot has a replica in each VM.
# Under load:
#  - B's cable is pulled (a primary, a backup of every other slot and the coordinator, cut
#    from etcd, the clients and the other servers at once): another server is elected, fails
#    B's primaries over and drops B as a backup; every slot keeps 2 live replicas;
#    a GET waiting at B when its cable is pulled (abandon_probe --mode=get) ends when the map
#    names the new primary (or when rxe fails the cut connection first), before its 60 s
#    timeouts, and reads the right value there;
#  - then C's cable is pulled: D is every slot's primary, alone;
#  - both cables plugged back: B and C (zombies with their old maps and data) register again
#    and are re-replicated until every slot has 3 live replicas;
#  - over the whole run: linearizable (checker), every acknowledged write there and every
#    acknowledged delete still deleted, the longest stretches without a successful write and
#    read reported.
# RKV_REPL_SERVER_FLAGS: more kvserver flags for every server (e.g. --replication_rings=false).
# One "[case PASS|FAIL] replicas-partition: ..." line per case; exit 1 if any failed.
set -uo pipefail
build=$(cd "${1:?usage: replicas_partition.sh BUILD_DIR}" && pwd) || exit 2
src=$(cd "$(dirname "$0")/../.." && pwd)
if [ -z "${RKV_IN_SANDBOX:-}" ]; then
  export RKV_IN_SANDBOX=1 RKV_SANDBOX_HOSTS=4
  exec "$src/tools/rdma-sandbox" --timeout 1500 -- "$0" "$build"
fi
cd "$src"
addr=${RKV_SANDBOX_ADDR:?not in the four-host sandbox}
read -r -a ad <<<"${RKV_SANDBOX_ADDRS:-}"
[ "${#ad[@]}" = 4 ] || { echo "not in the four-host sandbox (RKV_SANDBOX_ADDRS='${RKV_SANDBOX_ADDRS:-}')"; exit 2; }
logs=$(mktemp -d /tmp/rkv-replicas-partition.XXXXXX)
chmod 777 "$logs"
rc=0
pass() { echo "[case PASS] replicas-partition: $1"; echo "  (at ${SECONDS} s)"; }
fail() { echo "[case FAIL] replicas-partition: $1${2:+ ($2)}"; rc=1; }
host=(b c d)          # server I runs in VM ${host[I]}
saddr=("${ad[1]}" "${ad[2]}" "${ad[3]}")
sport=(7771 7772 7773)
pids=()
cleanup() {
  for h in b c d; do
    tools/sandbox-peer --host=$h link on > /dev/null 2>&1
    tools/sandbox-peer --host=$h kill > /dev/null 2>&1
  done
  for p in "${pids[@]}"; do kill "$p" 2>/dev/null; done
  wait 2>/dev/null
  rm -rf "${etcd_dir:-/nonexistent}"
}
trap cleanup EXIT

. "$src/tests/integration/multi_host.sh"  # start_etcd, ctl, up, stat_of
start_etcd partition || fail "etcd started" "$(tail -3 "$logs/etcd.log")"
cl="etcd://$addr:2379/pt"
. "$src/tests/integration/cluster_status.sh"  # wait_status, full
cable() {  # cable I off|on: pull or plug the cable of server I's VM
  tools/sandbox-peer --host="${host[$1]}" link "$2" >> "$logs/link.out" 2>&1
}

ctl --server="$cl" cluster init --slots=64 --replicas=3 > "$logs/init.out" 2>&1 ||
  fail "cluster init --replicas=3" "$(cat "$logs/init.out")"
for i in 0 1 2; do
  tools/sandbox-peer --host="${host[$i]}" spawn --timeout 1300 sh -c "exec '$build/kvserver' \
    --listen=${saddr[$i]}:${sport[$i]} --memory=32M --allow_unauthenticated --cluster=$cl \
    ${RKV_REPL_SERVER_FLAGS:-} >> '$logs/server$i.log' 2>&1" > /dev/null
  up "$i" || fail "server $i (VM ${host[$i]}) started" "$(tail -5 "$logs/server$i.log")"
done
ctl --server="$cl" cluster rebalance > "$logs/rebalance.out" 2>&1
if full "$cl" 3 90; then
  pass "three servers in three VMs, R=3: every slot has a replica in each"
else
  fail "placement" "$(cat "$logs/rebalance.out" "$logs/status.now")"
fi
coord=$(stat_of 0 cluster_coordinator)
p0=$(stat_of 0 cluster_slots_owned)
[ "${coord:-0}" = 1 ] && [ "${p0:-0}" -gt 0 ] &&
  pass "the server in VM B is the coordinator and the primary of $p0 slots" ||
  fail "roles of the server in VM B" "coordinator ${coord:-?} primary ${p0:-?}"

# abandon_probe --mode=get: from just before B's cable is pulled, GETs of a key whose primary
# is B (60 s rpc and connect timeouts) until one wait at B was abandoned or the map names the
# new primary: each must return its value, the one at the cut from the new primary.
timeout 600 "$build/abandon_probe" --mode=get --cluster="$cl" --stopped="${saddr[0]}:${sport[0]}" \
  --go_file="$logs/abandon.go" > "$logs/abandon.out" 2>&1 &
apid=$!
pids+=($apid)
for _ in $(seq 300); do grep -q "ready" "$logs/abandon.out" && break; sleep 0.1; done
"$build/lin_load" --server="$cl" --failover --clients=4 --stale_map_clients=2 --hot_keys=4 \
  --keys=60 --owned_keys=12 --prefill=0 --max_value=2000 --timeout_ms=8000 --seed=41 \
  --stop_file="$logs/pt.stop" --history="$logs/pt.hist" > "$logs/pt.out" 2>&1 &
lpid=$!
pids+=($lpid)
for _ in $(seq 600); do grep -q "run phase started" "$logs/pt.out" 2>/dev/null && break; sleep 0.2; done
sleep 2

# 1. B cut off.
touch "$logs/abandon.go"
cable 0 off || fail "B's cable pulled" "$(tail -3 "$logs/link.out")"
if wait_status "$cl" "server [0-9]+ [^ ]+:${sport[0]} down slots 0 backups 0" 40 && full "$cl" 2 120; then
  pass "B's cable pulled: another coordinator failed B's primaries over; every slot has 2 live replicas"
else
  fail "failover after B's cut" "$(cat "$logs/status.now")"
fi
wait $apid &&
  pass "GETs across the cut read the right value, at the new primary once the map named it: $(grep -m1 "returned in" "$logs/abandon.out")" ||
  fail "a GET at the cut primary" "$(tail -5 "$logs/abandon.out")"
sleep 2

# 2. C cut off too: D is left alone with every slot.
cable 1 off || fail "C's cable pulled" "$(tail -3 "$logs/link.out")"
if wait_status "$cl" "server [0-9]+ [^ ]+:${sport[1]} down slots 0 backups 0" 40 &&
   wait_status "$cl" "at least 1 live per slot" 40 &&
   [ "$(stat_of 2 cluster_slots_owned)" = 64 ]; then
  pass "C's cable pulled too: the server in VM D is the primary of every slot"
else
  fail "failover after C's cut" "$(cat "$logs/status.now") D owns $(stat_of 2 cluster_slots_owned)"
fi
sleep 3

# 3. Both plugged back: they register again, own nothing of their old roles at first, and are
# re-replicated until every slot has 3 live replicas again.
cable 0 on || fail "B's cable plugged back" "$(tail -3 "$logs/link.out")"
cable 1 on || fail "C's cable plugged back" "$(tail -3 "$logs/link.out")"
if full "$cl" 3 240 && [ "$(stat_of 0 cluster_reregistrations)" -ge 1 ] &&
   [ "$(stat_of 1 cluster_reregistrations)" -ge 1 ]; then
  pass "both cables back: B and C registered again (re-registrations $(stat_of 0 cluster_reregistrations), $(stat_of 1 cluster_reregistrations)) and were re-replicated: 3 live replicas per slot"
else
  fail "re-replication after the cables came back" "$(cat "$logs/status.now")"
fi
sleep 3
touch "$logs/pt.stop"
wait $lpid; lrc=$?
if [ $lrc = 0 ] && grep -q "^durability: " "$logs/pt.out"; then
  pass "two of three hosts cut off one after the other under load: linearizable, no acknowledged write lost: $(grep -m1 -E "^lin_load: [0-9]+ " "$logs/pt.out" | cut -c1-80); $(grep -m1 "^durability: " "$logs/pt.out" | cut -c1-160); $(grep -m1 "longest stretch" "$logs/pt.out" | sed 's/.*; longest/longest/')"
else
  fail "lin_load across the cuts" "rc $lrc: $(grep -E "violation|durability|error|failover" "$logs/pt.out" | head -5)"
fi
# A client in each peer VM writes through the cluster address; A reads every value.
ok=1
for h in b c d; do
  tools/sandbox-peer --host=$h run "$build/kvctl" --timeout_ms=10000 --server="$cl" put "pt-after-$h" "from-$h" \
    > /dev/null 2>&1 && [ "$(ctl --server="$cl" get "pt-after-$h" 2>/dev/null)" = "from-$h" ] || ok=0
done
[ $ok = 1 ] && pass "after the cuts, a client in each of B, C and D writes and one in A reads it" ||
  fail "writes from the peer VMs after the cuts"
for i in 0 1 2; do  # one stats call per server
  echo "# server $i (VM ${host[$i]}): $(stats_line "$i" repl_writes repl_retries repl_failures \
    cluster_promotions cluster_reregistrations cluster_slots_owned cluster_backup_slots)"
done
if grep -l "ThreadSanitizer\|AddressSanitizer\|Check failed" "$logs"/server*.log > /dev/null 2>&1; then
  fail "server logs clean" "$(grep -l "ThreadSanitizer\|AddressSanitizer\|Check failed" "$logs"/server*.log)"
fi
[ $rc = 0 ] || { echo "--- logs in $logs"; for i in 0 1 2; do echo "--- server $i"; tail -15 "$logs/server$i.log"; done; }
exit $rc
