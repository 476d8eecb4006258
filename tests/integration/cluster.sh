#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# A cluster of kvservers in one sandbox VM (issue 24; docs/cluster.md):
#   tests/integration/cluster.sh BUILD_DIR             (enters the RDMA sandbox)
#   tests/integration/cluster.sh BUILD_DIR ADDR LOG_DIR  (inside it)
# A real etcd (Debian's etcd-server, data on a tmpfs), `kvctl cluster init`, three kvservers
# --cluster on three addresses of the rxe interface (ip addr add; one port each otherwise),
# `kvctl cluster rebalance`, then:
#  - a verifying kvbench load and run through the cluster address: 0 failed operations, 0
#    verify failures, every server holds a fair share (none more than twice another's entries);
#  - a write sent straight to a server that does not own the key's slot: refused MOVED naming
#    the owner; through the cluster address the same write lands;
#  - an import begun on a server and abandoned (its migration record FAILED): the server gives
#    the slot back and frees its entries (server/cluster/import_sweeper.h); a BEGIN with a
#    forged nonce is refused;
#  - bad input: a server with an unknown cluster name and a second process on a registered
#    address fail to start with a clear error; a malformed map written into etcd is refused
#    by servers and clients, which go on with the map they have (cluster_bad_maps counts it);
#  - etcd stopped (SIGSTOP) during a verifying run: it goes on with the map the client has;
#    etcd back: a new client connects;
#  - a fourth server joins and `cluster rebalance` runs under a verifying workload a: 0 failed
#    operations and verify failures, the fourth server holds keys; `cluster remove` drains a
#    server to 0 entries under load, it is killed, and every key reads back; lin_load runs
#    through both (half its clients with a stale map) and its history must be linearizable;
#  - security: in a cluster with --auth_token_file, a kvserver registered with another token
#    gets no data (the migration to it fails authentication), clients without it are refused;
#  - a server killed (no replicas): keys of its slots report UNAVAILABLE naming it (no wrong
#    answer, no hang), other keys work; restarted with its --data_dir: its keys read back.
# Finally no server log holds a sanitizer report, a crash or a failed CHECK.
# RKV_CLUSTER_SERVER: the kvserver binary (default BUILD_DIR/kvserver; e.g. a ThreadSanitizer build).
# RKV_CLUSTER_SLOTS: the main cluster's slot count (default 4096).
# RKV_CLUSTER_OPS_DIV: N, the verifying runs beside the rebalance and the remove do 1/N of their
# operations (default 1; a TSan server is slower, and the moves are short with few slots).
# RKV_CLUSTER_LEASE_TTL: the servers' --cluster_lease_ttl (default 5): four TSan servers beside
# lin_load on a slow TCG host have let 3 s leases lapse, and a server whose lease lapsed is not
# live for a rebalance or a remove. No case here needs a death noticed fast.
# One "[case PASS|FAIL] cluster: ..." line per case; exit 1 if any failed.
set -uo pipefail
build=$(cd "${1:?usage: cluster.sh BUILD_DIR [ADDR LOG_DIR]}" && pwd) || exit 2
if [ $# -eq 1 ] && [ -z "${RKV_IN_SANDBOX:-}" ]; then
  export RKV_IN_SANDBOX=1
  exec "$(dirname "$0")/../../tools/rdma-sandbox" --timeout 1700 -- sh -c \
    "$0 \"$build\" \$RKV_SANDBOX_ADDR \$(mktemp -d /tmp/rkv-cluster.XXXXXX)"
fi
addr=${2:?usage: cluster.sh BUILD_DIR ADDR LOG_DIR}
logs=${3:?usage: cluster.sh BUILD_DIR ADDR LOG_DIR}
server=${RKV_CLUSTER_SERVER:-$build/kvserver}  # e.g. a ThreadSanitizer build
nslots=${RKV_CLUSTER_SLOTS:-4096}  # the main cluster's slots (fewer under TSan: shorter moves)
ttl=${RKV_CLUSTER_LEASE_TTL:-5}  # the servers' membership lease
ops_div=${RKV_CLUSTER_OPS_DIV:-1}  # the verifying runs beside a rebalance and a remove do 1/N
[ "${ttl//[0-9]/}" = "" ] && [ "${ttl:-0}" -ge 2 ] && [ "$ttl" -le 60 ] ||
  { echo "cluster.sh: RKV_CLUSTER_LEASE_TTL is kvserver's --cluster_lease_ttl, 2..60 ('$ttl')"; exit 2; }
for v in "$nslots" "$ops_div"; do
  case $v in ''|*[!0-9]*|0) echo "cluster.sh: RKV_CLUSTER_SLOTS and RKV_CLUSTER_OPS_DIV take a positive integer ('$v')"; exit 2 ;; esac
done
src=$(cd "$(dirname "$0")/../.." && pwd)
source "$src/tests/integration/common.sh"
rc=0
pass() { echo "[case PASS] cluster: $1"; echo "  (at ${SECONDS} s)"; }
fail() { echo "[case FAIL] cluster: $1${2:+ ($2)}"; rc=1; }
pids=()
cleanup() {
  for p in "${pids[@]}"; do kill "$p" 2>/dev/null; done
  [ -n "${etcd_pid:-}" ] && kill "$etcd_pid" 2>/dev/null
  wait 2>/dev/null
  rm -rf "${etcd_dir:-/nonexistent}" "${data:-/nonexistent}"
}
trap cleanup EXIT

# --- etcd on a tmpfs --------------------------------------------------------------------------
etcd_dir=$(mktemp -d /dev/shm/rkv-cluster-etcd.XXXXXX)
start_etcd() {
  etcd --data-dir "$etcd_dir" --listen-client-urls http://127.0.0.1:2379 \
    --advertise-client-urls http://127.0.0.1:2379 --listen-peer-urls http://127.0.0.1:2380 \
    > "$logs/etcd.log" 2>&1 &
  etcd_pid=$!
  for _ in $(seq 120); do
    etcdctl --endpoints=127.0.0.1:2379 endpoint health > /dev/null 2>&1 && return 0
    sleep 0.5
  done
  return 1
}
start_etcd || { echo "[case FAIL] cluster: etcd did not start"; cat "$logs/etcd.log"; exit 1; }
cl=etcd://127.0.0.1:2379/it
ctl() { "$build/kvctl" --timeout_ms=10000 "$@"; }

# --- three addresses -----------------------------------------------------------------------------
dev=$(ip -o -4 addr show | awk -v a="$addr" '$4 ~ "^"a"/" {print $2; exit}')
base=${addr%.*}
last=${addr##*.}
addrs=("$addr")
for k in 1 2 3; do
  a2="$base.$(( (last + 100 + k) % 250 + 1 ))"
  if [ -n "$dev" ] && ip addr add "$a2/24" dev "$dev" 2>> "$logs/ip.log"; then
    addrs+=("$a2")
  else
    addrs+=("$addr")  # one address, several ports
  fi
done
echo "# cluster servers on ${addrs[*]} (device ${dev:-?})"
port() { echo $((7600 + $1)); }
data=$(mktemp -d /dev/shm/rkv-cluster-data.XXXXXX)
start_server() {  # start_server I [extra flags]: server I on addrs[I]:port(I)
  local i=$1
  shift
  "$server" --listen="${addrs[$i]}:$(port "$i")" --memory=64M --allow_unauthenticated \
    --cluster="$cl" --cluster_lease_ttl=$ttl --data_dir="$data/s$i" --fsync=no "$@" \
    >> "$logs/server$i.log" 2>&1 &
  spid[$i]=$!
  pids+=("${spid[$i]}")
  for _ in $(seq 150); do
    "$build/kvctl" --server="${addrs[$i]}:$(port "$i")" stats > /dev/null 2>&1 && return 0
    kill -0 "${spid[$i]}" 2>/dev/null || return 1
    sleep 0.2
  done
  return 1
}
declare -A spid
stat_of() {  # stat_of I NAME
  "$build/kvctl" --server="${addrs[$1]}:$(port "$1")" stats 2>/dev/null | awk -v n="$2" '$1 == n {print $2}'
}

ctl --server="$cl" cluster init --slots="$nslots" > "$logs/init.out" 2>&1 &&
  pass "cluster init" || fail "cluster init" "$(cat "$logs/init.out")"
ok=1
for i in 0 1 2; do start_server "$i" || { ok=0; fail "server $i started" "$(tail -5 "$logs/server$i.log")"; }; done
[ $ok = 1 ] && pass "three servers joined"

# Bad input at start: an unknown cluster name; a second process on a registered address.
"$server" --listen="${addrs[0]}:$(port 5)" --memory=16M --allow_unauthenticated \
  --cluster=etcd://127.0.0.1:2379/nosuch > "$logs/nosuch.log" 2>&1
grep -q "does not exist" "$logs/nosuch.log" && pass "a server with an unknown cluster name refuses to start" ||
  fail "unknown cluster name" "$(tail -3 "$logs/nosuch.log")"

ctl --server="$cl" cluster rebalance > "$logs/rebalance.out" 2>&1 &&
  grep -q "$nslots unassigned slot" "$logs/rebalance.out" &&
  pass "cluster rebalance gives the $nslots slots to the live servers" ||
  fail "cluster rebalance" "$(cat "$logs/rebalance.out")"
sleep 1
owned=()
for i in 0 1 2; do owned+=("$(stat_of "$i" cluster_slots_owned)"); done
[ "$(( ${owned[0]:-0} + ${owned[1]:-0} + ${owned[2]:-0} ))" = "$nslots" ] &&
  pass "every slot owned by one server (${owned[*]})" || fail "slots owned" "${owned[*]}"
ctl --server="$cl" cluster status > "$logs/status.out" 2>&1
[ "$(grep -c " live slots " "$logs/status.out")" = 3 ] && pass "cluster status lists three live servers" ||
  fail "cluster status" "$(cat "$logs/status.out")"

# --- load through the cluster address ------------------------------------------------------------
bench() { "$build/kvbench" --server="$cl" --records=3000 --key_size=16 --value_size=32-200 "$@"; }
bench load --threads=2 --verify > "$logs/load.out" 2>&1; lrc=$?
bench run --workload=a --operations=6000 --threads=2 --verify > "$logs/run.out" 2>&1; rrc=$?
fails=$(grep -h "^\[VERIFY\], Failures" "$logs/load.out" "$logs/run.out" | awk -F', ' '{s += $3} END {print s + 0}')
[ $lrc = 0 ] && [ $rrc = 0 ] && [ "$fails" = 0 ] &&
  pass "kvbench load + run (workload a, --verify) through $cl: 0 failures" ||
  fail "kvbench through the cluster" "rc $lrc/$rrc failures $fails; $(tail -3 "$logs/run.out")"
e=()
for i in 0 1 2; do e+=("$(stat_of "$i" entries)"); done
min=${e[0]:-0}; max=${e[0]:-0}
for x in "${e[@]}"; do [ "${x:-0}" -lt "$min" ] && min=${x:-0}; [ "${x:-0}" -gt "$max" ] && max=${x:-0}; done
[ "$min" -gt 0 ] && [ "$max" -le $((2 * min)) ] &&
  pass "fair share: entries per server ${e[*]} (max <= 2 x min)" || fail "fair share" "${e[*]}"
ctl --server="$cl" stats > "$logs/stats.out" 2>&1 &&
  [ "$(awk '$1 == "entries" {print $2}' "$logs/stats.out")" = "$(( ${e[0]} + ${e[1]} + ${e[2]} ))" ] &&
  grep -q "^server[0-9]*\.entries " "$logs/stats.out" &&
  pass "kvctl stats through the cluster sums the servers' figures and lists each server's" ||
  fail "kvctl stats aggregate" "$(head -5 "$logs/stats.out")"

# --- MOVED ----------------------------------------------------------------------------------------
moved_ok=0
for k in $(seq 1 40); do
  key="moved-$k"
  for i in 0 1 2; do
    if ! "$build/kvctl" --server="${addrs[$i]}:$(port "$i")" put "$key" v > /dev/null 2> "$logs/moved.err"; then
      grep -q "MOVED: slot [0-9]* is owned by server" "$logs/moved.err" && moved_ok=1
      break 2
    fi
  done
done
[ $moved_ok = 1 ] && pass "a write sent to a server that does not own the slot is refused MOVED naming the owner" ||
  fail "MOVED" "$(cat "$logs/moved.err")"
ctl --server="$cl" put "$key" through-cluster && [ "$(ctl --server="$cl" get "$key")" = through-cluster ] &&
  pass "the same write through the cluster address lands at the owner" || fail "write through the cluster"
before=0
for i in 0 1 2; do before=$((before + $(stat_of "$i" rpc_moved))); done
[ "$before" -ge 1 ] && pass "servers count MOVED answers (rpc_moved $before)" || fail "rpc_moved counter"

# --- an abandoned import -------------------------------------------------------------------------
# A migration record (COPY to server 2 of a slot it does not hold), a MIGRATE_BEGIN and a partial
# copy, then the sender goes away and the record is marked FAILED (a source that died mid-copy,
# cancelled by the coordinator): the import sweeper gives the slot back and its entries are
# freed; nothing else moves. A BEGIN with another nonce than the record's, or naming a slot
# twice, is refused (import_probe).
r0=$(stat_of 2 cluster_reclaimed_keys); o0=$(stat_of 2 cluster_slots_owned)
"$build/import_probe" --cluster="$cl" --server="${addrs[2]}:$(port 2)" --keys=200 > "$logs/import_probe.out" 2>&1; ip=$?
imp=$(stat_of 2 cluster_slots_importing)
for _ in $(seq 150); do
  [ "$(stat_of 2 cluster_abandoned_imports)" -ge 1 ] 2>/dev/null && [ "$(stat_of 2 cluster_slots_importing)" = 0 ] &&
    [ "$(stat_of 2 cluster_reclaimed_keys)" -ge $((r0 + 200)) ] && break
  sleep 0.2
done
ab=$(stat_of 2 cluster_abandoned_imports); r1=$(stat_of 2 cluster_reclaimed_keys)
[ $ip = 0 ] && [ "$imp" = 1 ] && [ "${ab:-0}" -ge 1 ] && [ "$(stat_of 2 cluster_slots_importing)" = 0 ] &&
  [ "${r1:-0}" -ge $((r0 + 200)) ] && [ "$(stat_of 2 cluster_slots_owned)" = "$o0" ] &&
  pass "an abandoned import is given back and its 200 entries freed ($(head -1 "$logs/import_probe.out"); abandoned $ab, reclaimed $((r1 - r0)))" ||
  fail "abandoned import" "probe rc $ip importing $imp abandoned ${ab:-?} reclaimed ${r0:-?}->${r1:-?}; $(cat "$logs/import_probe.out")"

# --- the Python module through the cluster address ---------------------------------------------
if [ -d "$build/python/rkv" ]; then
  PYTHONPATH="$build/python" python3 - "$cl" > "$logs/python.out" 2>&1 <<'PY'
import sys, rkv
c = rkv.Client(sys.argv[1])
for i in range(50):
    c.put(b"py-%d" % i, b"v-%d" % i)
assert all(c.get(b"py-%d" % i) == b"v-%d" % i for i in range(50))
c.delete(b"py-7")
assert c.get(b"py-7") is None
# A MultiGet and a pipelined batch over keys of every server (each server's share in flight at
# once); a key written three times in one batch ends with its last value (rounds keep order).
keys = [b"py-%d" % i for i in range(50)]
got = c.multi_get(keys)
assert got == [None if i == 7 else b"v-%d" % i for i in range(50)], got
ops = [("put", b"pb-%d" % i, b"w-%d" % i) for i in range(40)]
ops += [("put", b"pb-same", b"1"), ("delete", b"pb-same"), ("put", b"pb-same", b"3")]
ops += [("get", b"py-%d" % i) for i in range(10)] + [("delete", b"py-8")]
res = c.execute(ops)
assert res[:40] == [True] * 40 and res[40:43] == [True, True, True], res
assert res[43:53] == [None if i == 7 else b"v-%d" % i for i in range(10)], res[43:53]
assert res[53] is True, res[53]
assert c.multi_get([b"pb-%d" % i for i in range(40)]) == [b"w-%d" % i for i in range(40)]
assert c.get(b"pb-same") == b"3" and c.get(b"py-8") is None
print("ok")
PY
  grep -q "^ok" "$logs/python.out" && pass "the Python module puts, gets, deletes, multi_gets and runs a pipelined batch over every server through $cl" ||
    fail "python through the cluster" "$(tail -3 "$logs/python.out")"
fi

# --- a malformed map in etcd ----------------------------------------------------------------------
# A verifying run goes on meanwhile with the map its client has; a new client is refused clearly.
good_map=$(mktemp "$logs/map.XXXXXX")
etcdctl --endpoints=127.0.0.1:2379 get --print-value-only /rkv/cluster/it/map > "$good_map"
bench run --workload=a --operations=12000 --threads=1 --verify > "$logs/badmap.out" 2>&1 &
bpid=$!
sleep 2
printf 'garbage' | etcdctl --endpoints=127.0.0.1:2379 put /rkv/cluster/it/map > /dev/null
sleep 2
bad=$(stat_of 0 cluster_bad_maps)
ctl --server="$cl" get moved-1 > /dev/null 2> "$logs/badmap-new.err"; nrc=$?
head -c -1 "$good_map" | etcdctl --endpoints=127.0.0.1:2379 put /rkv/cluster/it/map > /dev/null
wait $bpid; brc=$?
[ $brc = 0 ] && [ "${bad:-0}" -ge 1 ] && [ "$(stat_of 0 cluster_slots_owned)" = "${owned[0]}" ] &&
  pass "a malformed map is refused (cluster_bad_maps $bad); servers keep their slots, a running verified client goes on" ||
  fail "malformed map" "bad_maps ${bad:-?}, run rc $brc: $(tail -2 "$logs/badmap.out")"
[ $nrc = 2 ] && grep -q "slot map does not decode" "$logs/badmap-new.err" &&
  pass "a new client meeting the malformed map is refused clearly" || fail "new client on a bad map" "$(cat "$logs/badmap-new.err")"
ctl --server="$cl" get moved-1 > /dev/null 2>&1 || [ $? = 1 ] && pass "map restored: new clients connect" || fail "map restored"

# --- a second process on a registered address ------------------------------------------------------
"$server" --listen="${addrs[1]}:$(port 1)" --memory=16M --allow_unauthenticated \
  --cluster="$cl" > "$logs/dup.log" 2>&1
grep -qiE "busy|already|in use|Address" "$logs/dup.log" &&
  pass "a second kvserver on a registered address does not start" || fail "duplicate address" "$(tail -2 "$logs/dup.log")"

# --- etcd stopped ---------------------------------------------------------------------------------
ctl --server="$cl" put during-etcd-outage before > /dev/null
bench run --workload=a --operations=20000 --threads=1 --verify > "$logs/outage.out" 2>&1 &
bpid=$!
sleep 2
kill -STOP "$etcd_pid"
sleep 5
kill -CONT "$etcd_pid"
wait $bpid; orc=$?
[ $orc = 0 ] && pass "etcd stopped: a verifying run through the cluster goes on with the client's map" ||
  fail "etcd outage" "$(tail -3 "$logs/outage.out")"
ctl --server="$cl" get during-etcd-outage > /dev/null && pass "etcd back: a new client connects and reads" ||
  fail "after the outage"

# --- a fourth server joins; rebalance under a verifying load ------------------------------------
start_server 3 || fail "server 3 started" "$(tail -5 "$logs/server3.log")"
# Four live in etcd before the rebalance: server 3 registers after it answers, and the others
# registered again after the etcd outage above (on a slow host, seconds later: a rebalance
# that saw two live servers once moved nothing).
wait_live() {  # wait_live N WHAT: up to 60 s for `cluster status` to list N live servers
  for _ in $(seq 120); do
    ctl --server="$cl" cluster status > "$logs/status.out" 2>&1
    [ "$(grep -c " live slots " "$logs/status.out")" = "$1" ] && return 0
    sleep 0.5
  done
  fail "$1 live servers before $2" "$(cat "$logs/status.out")"
}
wait_live 4 "the rebalance"
# lin_load beside it: per-key linearizability through the moves, 3 of its 6 clients with a
# deliberately stale map (no watch: they learn of a move only from the ownership word or MOVED).
lin() {  # lin NAME SEED: a lin_load run until $logs/NAME.stop exists
  "$build/lin_load" --server="$cl" --clients=6 --stale_map_clients=3 --hot_keys=4 --keys=100 \
    --prefill=0 --seed="$2" --stop_file="$logs/$1.stop" --history="$logs/$1.hist" \
    > "$logs/$1.out" 2>&1
}
lin lin-rebalance 11 &
lpid=$!
bench run --workload=a --operations=$((30000 / ops_div)) --threads=2 --verify > "$logs/rebal-run.out" 2>&1 &
bpid=$!
sleep 2
ctl --server="$cl" cluster rebalance > "$logs/rebalance2.out" 2>&1; rbrc=$?
kill -0 $bpid 2>/dev/null && overlap="the verifying run outlasted the moves" ||
  overlap="the verifying run ended before the moves did (lin_load covered the rest)"
wait $bpid; brc=$?
sleep 1; touch "$logs/lin-rebalance.stop"
wait $lpid; lrc=$?
[ $lrc = 0 ] && pass "linearizable through the rebalance, stale-map clients included: $(grep -m1 -E "^lin_load: [0-9]+ " "$logs/lin-rebalance.out"); $(tail -1 "$logs/lin-rebalance.out")" ||
  fail "linearizability through the rebalance" "$(tail -5 "$logs/lin-rebalance.out")"
e3=$(stat_of 3 entries)
[ $rbrc = 0 ] && grep -q " slot(s) moved" "$logs/rebalance2.out" &&
  pass "cluster rebalance with a fourth server: $(cat "$logs/rebalance2.out")" ||
  fail "rebalance to a fourth server" "$(cat "$logs/rebalance2.out")"
[ $brc = 0 ] && [ "${e3:-0}" -gt 0 ] &&
  pass "a verifying workload a through the rebalance: 0 failed operations, 0 verify failures; server 3 holds ${e3} entries; $overlap" ||
  fail "workload through the rebalance" "rc $brc, server 3 entries ${e3:-?}; $(grep -E "Failures|errors|FAILED" "$logs/rebal-run.out" | head -3)"
o=()
for i in 0 1 2 3; do o+=("$(stat_of "$i" cluster_slots_owned)"); done
[ "$(( ${o[0]:-0} + ${o[1]:-0} + ${o[2]:-0} + ${o[3]:-0} ))" = "$nslots" ] && [ "${o[3]:-0}" -ge $((nslots * 1000 / 4096)) ] &&
  pass "slots after the rebalance: ${o[*]}" || fail "slots after the rebalance" "${o[*]}"

# --- cluster remove drains a server under load; then it is killed and every key reads back -----------
wait_live 4 "the remove"  # a lease lapsed on a loaded host: the remove would refuse
lin lin-remove 12 &
lpid=$!
bench run --workload=a --operations=$((20000 / ops_div)) --threads=2 --verify > "$logs/remove-run.out" 2>&1 &
bpid=$!
sleep 2
ctl --server="$cl" cluster remove "${addrs[1]}:$(port 1)" > "$logs/remove.out" 2>&1; rmrc=$?
kill -0 $bpid 2>/dev/null && overlap="the verifying run outlasted the moves" ||
  overlap="the verifying run ended before the moves did (lin_load covered the rest)"
wait $bpid; brc=$?
sleep 1; touch "$logs/lin-remove.stop"
wait $lpid; lrc=$?
[ $lrc = 0 ] && pass "linearizable through the remove, stale-map clients included: $(grep -m1 -E "^lin_load: [0-9]+ " "$logs/lin-remove.out"); $(tail -1 "$logs/lin-remove.out")" ||
  fail "linearizability through the remove" "$(tail -5 "$logs/lin-remove.out")"
e1=$(stat_of 1 entries); o1=$(stat_of 1 cluster_slots_owned)
[ $rmrc = 0 ] && [ "${o1:-1}" = 0 ] && [ "${e1:-1}" = 0 ] &&
  pass "cluster remove drained server 1 to 0 slots and 0 entries: $(cat "$logs/remove.out")" ||
  fail "cluster remove" "rc $rmrc slots ${o1:-?} entries ${e1:-?}: $(cat "$logs/remove.out")"
[ $brc = 0 ] && pass "a verifying workload a through the remove: 0 failures; $overlap" ||
  fail "workload through the remove" "$(grep -E "Failures|errors" "$logs/remove-run.out" | head -3)"
kill -9 "${spid[1]}"; wait "${spid[1]}" 2>/dev/null
bench run --workload=c --operations=3000 --threads=1 --verify > "$logs/after-remove.out" 2>&1; brc=$?
[ $brc = 0 ] && ! grep -q "Return=NOT_FOUND" "$logs/after-remove.out" &&
  pass "server 1 killed after the remove: every key read reads back (no NOT_FOUND, verified)" ||
  fail "reads after the remove" "$(grep -E "NOT_FOUND|Failures|errors" "$logs/after-remove.out" | head -3)"

# --- a server killed (no replicas) -------------------------------------------------------------------
# (kv_keys: one process for all the keys; a kvctl per key costs seconds on the sandbox.)
keys() { timeout 300 "$build/kv_keys" --timeout_ms=10000 "$@"; }
keys --server="$cl" put probe 60 > "$logs/probe-put.out" 2>&1 || fail "probe puts" "$(cat "$logs/probe-put.out")"
kill -9 "${spid[2]}"
wait "${spid[2]}" 2>/dev/null
keys --server="$cl" --timeout_ms=3000 get probe 60 > "$logs/probe.out" 2>&1
read -r unavail others wrong <<< "$(awk '/^kv_keys: get/ {print $10, $4, $6 + $8 + $12}' "$logs/probe.out")"
[ "${unavail:-0}" -gt 0 ] && [ "${others:-0}" -gt 0 ] && [ "${wrong:-1}" = 0 ] &&
  pass "server killed: its keys UNAVAILABLE ($unavail), the others read ($others), no hang, no other error" ||
  fail "killed server" "$(cat "$logs/probe.out")"
sleep $((ttl + 1))  # its lease expires
start_server 2 || fail "server 2 restarted" "$(tail -5 "$logs/server2.log")"
bench run --workload=c --operations=3000 --threads=1 --verify > "$logs/back.out" 2>&1; brc=$?
keys --server="$cl" get probe 60 > "$logs/probe-back.out" 2>&1 && back=60 || back="$(cat "$logs/probe-back.out")"
[ $brc = 0 ] && [ "$back" = 60 ] && pass "restarted with its --data_dir: every key reads back (60 probes, verified run)" ||
  fail "after restart" "$back; $(tail -3 "$logs/back.out")"

# --- security: servers prove the cluster's token to each other -------------------------------------
# Cluster "sec": server A with the token; a rogue kvserver registers with another token. A
# rebalance would move half of A's slots to it: the migration's connection fails authentication
# (the rogue cannot prove the token), nothing is sent, A keeps its slots and keys.
sec=etcd://127.0.0.1:2379/sec
mktoken() { head -c 32 /dev/urandom | od -An -tx1 | tr -d ' \n' > "$1"; chmod 600 "$1"; }
mktoken "$logs/token"; mktoken "$logs/rogue-token"
ctl --server="$sec" cluster init --slots=256 > /dev/null 2>&1
sec_srv() {  # sec_srv NAME ADDR PORT TOKEN
  "$server" --listen="$2:$3" --memory=32M --cluster="$sec" --cluster_lease_ttl=$ttl \
    --auth_token_file="$4" >> "$logs/$1.log" 2>&1 &
  pids+=($!)
  for _ in $(seq 150); do
    "$build/kvctl" --server="$2:$3" --auth_token_file="$4" stats > /dev/null 2>&1 && return 0
    sleep 0.2
  done
  return 1
}
sec_srv secA "${addrs[0]}" 7620 "$logs/token" || fail "sec: server A started" "$(tail -3 "$logs/secA.log")"
ctl --server="$sec" cluster rebalance > /dev/null 2>&1
keys --server="$sec" --auth_token_file="$logs/token" --value_prefix=s put sec 40 > "$logs/sec-put.out" 2>&1 && sok=40 ||
  sok="$(cat "$logs/sec-put.out")"
ctl --server="$sec" get sec-1 > /dev/null 2> "$logs/sec-noauth.err"
[ "$sok" = 40 ] && grep -q "UNAUTHENTICATED" "$logs/sec-noauth.err" &&
  pass "sec: with --auth_token_file the cluster serves token holders and refuses others" ||
  fail "sec: authenticated cluster" "puts $sok; $(cat "$logs/sec-noauth.err")"
sec_srv secR "${addrs[2]}" 7621 "$logs/rogue-token" || fail "sec: rogue started" "$(tail -3 "$logs/secR.log")"
ctl --server="$sec" --wait_ms=120000 cluster rebalance > "$logs/sec-rebalance.out" 2>&1; srrc=$?
rogue_in=$("$build/kvctl" --server="${addrs[2]}:7621" --auth_token_file="$logs/rogue-token" stats 2>/dev/null |
  awk '$1 == "migrated_keys_in" || $1 == "entries" {s += $2} END {print s + 0}')
keys --server="$sec" --auth_token_file="$logs/token" --value_prefix=s get sec 40 > "$logs/sec-get.out" 2>&1 && back=40 ||
  back="$(cat "$logs/sec-get.out")"
[ $srrc != 0 ] && grep -q "UNAUTHENTICATED\|could not move" "$logs/sec-rebalance.out" && [ "$rogue_in" = 0 ] && [ "$back" = 40 ] &&
  pass "sec: a server registered without the token gets no data (migration refused: $(head -c 160 "$logs/sec-rebalance.out")); every key still reads" ||
  fail "sec: rogue server" "rc $srrc rogue entries+keys ${rogue_in:-?} back $back: $(cat "$logs/sec-rebalance.out")"
grep -q "UNAUTHENTICATED\|authentic" "$logs/secA.log" && pass "sec: the source logs why the migration failed" ||
  fail "sec: source log" "$(grep -i migration "$logs/secA.log" | tail -2)"

for f in "$logs"/server*.log "$logs"/sec*.log; do
  if grep -qE "$CRASH_PATTERN" "$f"; then fail "$(basename "$f") clean" "$(grep -E "$CRASH_PATTERN" "$f" | head -2)"; fi
done
exit $rc
