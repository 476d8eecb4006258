#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# Dead peer: a client whose host loses its link (no DREQ, nothing at all) must be released by
# kvserver within --peer_timeout plus a margin, again and again, so that the server never runs
# out of connection slots. Runs in the two-host sandbox: kvserver in VM A, clients in VM B,
# B's link cut from outside B (tools/sandbox-peer link off).
#   tests/integration/deadpeer.sh BUILD_DIR
# Prints "[case PASS|FAIL] deadpeer: <case>" lines and the reap times; exit 1 on any failure.
set -uo pipefail
build=$(cd "${1:?usage: deadpeer.sh BUILD_DIR}" && pwd) || exit 2
src=$(cd "$(dirname "$0")/../.." && pwd)
if [ -z "${RKV_IN_SANDBOX:-}" ]; then
  export RKV_IN_SANDBOX=1 RKV_SANDBOX_HOSTS=2
  exec "$src/tools/rdma-sandbox" --timeout 1500 -- "$0" "$build"
fi
cd "$src"
addr=${RKV_SANDBOX_ADDR:?not in the two-host sandbox}
peer=${RKV_SANDBOX_PEER_ADDR:?not in the two-host sandbox}
logs=$(mktemp -d /tmp/rkv-deadpeer.XXXXXX)
peer_timeout=${DEADPEER_TIMEOUT:-3}
margin=${DEADPEER_MARGIN:-12}      # generous: the emulated stack under TCG is slow
max_conn=${DEADPEER_MAX_CONN:-2}
rounds=$((max_conn + 4))  # more cut clients than the cap: each must be released
port=7490
"$build/kvserver" --listen="$addr:$port" --memory=16M --max_connections=$max_conn \
  --peer_timeout=$peer_timeout > "$logs/kvserver.log" 2>&1 &
server=$!
trap 'kill $server 2>/dev/null; tools/sandbox-peer kill >/dev/null 2>&1' EXIT
ctl() { "$build/kvctl" --server="$addr:$port" "$@"; }
stat() { ctl stats 2>/dev/null | awk -v k="$1" '$1==k{print $2}'; }
for i in $(seq 50); do ctl stats >/dev/null 2>&1 && break; sleep 0.2; done
rc=0
pass() { echo "[case PASS] deadpeer: $1"; }
fail() { echo "[case FAIL] deadpeer: $1 ${2:-}"; rc=1; }
now() { date +%s.%N; }

# kvctl stats itself holds a connection while it runs: "established" and "active" below leave
# the asking kvctl out. The previous kvctl's connection still counts while the server tears it
# down (300 ms on rxe), so polls are 0.5 s apart; and a kvctl refused because of it (at
# --max_connections) reads as "not yet", never as 0.
count() { local v; v=$(stat "$1"); [ -n "$v" ] && echo $((v - 1)) || echo "$2"; }  # NAME IF-REFUSED
established() { count connections_established -1; }
active() { count connections_active 999; }
times=()
ok_rounds=0
for r in $(seq "$rounds"); do
  job=$(tools/sandbox-peer spawn "$build/raw_client" hold --server="$addr:$port" --seconds=900 --get_every_ms=0)
  up=0
  for i in $(seq 60); do [ "$(established)" -ge 1 ] && { up=1; break; }; sleep 0.5; done
  if [ $up != 1 ]; then
    fail "round $r: client in host B connected" "(connections_established stayed $(established))"
    tools/sandbox-peer log "$job" | tail -3
    break
  fi
  tools/sandbox-peer link off >/dev/null
  t0=$(now)
  reaped=0
  limit=$((peer_timeout + margin))
  while :; do
    [ "$(active)" -eq 0 ] && { reaped=1; break; }
    [ "$(echo "$(now) - $t0 > $limit" | bc)" = 1 ] && break
    sleep 0.5
  done
  t=$(printf '%.1f' "$(echo "$(now) - $t0" | bc)")
  tools/sandbox-peer kill "$job" >/dev/null 2>&1
  if ! tools/sandbox-peer link on >/dev/null; then
    fail "round $r: B's link plugged back in" "(tools/sandbox-peer link on failed)"
    break
  fi
  # Before the next round B reaches A again (its neighbour entry for A went stale while the link
  # was out; the next client's address resolution gives up after 5 s): up to 60 s.
  for _ in $(seq 30); do
    tools/sandbox-peer run sh -c "ping -c 1 -W 2 $addr || busybox ping -c 1 -W 2 $addr" >/dev/null 2>&1 && break
    sleep 1
  done
  if [ $reaped != 1 ]; then
    fail "round $r: cut client released within --peer_timeout=$peer_timeout s + ${margin} s" "(still active after $t s)"
    break
  fi
  times+=("$t")
  ok_rounds=$r
done
[ $ok_rounds = "$rounds" ] && pass "$rounds link cuts with --max_connections=$max_conn, each client released (reap times s: ${times[*]})"
# The server still takes clients, from both hosts.
if tools/sandbox-peer run "$build/kvctl" --server="$addr:$port" put deadpeer-after from-b >/dev/null &&
   [ "$(ctl get deadpeer-after)" = from-b ]; then
  pass "a new client connects after $rounds cut clients"
else
  fail "a new client connects after $rounds cut clients"
fi
# Each cut client was closed as a dead peer (keepalive retries exhausted or silence past
# --peer_timeout), once each (the other clients, kvctl's, leave normally), and no QP leaked.
st=$(ctl stats 2>&1)
sv() { awk -v k="$1" '$1==k{print $2}' <<< "$st"; }
echo "deadpeer counters: peers_dead $(sv peers_dead), keepalives_sent $(sv keepalives_sent), connections_total $(sv connections_total), qps_leaked $(sv qps_leaked)"
if [ "$(sv peers_dead)" = "$ok_rounds" ] && [ "$ok_rounds" = "$rounds" ]; then
  pass "peers_dead $ok_rounds: each of the $rounds cut clients closed as a dead peer"
else
  fail "peers_dead $(sv peers_dead)" "(want $rounds, one per cut client; $ok_rounds rounds completed)"
fi
[ "$(sv qps_leaked)" = 0 ] && pass "qps_leaked 0 after $rounds dead peers" ||
  fail "qps_leaked ${st:+$(sv qps_leaked)}" "(want 0: a dead peer's QP did not drain; kvctl stats: $(tail -1 <<< "$st"))"
kill -0 $server 2>/dev/null && pass "kvserver alive after $rounds dead peers" || fail "kvserver alive"
[ $rc = 0 ] || { echo "--- kvserver.log (tail)"; tail -20 "$logs/kvserver.log"; }
exit $rc
