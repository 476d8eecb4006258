#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# Replicas and failover in one sandbox VM (issue 25; docs/cluster.md, "Replication"):
#   tests/integration/replicas.sh BUILD_DIR             (enters the RDMA sandbox)
#   tests/integration/replicas.sh BUILD_DIR ADDR LOG_DIR  (inside it)
# A real etcd (data on a tmpfs), three memory-only kvservers (no --data_dir: only the replicas
# keep the data) on three addresses of the rxe interface, `cluster init --replicas=2`, then:
#  - placement: every slot has a primary and a backup on another server; a loaded data set is
#    held twice (entries over the servers = 2 x keys);
#  - bad input: REPLICATE with an old epoch, a forged sender, a sequence gap, an old sequence
#    number, to a primary, too short, a digest that does not match, from another address than
#    its sender registered: refused and counted, the key's value intact;
#  - under lin_load --failover (4 clients, 2 of them with a stale map, per-client owned keys):
#    kill -9 a primary; it comes back empty and is re-replicated; kill -9 another; a primary
#    SIGSTOPped past its lease then resumed (a zombie; a client's write waiting at it ends
#    when the map fails it over: abandon_probe); the coordinator killed (it is also a
#    primary); etcd stopped during a failover. After each: every acknowledged write is there
#    and every acknowledged delete stays deleted (lin_load's durability tally), the history is
#    linearizable, and the longest stretches without a successful write and read are reported;
#  - `cluster remove` of a live server under lin_load: it holds no replica when the command
#    returns, the others hold two per slot, nothing acknowledged is lost;
#  - R=3: two of three servers killed one after the other, the second as soon as the first was
#    failed over (its live backups kept, resynced by the promoted server: checked with two
#    slots left differing by repl_probe): nothing acknowledged is lost;
#  - a full replica (repl_fill); with log rings, a backup past 7/8 of its table revokes them,
#    and with room again rings are granted again to the same writers (ringroom);
#  - `cluster rebalance` onto a fourth server under lin_load: even shares of replicas and
#    primaries, nothing lost, linearizable; a new server killed during a rebalance onto it; the
#    coordinator killed during one (another carries the request, no slot stays IMPORTING);
#  - the whole cluster (durable, --fsync=no) killed -9 at once under lin_load and restarted,
#    then a primary killed: nothing acknowledged lost, linearizable;
#  - a full disk on a durable server: it is dropped as a backup, stays up, nothing acknowledged
#    is lost; space freed, two replicas per slot return.
# Finally no server log holds a sanitizer report or a failed CHECK.
# RKV_REPL_SERVER: the kvserver binary (default BUILD_DIR/kvserver; e.g. a ThreadSanitizer build).
# RKV_REPL_SERVER_FLAGS: more kvserver flags for every server (e.g. --replication_rings=false).
# RKV_REPL_SECTIONS: comma-separated sections to run after the placement and load cases (bad,
# kill, zombie, coord, remove, ringloss and ringroom (only with log rings: not with
# RKV_REPL_SERVER_FLAGS=--replication_rings=false), r3, full, balance, restart, disk; default all).
# One "[case PASS|FAIL] replicas: ..." line per case; exit 1 if any failed.
set -uo pipefail
build=$(cd "${1:?usage: replicas.sh BUILD_DIR [ADDR LOG_DIR]}" && pwd) || exit 2
if [ $# -eq 1 ] && [ -z "${RKV_IN_SANDBOX:-}" ]; then
  export RKV_IN_SANDBOX=1
  exec "$(dirname "$0")/../../tools/rdma-sandbox" --timeout 1700 -- sh -c \
    "$0 \"$build\" \$RKV_SANDBOX_ADDR \$(mktemp -d /tmp/rkv-replicas.XXXXXX)"
fi
addr=${2:?usage: replicas.sh BUILD_DIR ADDR LOG_DIR}
logs=${3:?usage: replicas.sh BUILD_DIR ADDR LOG_DIR}
server=${RKV_REPL_SERVER:-$build/kvserver}
rc=0
pass() { echo "[case PASS] replicas: $1"; echo "  (at ${SECONDS} s)"; }
fail() { echo "[case FAIL] replicas: $1${2:+ ($2)}"; rc=1; }
pids=()
cleanup() {
  for p in "${pids[@]}"; do kill -CONT "$p" 2>/dev/null; kill "$p" 2>/dev/null; done
  [ -n "${etcd_pid:-}" ] && { kill -CONT "$etcd_pid"; kill "$etcd_pid"; } 2>/dev/null
  wait 2>/dev/null
  rm -rf "${etcd_dir:-/nonexistent}"
}
trap cleanup EXIT

etcd_dir=$(mktemp -d /dev/shm/rkv-replicas-etcd.XXXXXX)
etcd --data-dir "$etcd_dir" --listen-client-urls http://127.0.0.1:2379 \
  --advertise-client-urls http://127.0.0.1:2379 --listen-peer-urls http://127.0.0.1:2380 \
  > "$logs/etcd.log" 2>&1 &
etcd_pid=$!
for _ in $(seq 120); do
  etcdctl --endpoints=127.0.0.1:2379 endpoint health > /dev/null 2>&1 && break
  sleep 0.5
done
ctl() { "$build/kvctl" --timeout_ms=10000 "$@"; }

dev=$(ip -o -4 addr show | awk -v a="$addr" '$4 ~ "^"a"/" {print $2; exit}')
base=${addr%.*}
last=${addr##*.}
addrs=("$addr")
for k in 1 2; do
  a2="$base.$(( (last + 110 + k) % 250 + 1 ))"
  if [ -n "$dev" ] && ip addr add "$a2/24" dev "$dev" 2>> "$logs/ip.log"; then
    addrs+=("$a2")
  else
    addrs+=("$addr")
  fi
done
echo "# replicated servers on ${addrs[*]} (device ${dev:-?})"
declare -A spid
port() { echo $((7700 + $1)); }
start_server() {  # start_server I CLUSTER [MEMORY [FLAGS...]]: server I (memory only unless
  # FLAGS name a --data_dir; starts empty) on addrs[I % 3]
  local i=$1
  "$server" --listen="${addrs[$((i % 3))]}:$(port "$i")" --memory="${3:-32M}" \
    --allow_unauthenticated --cluster="$2" ${RKV_REPL_SERVER_FLAGS:-} "${@:4}" \
    >> "$logs/server$i.log" 2>&1 &
  spid[$i]=$!
  pids+=("${spid[$i]}")
  for _ in $(seq 150); do
    "$build/kvctl" --server="${addrs[$((i % 3))]}:$(port "$i")" stats > /dev/null 2>&1 && return 0
    kill -0 "${spid[$i]}" 2>/dev/null || return 1
    sleep 0.2
  done
  return 1
}
stat_of() {  # stat_of I NAME
  "$build/kvctl" --server="${addrs[$(($1 % 3))]}:$(port "$1")" stats 2>/dev/null |
    awk -v n="$2" '$1 == n {print $2}'
}
. "$(dirname "$0")/cluster_status.sh"  # wait_status, full
want() { [ -z "${RKV_REPL_SECTIONS:-}" ] || [[ ",$RKV_REPL_SECTIONS," == *",$1,"* ]]; }
# Log rings (kvserver --replication_rings, on by default) unless the flags turn them off.
rings_on() {
  ! [[ " ${RKV_REPL_SERVER_FLAGS:-} " =~ [[:space:]]--?(noreplication_rings|replication_rings=(false|f|no|n|0))[[:space:]] ]]
}

cl=etcd://127.0.0.1:2379/rep
ctl --server="$cl" cluster init --slots=256 --replicas=2 > "$logs/init.out" 2>&1 ||
  fail "cluster init --replicas=2" "$(cat "$logs/init.out")"
ok=1
for i in 0 1 2; do start_server "$i" "$cl" || { ok=0; fail "server $i started" "$(tail -5 "$logs/server$i.log")"; }; done
ctl --server="$cl" cluster rebalance > "$logs/rebalance.out" 2>&1
if [ $ok = 1 ] && full "$cl" 2 30; then
  pass "three servers, R=2: every slot has a primary and a live backup ($(grep replicas: "$logs/status.now"))"
else
  fail "placement" "$(cat "$logs/rebalance.out" "$logs/status.now")"
fi
b=(); for i in 0 1 2; do b+=("$(stat_of "$i" cluster_backup_slots)"); done
[ "${b[0]:-0}" -gt 0 ] && [ "${b[1]:-0}" -gt 0 ] && [ "${b[2]:-0}" -gt 0 ] &&
  pass "each server is a backup of some slots (${b[*]})" || fail "backup slots" "${b[*]}"

"$build/kvbench" --server="$cl" --records=1500 --key_size=16 --value_size=32-200 load --threads=2 \
  --verify > "$logs/load.out" 2>&1; lrc=$?
sleep 1
tot=0; for i in 0 1 2; do tot=$((tot + $(stat_of "$i" entries))); done
[ $lrc = 0 ] && [ "$tot" -ge 3000 ] &&
  pass "a verified load of 1500 keys is held twice: $tot entries over the servers" ||
  fail "replicated load" "rc $lrc entries $tot: $(tail -2 "$logs/load.out")"
# The load's writes went through the workers' fast path (server/conn/replica_fast_path.h): the
# verified load above, and every section below, test it (the write pool takes the rest).
fw=0; rw=0; fc=0
for i in 0 1 2; do
  fw=$((fw + $(stat_of "$i" repl_fast_writes))); rw=$((rw + $(stat_of "$i" repl_writes)))
  fc=$((fc + $(stat_of "$i" repl_fast_continued)))
done
[ "$fw" -gt 0 ] && pass "replicated writes on the workers' fast path: $fw of $rw ($fc ended by a helper)" ||
  fail "the fast path" "repl_fast_writes $fw of repl_writes $rw"

if want bad; then
# --- bad replication messages ---------------------------------------------------------------------
for c in old_epoch forged gap old_sequence not_backup short bad_digest elsewhere query \
  query_forged query_short query_slot; do
  "$build/repl_probe" --cluster="$cl" --test_case="$c" > "$logs/probe-$c.out" 2>&1; prc=$?
  if [ $prc = 0 ]; then
    pass "REPLICATE $c: $(tail -1 "$logs/probe-$c.out" | cut -c1-200)"
  elif [ $prc = 3 ]; then  # the servers share one address (ip addr add failed)
    echo "# REPLICATE $c not tested: $(tail -1 "$logs/probe-$c.out")"
  else
    fail "REPLICATE $c" "$(tail -2 "$logs/probe-$c.out")"
  fi
done
# RING_GRANT: each malformed, forged or premature request refused, a valid one granted once per
# connection (servers with log rings); with --replication_rings=false every request is refused so.
"$build/repl_probe" --cluster="$cl" --test_case=ring_grant > "$logs/probe-ring_grant.out" 2>&1; prc=$?
rings_want="rings off"; rings_on && rings_want="rings on"
[ $prc = 0 ] && grep -q "^repl_probe: ring_grant: $rings_want, 0 unexpected" "$logs/probe-ring_grant.out" &&
  pass "RING_GRANT refusals ($rings_want): $(grep -c ': reply ' "$logs/probe-ring_grant.out") requests answered as they must be" ||
  fail "RING_GRANT refusals ($rings_want)" "rc $prc: $(grep -E 'UNEXPECTED|rings|Setup|probe:' "$logs/probe-ring_grant.out" | tail -4)"
refused=""
for n in repl_refused_epoch repl_refused_sender repl_refused_sequence repl_refused_state; do
  t=0; for i in 0 1 2; do t=$((t + $(stat_of "$i" $n))); done
  refused+="$n $t "
  [ "$t" -ge 1 ] || fail "counter $n" "$t"
done
pass "refusals counted: $refused"

fi

# --- failures under lin_load -----------------------------------------------------------------------
lin() {  # lin CLUSTER NAME SEED [FLAG...]: lin_load --failover until $logs/NAME.stop exists
  "$build/lin_load" --server="$1" --failover --clients=4 --stale_map_clients=2 --hot_keys=4 \
    --keys=60 --owned_keys=12 --prefill=0 --max_value=2000 --timeout_ms=8000 --seed="$3" "${@:4}" \
    --stop_file="$logs/$2.stop" --history="$logs/$2.hist" > "$logs/$2.out" 2>&1
}
running() {  # running NAME: waits until lin_load NAME is in its run phase (up to 120 s), then 2 s
  # more: a failure injected before it would fall in its first phase or between the phases
  # (where it reads the servers' statistics), not in the measured run.
  for _ in $(seq 600); do grep -q "run phase started" "$logs/$1.out" 2>/dev/null && break; sleep 0.2; done
  sleep 2
}
judge() {  # judge NAME RC WHAT
  if [ "$2" = 0 ] && grep -q "^durability: " "$logs/$1.out"; then
    pass "$3: linearizable, no acknowledged write lost: $(grep -m1 -E "^lin_load: [0-9]+ " "$logs/$1.out" | cut -c1-80); $(grep -m1 "^durability: " "$logs/$1.out" | cut -c1-160); $(grep -m1 "longest stretch" "$logs/$1.out" | sed 's/.*; longest/longest/')"
  else
    fail "$3" "rc $2: $(grep -E "violation|durability|error|failover" "$logs/$1.out" | head -5)"
  fi
}
coordinator() {  # the index of the server that leads
  for i in "$@"; do [ "$(stat_of "$i" cluster_coordinator)" = 1 ] && { echo "$i"; return; }; done
  echo "$1"
}

if want kill; then
# 1. kill -9 a primary (not the coordinator: its probe finds the dead process before its lease
# expires); back empty and re-replicated; kill -9 another.
lin "$cl" kill 21 &
lpid=$!
running kill
c0=$(coordinator 0 1 2)
v1=1; [ "$c0" = 1 ] && v1=2
v2=$((3 - v1))
fd0=$(stat_of "$c0" cluster_found_dead); fd0=${fd0:-0}
kill -9 "${spid[$v1]}"
wait_status "$cl" "server [0-9]+ [^ ]+:$(port $v1) down slots 0 " 30 &&
  pass "server $v1 killed: its slots failed over ($(grep replicas: "$logs/status.now"))" ||
  fail "failover after kill -9" "$(cat "$logs/status.now")"
fd=$(stat_of "$c0" cluster_found_dead)
[ "${fd:-0}" -gt "$fd0" ] &&
  pass "the coordinator's probe found the killed server dead (cluster_found_dead $fd0 -> $fd)" ||
  fail "the coordinator's probe did not find the killed server dead" "cluster_found_dead ${fd:-?}"
sleep 2
start_server $v1 "$cl" || fail "server $v1 back (empty)"
full "$cl" 2 180 && pass "server $v1 back empty and re-replicated: $(grep replicas: "$logs/status.now")" ||
  fail "re-replication" "$(cat "$logs/status.now")"
sleep 2
kill -9 "${spid[$v2]}"
wait_status "$cl" "server [0-9]+ [^ ]+:$(port $v2) down slots 0 " 30 ||
  fail "failover after the second kill" "$(cat "$logs/status.now")"
sleep 3
touch "$logs/kill.stop"
wait $lpid; judge kill $? "kill -9 of a primary, back empty, re-replicated, kill -9 of another"
start_server $v2 "$cl" || fail "server $v2 back (empty)"
full "$cl" 2 180 || fail "re-replication after the second kill" "$(cat "$logs/status.now")"

fi

if want zombie; then
# 2. a zombie primary: SIGSTOP past its lease, then SIGCONT. abandon_probe has a connection to
# every primary and, once the server is stopped, PUTs a key of its first: the wait there must
# end when the map fails it over (not at the probe's 60 s rpc timeout).
lin "$cl" zombie 22 &
lpid=$!
timeout 600 "$build/abandon_probe" --cluster="$cl" --stopped="${addrs[0]}:$(port 0)" \
  --go_file="$logs/abandon.go" > "$logs/abandon.out" 2>&1 &
apid=$!
for _ in $(seq 300); do grep -q "ready" "$logs/abandon.out" && break; sleep 0.1; done
running zombie
kill -STOP "${spid[0]}"
touch "$logs/abandon.go"
wait_status "$cl" "server [0-9]+ [^ ]+:$(port 0) down slots 0 " 30 ||
  fail "failover of a stopped primary" "$(cat "$logs/status.now")"
wait $apid &&
  pass "a write waiting at the stopped primary ended when the map failed it over: $(grep "^abandon_probe: second" "$logs/abandon.out")" ||
  fail "a write waiting at the stopped primary" "$(tail -3 "$logs/abandon.out")"
sleep 3  # past the promoted backups' write fence: writes land on them
kill -CONT "${spid[0]}"
sleep 5
touch "$logs/zombie.stop"
wait $lpid; judge zombie $? "a primary SIGSTOPped past its lease, then resumed (stale-map clients reading it)"
full "$cl" 2 180 && pass "the resumed server rejoined and was re-replicated" ||
  fail "zombie re-replicated" "$(cat "$logs/status.now")"

fi

if want coord; then
# 3. the coordinator (also a primary) killed; 4. etcd stopped during a failover.
lin "$cl" coord 23 &
lpid=$!
running coord
k=$(coordinator 0 1 2)
kill -9 "${spid[$k]}"
wait_status "$cl" "server [0-9]+ [^ ]+:$(port "$k") down slots 0 " 40 &&
  pass "the coordinator (server $k) killed: another was elected and failed its slots over" ||
  fail "coordinator killed" "$(cat "$logs/status.now")"
start_server "$k" "$cl" || fail "server $k back"
full "$cl" 2 180 || fail "re-replication after the coordinator's death" "$(cat "$logs/status.now")"
v=$(( (k + 1) % 3 ))
kill -9 "${spid[$v]}"
kill -STOP "$etcd_pid"
sleep 3
kill -CONT "$etcd_pid"
wait_status "$cl" "server [0-9]+ [^ ]+:$(port "$v") down slots 0 " 40 &&
  pass "etcd stopped 3 s during a failover: the failover completed after it" ||
  fail "failover with etcd stopped" "$(cat "$logs/status.now")"
sleep 3
touch "$logs/coord.stop"
wait $lpid; judge coord $? "the coordinator killed, then etcd stopped during a failover"
start_server "$v" "$cl" || fail "server $v back"

fi

if want remove; then
# 5. `cluster remove` of a live server (R=2) under lin_load: no data moves; its primaries fail
# over to their backups and it leaves every slot's backups (a DrainRecord under its lease); the
# command returns once it holds no replica; re-replication restores two live replicas per slot
# on the two others, never on it. Then it is stopped (its record goes with its lease).
full "$cl" 2 180 || fail "R=2 before the remove" "$(cat "$logs/status.now")"
lin "$cl" remove 25 &
lpid=$!
running remove
# The server to remove: not the coordinator, and the one of the others with the most roles
# (after the failovers above one server may hold every primary and another none).
c_i=$(coordinator 0 1 2)
ctl --server="$cl" cluster status > "$logs/status.now" 2>&1
rm_i=$(( (c_i + 1) % 3 )); best=-1
for i in 0 1 2; do
  [ "$i" = "$c_i" ] && continue
  roles=$(awk -v p=":$(port "$i")" '$1 == "server" && index($3, p) && $5 == "slots" {print $6 + $8}' "$logs/status.now")
  [ "${roles:-0}" -gt "$best" ] && { best=${roles:-0}; rm_i=$i; }
done
ctl --server="$cl" cluster remove "${addrs[$rm_i]}:$(port "$rm_i")" > "$logs/rm.out" 2>&1; rrc=$?
ctl --server="$cl" cluster status > "$logs/status.now" 2>&1
[ $rrc = 0 ] && grep -q "holds no replica" "$logs/rm.out" &&
  grep -qE "server [0-9]+ [^ ]+:$(port "$rm_i") live slots 0 backups 0" "$logs/status.now" &&
  grep -q "^draining: server" "$logs/status.now" &&
  pass "cluster remove of live server $rm_i (R=2): it holds no replica and shows draining: $(cat "$logs/rm.out")" ||
  fail "cluster remove (R=2)" "rc $rrc: $(cat "$logs/rm.out"); $(cat "$logs/status.now")"
full "$cl" 2 180 &&
  grep -qE "server [0-9]+ [^ ]+:$(port "$rm_i") live slots 0 backups 0" "$logs/status.now" &&
  pass "after the remove, two live replicas per slot on the other servers: $(grep replicas: "$logs/status.now")" ||
  fail "re-replication after the remove" "$(cat "$logs/status.now")"
# Bad input: a second remove of the same server answers at once (it holds nothing); a server
# that never joined is refused.
ctl --server="$cl" cluster remove "${addrs[$rm_i]}:$(port "$rm_i")" > "$logs/rm2.out" 2>&1 &&
  ! ctl --server="$cl" cluster remove "${addrs[0]}:1" > "$logs/rm3.out" 2>&1 &&
  grep -q "ever joined" "$logs/rm3.out" &&
  pass "removing it again succeeds at once; a server that never joined is refused" ||
  fail "remove again / unknown server" "$(cat "$logs/rm2.out" "$logs/rm3.out")"
kill "${spid[$rm_i]}"
sleep 3
touch "$logs/remove.stop"
wait $lpid; judge remove $? "cluster remove of a live server under load, then stopped"
start_server "$rm_i" "$cl" || fail "server $rm_i back after the remove"

fi

if want ringloss && rings_on; then
# 6a. with log rings: a backup that refused a ring record after its primary was told it was
# placed (repl_probe ring_loss: a REPLICATE forged at the primary's next number, then a PUT of
# "acked") may lack an acknowledged write. It marks the slot, reports it (NAME/ringloss/), the
# coordinator takes it out of the slot, re-replication gives the slot a fresh backup, and when
# the primary is then killed the key reads "acked", under a linearizable load throughout.
lin "$cl" ringloss 27 &
lpid=$!
running ringloss
d0=0; for i in 0 1 2; do d0=$((d0 + $(stat_of "$i" cluster_ring_loss_drops))); done
"$build/repl_probe" --cluster="$cl" --test_case=ring_loss > "$logs/ring_loss.out" 2>&1 ||
  fail "ring loss: set up (repl_probe ring_loss)" "$(cat "$logs/ring_loss.out")"
rl=$(grep -m1 "^repl_probe: ring_loss:" "$logs/ring_loss.out")
if [ -n "$rl" ]; then
rk=$(sed -n 's/.* K=\([^ ]*\).*/\1/p' <<<"$rl")
pi=$(( $(sed -n 's/.* P=[^ ]*:\([0-9]*\).*/\1/p' <<<"$rl") - 7700 ))
bi=$(( $(sed -n 's/.* B=[^ ]*:\([0-9]*\).*/\1/p' <<<"$rl") - 7700 ))
d=0; rp=0
for _ in $(seq 60); do
  d=0; for i in 0 1 2; do d=$((d + $(stat_of "$i" cluster_ring_loss_drops))); done
  rp=$(stat_of "$bi" repl_ring_loss_reports)
  [ "$d" -gt "$d0" ] && break
  sleep 1
done
[ "$d" -gt "$d0" ] && [ "${rp:-0}" -ge 1 ] &&
  pass "ring loss: backup $bi refused a ring record ($(stat_of "$bi" repl_ring_refused) refused), reported it ($rp report(s)) and the coordinator took it out of the slot (cluster_ring_loss_drops $d0 -> $d)" ||
  fail "ring loss: report and drop" "drops $d0 -> $d, reports ${rp:-?}, refused $(stat_of "$bi" repl_ring_refused): $rl"
full "$cl" 2 120 || fail "ring loss: re-replication after the drop" "$(cat "$logs/status.now")"
kill -9 "${spid[$pi]}"
wait_status "$cl" "server [0-9]+ [^ ]+:$(port "$pi") down slots 0 " 30 ||
  fail "ring loss: failover of the primary" "$(cat "$logs/status.now")"
rv=""
for _ in $(seq 30); do rv=$(ctl --server="$cl" get "$rk" 2>&1); [ "$rv" = acked ] && break; sleep 1; done
[ "$rv" = acked ] &&
  pass "ring loss: the primary killed, the acknowledged write reads back from the slot's new primary ($rk = $rv)" ||
  fail "ring loss: the acknowledged write after the failover" "$rk = $rv (wanted acked)"
fi  # else: no ring loss was set up (failed above); the load is still judged
sleep 3
touch "$logs/ringloss.stop"
wait $lpid; judge ringloss $? "a backup lacking a ring record taken out, its primary then killed"
if [ -n "$rl" ]; then
  start_server "$pi" "$cl" || fail "server $pi back after the ring loss case"
  full "$cl" 2 180 || fail "re-replication after the ring loss case" "$(cat "$logs/status.now")"
fi

fi

if want ringroom && rings_on; then
# 6b. with log rings: their capacity rule, end to end. Two 8 MiB servers (R=2) filled by
# repl_fill until writes fail: past 7/8 of its table a backup revokes every ring
# (repl_ring_headroom_revocations) and refuses new ones; every acknowledged value reads back.
# Then every key is deleted and small writes go on, one after the other, on the same
# connections: a link its backup refused a ring for now is closed once free 10 s later and
# the link made in its place asks again, so rings are granted again (repl_ring_grants rises
# after the fill) and writes go to them (repl_ring_writes rises).
clr=etcd://127.0.0.1:2379/repring
ctl --server="$clr" cluster init --slots=64 --replicas=2 > "$logs/initr.out" 2>&1 ||
  fail "cluster init (ring room)" "$(cat "$logs/initr.out")"
start_server 8 "$clr" 8M || fail "ring room: server 8 started"
start_server 9 "$clr" 8M || fail "ring room: server 9 started"
ctl --server="$clr" cluster rebalance > "$logs/rebalancer.out" 2>&1
full "$clr" 2 30 || fail "ring room: placement" "$(cat "$logs/status.now")"
rsum() { local t=0 v i; for i in 8 9; do v=$(stat_of "$i" "$1"); t=$((t + ${v:-0})); done; echo $t; }
"$build/repl_fill" --cluster="$clr" --pause_file="$logs/fillr.pause" --delete_every=1 \
  --then_write_ms=400000 --stop_file="$logs/fillr.stop" > "$logs/fillr.out" 2>&1 &
fpid=$!
for _ in $(seq 3000); do [ -e "$logs/fillr.pause" ] || ! kill -0 $fpid 2>/dev/null && break; sleep 0.2; done
g1=$(rsum repl_ring_grants); w1=$(rsum repl_ring_writes); hr=$(rsum repl_ring_headroom_revocations)
rm -f "$logs/fillr.pause"
# The rewrites go on until rings carry writes again (a refused link asks again after 10 s,
# doubling with each refusal in a row: well within the 400 s the rewrites last at most).
for _ in $(seq 200); do
  kill -0 $fpid 2>/dev/null || break
  g2=$(rsum repl_ring_grants); w2=$(rsum repl_ring_writes)
  [ "$g2" -gt "$g1" ] && [ "$w2" -gt $((w1 + 100)) ] && break
  sleep 2
done
touch "$logs/fillr.stop"
wait $fpid; frc=$?
g2=$(rsum repl_ring_grants); w2=$(rsum repl_ring_writes)
[ $frc = 0 ] && [ "$g1" -gt 0 ] && [ "$hr" -gt 0 ] &&
  pass "ring room: filled until writes failed, rings revoked for room ($hr revocation(s), $g1 grant(s) by then): $(grep "^repl_fill: [0-9]" "$logs/fillr.out")" ||
  fail "ring room: the fill" "rc $frc, grants $g1, headroom revocations $hr: $(tail -6 "$logs/fillr.out")"
[ "$g2" -gt "$g1" ] && [ "$w2" -gt "$w1" ] &&
  pass "ring room: with room again rings are granted again (grants $g1 -> $g2, ring writes $w1 -> $w2)" ||
  fail "ring room: rings after the deletes" "grants $g1 -> $g2, ring writes $w1 -> $w2"
for i in 8 9; do kill "${spid[$i]}" 2>/dev/null; done

fi

if want r3; then
# 6. R=3: two of three servers killed one after the other, the second as soon as the first was
# failed over (no re-replication between: a failover keeps the live backups). Before the load,
# repl_probe --test_case=diverge leaves two slots of server 3 as a primary dying mid-write
# does: key A's last write ("diverged") only on replica 2 (Y), key B's only on replica 1 (X,
# the one promoted). X must resync Y before it serves: A reads "v1" and B "diverged" at X,
# and still so at Y once X is killed too (without the resync Y would answer the other way).
# As after a real mid-write death, the primary writes nothing more to those two slots (the
# load's keys avoid them): a write of the live primary's at the number the probe used would be
# refused by the replica holding the forged one (a token holder's forgery, not a failure; with
# log rings that replica is then marked as lacking a write and never promoted).
cl3=etcd://127.0.0.1:2379/rep3
ctl --server="$cl3" cluster init --slots=64 --replicas=3 > "$logs/init3.out" 2>&1 ||
  fail "cluster init --replicas=3" "$(cat "$logs/init3.out")"
for i in 3 4 5; do start_server "$i" "$cl3" || fail "R=3 server $i started" "$(tail -3 "$logs/server$i.log")"; done
ctl --server="$cl3" cluster rebalance > "$logs/rebalance3.out" 2>&1
full "$cl3" 3 30 || fail "R=3 placement" "$(cat "$logs/rebalance3.out" "$logs/status.now")"
"$build/repl_probe" --cluster="$cl3" --test_case=diverge --primary="${addrs[0]}:$(port 3)" \
  > "$logs/diverge.out" 2>&1 || fail "R=3: replicas made to differ (repl_probe diverge)" "$(cat "$logs/diverge.out")"
dv=$(grep -m1 "^repl_probe: diverge:" "$logs/diverge.out")
ka=$(sed -n 's/.* A=\([^ ]*\).*/\1/p' <<<"$dv"); kb=$(sed -n 's/.* B=\([^ ]*\).*/\1/p' <<<"$dv")
xi=$(( $(sed -n 's/.* X=[^ ]*:\([0-9]*\).*/\1/p' <<<"$dv") - 7700 ))
lin "$cl3" r3 24 --avoid_slots_of="$ka,$kb" &
lpid=$!
running r3
kill -9 "${spid[3]}"
# The failover keeps every live backup: 2 live replicas per slot as soon as it is committed.
if wait_status "$cl3" "server [0-9]+ [^ ]+:$(port 3) down slots 0 backups 0" 30 &&
   full "$cl3" 2 30; then
  pass "R=3: a primary killed: failed over, every slot keeps 2 live replicas (its backups kept)"
else
  fail "R=3: first failover" "$(cat "$logs/status.now")"
fi
values() { echo "A=$(ctl --server="$cl3" get "$ka" 2>&1) B=$(ctl --server="$cl3" get "$kb" 2>&1)"; }
v1=""
for _ in $(seq 30); do v1=$(values); [ "$v1" = "A=v1 B=diverged" ] && break; sleep 1; done
rs=$(stat_of "$xi" repl_resync_writes)
kill -9 "${spid[$xi]}"
wait_status "$cl3" "at least 1 live per slot" 40 || fail "R=3: second failover" "$(cat "$logs/status.now")"
v2=""
for _ in $(seq 30); do v2=$(values); [ "$v2" = "A=v1 B=diverged" ] && break; sleep 1; done
if [ "$v1" = "A=v1 B=diverged" ] && [ "$v2" = "A=v1 B=diverged" ] && [ "${rs:-0}" -ge 2 ]; then
  pass "R=3: the promoted server (server $xi) resynced the backup it kept before serving; killed too, that backup answers the same ($v2; keys it wrote to resync: $rs)"
else
  fail "R=3: resync of the kept backup" "after the first failover: $v1; after the second: $v2; keys written to resync: ${rs:-?}"
fi
sleep 3
touch "$logs/r3.stop"
wait $lpid; judge r3 $? "R=3, two of three servers killed one after the other, the second at once"

fi

if want full; then
# 7. a full replica: two servers of different sizes (R=2), filled with 30 KB values until
# writes fail. A write no replica could take fails TABLE_FULL at once (a full backup's refusal),
# one the backups took but the small primary could not is TIMEOUT (kept), and neither blocks
# its slot: DELETEs of those keys and of some others succeed, then small PUTs, and every
# acknowledged value reads back (repl_fill). While the cluster is full (the small primary
# keeping writes its backups hold and its table has no room for), a third server joins and a
# rebalance copies slots to it and hands primaries over: each such kept write is first
# replaced on the backups by the primary's value of its key (Replicator::Settle's revert), so
# the rebalance completes where it used to fail on those slots.
clf=etcd://127.0.0.1:2379/repfull
ctl --server="$clf" cluster init --slots=64 --replicas=2 > "$logs/initf.out" 2>&1 ||
  fail "cluster init (full replica)" "$(cat "$logs/initf.out")"
start_server 6 "$clf" 8M || fail "server 6 (8M) started"
start_server 7 "$clf" 24M || fail "server 7 (24M) started"
ctl --server="$clf" cluster rebalance > "$logs/rebalancef.out" 2>&1
full "$clf" 2 30 || fail "full-replica cluster placement" "$(cat "$logs/status.now")"
"$build/repl_fill" --cluster="$clf" --pause_file="$logs/fill.pause" > "$logs/fill.out" 2>&1 &
fpid=$!
for _ in $(seq 3000); do [ -e "$logs/fill.pause" ] || ! kill -0 $fpid 2>/dev/null && break; sleep 0.2; done
kept0="$(stat_of 6 repl_kept)/$(stat_of 7 repl_kept)"
start_server 24 "$clf" 24M || fail "full replica: server 24 started"
ctl --server="$clf" cluster rebalance > "$logs/rebalancef2.out" 2>&1; frc=$?
if [ $frc = 0 ] && full "$clf" 2 30 && [ "$(stat_of 6 repl_reverts)" -gt 0 ]; then
  pass "a rebalance of the full cluster onto a third server (kept writes before $kept0, after $(stat_of 6 repl_kept)/$(stat_of 7 repl_kept); reverts $(stat_of 6 repl_reverts)/$(stat_of 7 repl_reverts)): $(cat "$logs/rebalancef2.out")"
else
  fail "a rebalance of the full cluster" "rc $frc, kept before $kept0, reverts $(stat_of 6 repl_reverts)/$(stat_of 7 repl_reverts): $(cat "$logs/rebalancef2.out")"
fi
rm -f "$logs/fill.pause"
wait $fpid &&
  pass "a full replica: $(grep "^repl_fill: [0-9]" "$logs/fill.out"); kept now $(stat_of 6 repl_kept)/$(stat_of 7 repl_kept)/$(stat_of 24 repl_kept)" ||
  fail "a full replica" "$(tail -6 "$logs/fill.out")"
for i in 6 7 24; do kill "${spid[$i]}" 2>/dev/null; done

fi

if want balance; then
# 8. `cluster rebalance` of a replicated cluster under lin_load: a fourth server joins a
# balanced R=2 cluster of three; the rebalance gives it an even share of the replicas (backup
# places replaced: copied to it first) and of the primaries (handed over by their primaries to
# it once it is their backup: no copy). Every server ends with 4 primaries and 4 backups of
# the 16 slots (few slots, here and in the restart and disk sections: every batch of a
# rebalance or re-replication is one migration, one after the other, seconds each under TCG),
# each slot keeps two live replicas, nothing acknowledged is lost and the history is
# linearizable (stale-map clients included). A second rebalance has nothing to do.
for i in 3 4 5 6 7; do [ -n "${spid[$i]:-}" ] && kill "${spid[$i]}" 2>/dev/null; done  # memory
# balance_onto_fourth CLUSTER R NAME SEED I: cluster init --replicas=R ($bs slots), servers I..I+2
# placed by a rebalance, lin_load NAME (its pid in lpid) running, then server I+3 joins and a
# rebalance must end with q = bs / 4 primaries and q x (R-1) backups on each of the four.
bs=16 q=$((bs / 4))
balance_onto_fourth() {
  local c=$1 r=$2 n=$3 i
  ctl --server="$c" cluster init --slots=$bs --replicas="$r" > "$logs/init-$n.out" 2>&1 ||
    fail "cluster init ($n)" "$(cat "$logs/init-$n.out")"
  for i in $5 $(($5 + 1)) $(($5 + 2)); do start_server "$i" "$c" 16M || fail "$n: server $i started"; done
  ctl --server="$c" cluster rebalance > "$logs/rebalance0-$n.out" 2>&1
  full "$c" "$r" 30 || fail "$n: placement of three" "$(cat "$logs/rebalance0-$n.out" "$logs/status.now")"
  lin "$c" "$n" "$4" &
  lpid=$!
  running "$n"
  i=$(($5 + 3))
  start_server "$i" "$c" 16M || fail "$n: server $i started"
  wait_status "$c" "server [0-9]+ [^ ]+:$(port "$i") live" 30 || fail "$n: server $i registered" "$(cat "$logs/status.now")"
  ctl --server="$c" cluster rebalance > "$logs/rebalance-$n.out" 2>&1; local brc=$?
  ctl --server="$c" cluster status > "$logs/status.now" 2>&1
  local even
  even=$(grep -cE "^server [0-9]+ [^ ]+ live slots $q backups $((q * (r - 1)))" "$logs/status.now")
  [ $brc = 0 ] && [ "$even" = 4 ] && full "$c" "$r" 10 &&
    pass "rebalance (R=$r) onto a fourth server under load: $q primaries and $((q * (r - 1))) backups each: $(cat "$logs/rebalance-$n.out")" ||
    fail "rebalance of replicated slots (R=$r)" "rc $brc: $(cat "$logs/rebalance-$n.out"); $(cat "$logs/status.now")"
}
clb=etcd://127.0.0.1:2379/repbal
balance_onto_fourth "$clb" 2 balance 26 8
ctl --server="$clb" cluster rebalance > "$logs/rebalanceb2.out" 2>&1 &&
  grep -q " 0 backup(s) moved, 0 primary role(s) handed over" "$logs/rebalanceb2.out" &&
  pass "a second rebalance has nothing to do: $(cat "$logs/rebalanceb2.out")" ||
  fail "second rebalance" "$(cat "$logs/rebalanceb2.out")"
sleep 2
touch "$logs/balance.stop"
wait $lpid; judge balance $? "rebalance of replicated slots onto a new server"
e11=$(stat_of 11 entries)
[ "${e11:-0}" -gt 0 ] && pass "the new server holds entries ($e11) of the slots it took" ||
  fail "the new server holds no entry" "${e11:-?}"
# The old servers freed the entries of the backup places they gave up (server/cluster/
# slot_reclaimer.h): every server holds about half its former share.
rk=0; ent=""; for i in 8 9 10; do rk=$((rk + $(stat_of "$i" cluster_reclaimed_keys))); ent+="$(stat_of "$i" entries) "; done
[ "$rk" -gt 0 ] && pass "the servers that gave up backup places freed $rk entries (entries now: $ent$e11)" ||
  fail "no entry reclaimed after the rebalance" "$rk; entries $ent$e11"
# A fifth server killed -9 while a rebalance gives it replicas and primaries (copies to it,
# hand-overs to it): the rebalance ends (done, or an error naming the dead side), the slots it
# had taken fail over, every slot gets two live replicas again, nothing acknowledged is lost.
# rebalance_copying NAME SEED I: lin_load NAME (lpid) running on $clb, server I joined, then
# `cluster rebalance` in the background (bpid; its output in $logs/rebalance-NAME.out) until a
# copy to server I began (its first MIGRATE_BEGIN), or 60 s passed.
rebalance_copying() {
  lin "$clb" "$1" "$2" &
  lpid=$!
  running "$1"
  start_server "$3" "$clb" 16M || fail "balance: server $3 started"
  wait_status "$clb" "server [0-9]+ [^ ]+:$(port "$3") live" 30 || fail "balance: server $3 registered" "$(cat "$logs/status.now")"
  ctl --server="$clb" cluster rebalance > "$logs/rebalance-$1.out" 2>&1 &
  bpid=$!
  for _ in $(seq 300); do [ "$(stat_of "$3" migrations_in)" -gt 0 ] 2>/dev/null && break; sleep 0.2; done
}
rebalance_copying balancekill 27 12
echo "# server 12 killed after $(stat_of 12 migrations_in) MIGRATE_BEGIN(s)"
kill -9 "${spid[12]}"
wait $bpid; krc=$?
full "$clb" 2 120 &&
  pass "a server killed during a rebalance onto it (rebalance rc $krc: $(head -c 300 "$logs/rebalance-balancekill.out")): two live replicas per slot again" ||
  fail "a server killed during a rebalance" "rc $krc: $(cat "$logs/rebalance-balancekill.out"); $(cat "$logs/status.now")"
sleep 2
touch "$logs/balancekill.stop"
wait $lpid; judge balancekill $? "a server killed -9 during a rebalance onto it"
# The coordinator (also a primary) killed -9 while a rebalance onto a new server runs: another
# is elected and carries the pending request (to its end, or to the failed batch's error); the
# dead server's slots fail over and get two live replicas again; an import the dead
# coordinator's batch left on the new server is given back or taken over by a new batch (no
# slot stays IMPORTING: server/cluster/import_sweeper.h); a last rebalance gives the four live
# servers even shares.
rebalance_copying balancecoord 29 17
kc=$(coordinator 8 9 10 11)
echo "# at ${SECONDS} s: coordinator server ${kc:-?} killed after $(stat_of 17 migrations_in) MIGRATE_BEGIN(s) on server 17"
[ -n "$kc" ] && kill -9 "${spid[$kc]}"
wait $bpid; crc=$?
echo "# the rebalance returned at ${SECONDS} s (rc $crc)"
full "$clb" 2 180 &&
  pass "the coordinator (server ${kc:-?}) killed during a rebalance (rc $crc: $(head -c 300 "$logs/rebalance-balancecoord.out")): another carried the request; two live replicas per slot again" ||
  fail "the coordinator killed during a rebalance" "rc $crc: $(cat "$logs/rebalance-balancecoord.out"); $(cat "$logs/status.now")"
ctl --server="$clb" cluster rebalance > "$logs/rebalancec2.out" 2>&1; crc=$?
ctl --server="$clb" cluster status > "$logs/status.now" 2>&1
even=$(grep -cE "^server [0-9]+ [^ ]+ live slots $q backups $q" "$logs/status.now")
[ $crc = 0 ] && [ "$even" = 4 ] &&
  pass "then a rebalance gives the four live servers $q primaries and $q backups each: $(cat "$logs/rebalancec2.out")" ||
  fail "rebalance after the coordinator's death" "rc $crc: $(cat "$logs/rebalancec2.out"); $(cat "$logs/status.now")"
live=(); for i in 8 9 10 11 17; do [ "$i" != "$kc" ] && live+=("$i"); done
for _ in $(seq 100); do
  imp=0; for i in "${live[@]}"; do imp=$((imp + $(stat_of "$i" cluster_slots_importing))); done
  [ "$imp" = 0 ] && break; sleep 0.3
done
ab=0; for i in "${live[@]}"; do ab=$((ab + $(stat_of "$i" cluster_abandoned_imports))); done
[ "$imp" = 0 ] && pass "no slot left IMPORTING after the coordinator's death ($ab abandoned import(s) given back)" ||
  fail "slots left IMPORTING after the coordinator's death" "$imp"
sleep 2
touch "$logs/balancecoord.stop"
wait $lpid; judge balancecoord $? "the coordinator killed -9 during a rebalance"
for i in 8 9 10 11 17; do kill "${spid[$i]}" 2>/dev/null; done
# R=3: the same onto a fourth server (12 replicas and 4 primaries each). A backup that stays a
# backup under a handed-over primary takes the new primary's numbering (slots no one wrote
# since the new server joined included).
balance_onto_fourth etcd://127.0.0.1:2379/repbal3 3 balance3 28 13
sleep 3  # writes to every slot under the new roles
touch "$logs/balance3.stop"
wait $lpid; judge balance3 $? "rebalance (R=3) onto a new server"
r=0; for i in 13 14 15 16; do r=$((r + $(stat_of "$i" repl_refused_sequence))); done
[ "$r" = 0 ] && pass "no REPLICATE refused for its sequence after the hand-overs" ||
  fail "REPLICATEs refused for their sequence after the hand-overs" "$r"

fi

if want restart; then
# 9. The whole cluster killed -9 at once under lin_load and restarted from its data directories
# (--data_dir on a tmpfs, --fsync=no: a process crash loses nothing the kernel holds): each
# server replays its log and takes its roles back (no other replica is live when it starts) or
# waits for them to fail over (one is); every slot ends with two live replicas, nothing
# acknowledged is lost, the history is linearizable. Then a primary is killed -9 again: its
# backups' copies, kept across the restart, take over.
for i in 8 9 10 11 12 13 14 15 16 17; do [ -n "${spid[$i]:-}" ] && kill "${spid[$i]}" 2>/dev/null; done
clr=etcd://127.0.0.1:2379/represtart
ctl --server="$clr" cluster init --slots=16 --replicas=2 > "$logs/init-restart.out" 2>&1 ||
  fail "cluster init (restart)" "$(cat "$logs/init-restart.out")"
rdata=$(mktemp -d /dev/shm/rkv-repl-data.XXXXXX)
durable() { start_server "$1" "$clr" 16M --data_dir="$rdata/s$1" --fsync=no; }
for i in 18 19 20; do durable "$i" || fail "restart: server $i started" "$(tail -3 "$logs/server$i.log")"; done
ctl --server="$clr" cluster rebalance > "$logs/rebalance-restart.out" 2>&1
full "$clr" 2 30 || fail "restart: placement" "$(cat "$logs/rebalance-restart.out" "$logs/status.now")"
lin "$clr" restart 31 &
lpid=$!
running restart
kill -9 "${spid[18]}" "${spid[19]}" "${spid[20]}"
for i in 18 19 20; do wait "${spid[$i]}" 2>/dev/null; done
ok=1
for i in 18 19 20; do durable "$i" || { ok=0; fail "restart: server $i back" "$(tail -3 "$logs/server$i.log")"; }; done
[ $ok = 1 ] && full "$clr" 2 180 &&
  pass "the whole cluster killed -9 and restarted from its logs: two live replicas per slot ($(grep replicas: "$logs/status.now"))" ||
  fail "full-cluster restart" "$(cat "$logs/status.now")"
sleep 3
k=$(coordinator 18 19 20); v=18; [ "$k" = 18 ] && v=19
kill -9 "${spid[$v]}"
wait_status "$clr" "server [0-9]+ [^ ]+:$(port "$v") down slots 0 " 40 &&
  pass "after the restart, server $v killed -9: its slots failed over to their backups" ||
  fail "failover after the full restart" "$(cat "$logs/status.now")"
sleep 3
touch "$logs/restart.stop"
wait $lpid; judge restart $? "the whole cluster killed -9 and restarted (--fsync=no), then a primary killed"
for i in 18 19 20; do kill "${spid[$i]}" 2>/dev/null; done
rm -rf "$rdata"

fi

if want disk; then
# 10. A full disk on a durable server of an R=2 cluster under lin_load: server 23's data
# directory is a 16 MiB tmpfs, filled up while the load runs. Its log appends fail (IO_ERROR, No
# space left): a write its backup applied but its own log refused is of unknown outcome (kept,
# resent), never acknowledged; and it steps down (server/cluster/disk_step_down.h: its own
# NAME/draining/ record), so the coordinator fails its primaries over to their backups and
# drops it as a backup: the writes go on with the others. It stays up and readable. Space
# freed again: its probe passes (--cluster_disk_hold_ms=3000), it deletes the record, and a
# rebalance gives it replicas again. Nothing acknowledged is lost and the history is
# linearizable.
cld=etcd://127.0.0.1:2379/repdisk
ctl --server="$cld" cluster init --slots=16 --replicas=2 > "$logs/init-disk.out" 2>&1 ||
  fail "cluster init (disk)" "$(cat "$logs/init-disk.out")"
ddata=$(mktemp -d /dev/shm/rkv-repl-disk.XXXXXX)
small=$(mktemp -d "$logs/small.XXXXXX")
if mount -t tmpfs -o size=16M,mode=0700 tmpfs "$small" 2>> "$logs/mount.err"; then
  for i in 21 22; do start_server "$i" "$cld" 16M --data_dir="$ddata/s$i" --fsync=no || fail "disk: server $i started"; done
  start_server 23 "$cld" 16M --data_dir="$small/s23" --fsync=no --cluster_disk_hold_ms=3000 ||
    fail "disk: server 23 started"
  ctl --server="$cld" cluster rebalance > "$logs/rebalance-disk.out" 2>&1
  full "$cld" 2 30 || fail "disk: placement" "$(cat "$logs/rebalance-disk.out" "$logs/status.now")"
  lin "$cld" disk 33 &
  lpid=$!
  running disk
  dd if=/dev/zero of="$small/filler" bs=64k > /dev/null 2>&1  # until ENOSPC
  echo "# server 23's file system full: $(df -k "$small" | tail -1)"
  for _ in $(seq 30); do grep -q "No space left" "$logs/server23.log" && break; sleep 0.5; done
  grep -q "No space left" "$logs/server23.log" && kill -0 "${spid[23]}" 2>/dev/null &&
    [ -n "$(stat_of 23 entries)" ] &&
    pass "server 23's disk full: its log appends fail (No space left), it stays up and answers" ||
    fail "server 23 with a full disk" "$(grep -m3 -i "space\|error" "$logs/server23.log")"
  if wait_status "$cld" "server [0-9]+ [^ ]+:$(port 23) live slots 0 backups 0" 60 &&
     full "$cld" 2 120 && [ "$(stat_of 23 cluster_disk_down)" = 1 ]; then
    pass "server 23 stepped down (step-downs $(stat_of 23 cluster_disk_step_downs)): its primaries failed over, two live replicas per slot on the others"
  else
    fail "server 23 stepping down" "$(cat "$logs/status.now") down $(stat_of 23 cluster_disk_down)"
  fi
  rm -f "$small/filler"
  back=0
  for _ in $(seq 120); do [ "$(stat_of 23 cluster_disk_down)" = 0 ] && { back=1; break; }; sleep 0.5; done
  ctl --server="$cld" cluster rebalance > "$logs/rebalance-disk2.out" 2>&1
  if [ $back = 1 ] && full "$cld" 2 180 &&
     wait_status "$cld" "server [0-9]+ [^ ]+:$(port 23) live slots [1-9][0-9]* backups [1-9]" 60; then
    pass "space freed: its probe passed, and a rebalance gave it replicas again ($(grep -E "^server [0-9]+ [^ ]+:$(port 23) " "$logs/status.now"))"
  else
    fail "server 23 after the disk was freed" "back $back: $(cat "$logs/rebalance-disk2.out" "$logs/status.now")"
  fi
  sleep 3
  touch "$logs/disk.stop"
  wait $lpid; judge disk $? "a full disk on a durable server (R=2)"
  for i in 21 22 23; do kill "${spid[$i]}" 2>/dev/null; done
  for i in 21 22 23; do wait "${spid[$i]}" 2>/dev/null; done
  umount "$small"
else
  fail "disk: cannot mount a tmpfs (root needed: the sandbox VM)" "$(cat "$logs/mount.err")"
fi
rm -rf "$ddata"

fi

for i in 0 1 2; do  # one stats call per server (a kvctl costs a second or two on TCG)
  echo "# server $i: $("$build/kvctl" --server="${addrs[$((i % 3))]}:$(port "$i")" stats 2>/dev/null |
    awk '$1 ~ /^(repl_writes|repl_retries|repl_failures|cluster_promotions)$/ {printf "%s %s ", $1, $2}')"
done
# Sanitizer reports and failed CHECKs (glog's "Check failed") in any server's log.
cleanup
trap - EXIT
bad=$(grep -l -E "WARNING: ThreadSanitizer|ERROR: AddressSanitizer|runtime error:|Check failed" "$logs"/server*.log 2>/dev/null)
[ -z "$bad" ] && pass "no sanitizer report or failed CHECK in the servers' logs" ||
  fail "reports in ${bad//$'\n'/ }" "$(grep -h -m3 -E "ThreadSanitizer|AddressSanitizer|runtime error:|Check failed" $bad | head -5)"
exit $rc
