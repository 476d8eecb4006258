#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# Checks tools/rdma-sandbox itself in VM mode. One line per case, exit 1 if any failed:
#   tests/integration/sandbox.sh [REPO]     (from the repo root, or given the repo's path)
# kvm-fallback: RKV_SANDBOX_TEST_KVM=fail makes the KVM probe fail: one line on stderr says so,
#   the run falls back to TCG, rxe0 is there and COMMAND's exit code (3) comes back.
# tcg: RKV_SANDBOX_ACCEL=tcg boots without a probe (no KVM line), on TCG, with rxe0.
# two-host *: RKV_SANDBOX_HOSTS=2; in VM A: the environment and tools/sandbox-peer run (B is
#   another VM with its own rxe0; exit codes come back), rping from B to A (sandbox-peer run) and
#   from A to B (server started with sandbox-peer spawn, then wait), sandbox-peer kill, B's cable
#   pulled with sandbox-peer link off (no ping either way; the control channel still works) and
#   plugged back (ping and rping work again).
# four-host *: RKV_SANDBOX_HOSTS=4 (every VM's cable in one hub: tools/sandbox-hub); in VM A:
#   RKV_SANDBOX_ADDRS names four addresses; B, C and D (sandbox-peer --host=) each have their
#   own boot and address; rping from C to D (peer to peer through the hub); C's cable pulled (A
#   cannot ping C, still pings D; D cannot ping C) and plugged back (A pings C again); an
#   unknown --host is refused.
# About 3 minutes under TCG.
set -uo pipefail

if [ "${1:-}" = --inside-a4 ]; then  # run by the four-host case, in VM A
  repo=$2
  peer="$repo/tools/sandbox-peer"
  fails=0
  ok() { echo "[case PASS] sandbox four-host: $1"; }
  bad() { echo "[case FAIL] sandbox four-host: $1 ($2)"; fails=$((fails + 1)); }
  ping1=(busybox ping -c 1 -W 2)
  command -v ping >/dev/null && ping1=(ping -c 1 -W 2)
  read -r -a ad <<<"${RKV_SANDBOX_ADDRS:-}"
  [ "${#ad[@]}" = 4 ] && [ "${ad[0]}" = "$RKV_SANDBOX_ADDR" ] && ok "addresses" ||
    bad "addresses" "RKV_SANDBOX_ADDRS='${RKV_SANDBOX_ADDRS:-}'"
  seen=" $(cat /proc/sys/kernel/random/boot_id)"
  good=1 why=""
  for h in b c d; do
    x=$("$peer" --host=$h run sh -c 'echo "$RKV_SANDBOX_HOST $RKV_SANDBOX_ADDR $(cat /proc/sys/kernel/random/boot_id)"')
    read -r hn hadr hboot <<<"$x"
    case "$seen" in *" $hboot"*) good=0 ;; esac
    seen="$seen $hboot"
    [ "$hn" = "$h" ] && [ -n "$hboot" ] && case " ${ad[*]} " in *" $hadr "*) true ;; *) false ;; esac || good=0
    why="$why [$x]"
  done
  [ $good = 1 ] && ok "three peers, each its own VM" || bad "three peers, each its own VM" "$why"
  c=${ad[2]} d=${ad[3]}
  id=$("$peer" --host=d spawn --timeout 120 rping -s -a "$d" -C 3 -v)
  n=0
  for i in $(seq 10); do
    sleep 1
    out=$("$peer" --host=c run --timeout 60 rping -c -a "$d" -C 3 -v 2>&1) && { n=$(grep -c 'ping data' <<<"$out"); break; }
  done
  "$peer" --host=d wait --timeout 60 "$id" > /dev/null 2>&1; src=$?
  [ "$n" = 3 ] && [ $src = 0 ] && ok "rping C to D" || bad "rping C to D" "$n of 3 pings, server exit $src"
  "$peer" --host=c link off; lrc=$?
  "${ping1[@]}" "$c" > /dev/null 2>&1; p1=$?
  "${ping1[@]}" "$d" > /dev/null 2>&1; p2=$?
  "$peer" --host=d run "${ping1[@]}" "$c" > /dev/null 2>&1; p3=$?
  [ $lrc = 0 ] && [ $p1 != 0 ] && [ $p2 = 0 ] && [ $p3 != 0 ] && [ "$("$peer" --host=c link status)" = off ] &&
    [ "$("$peer" --host=d link status)" = on ] && ok "C's link off" ||
    bad "C's link off" "link off exit $lrc, ping A->C $p1 (want failure), A->D $p2 (want 0), D->C $p3 (want failure)"
  "$peer" --host=c link on; lrc=$?
  for i in $(seq 5); do "${ping1[@]}" "$c" > /dev/null 2>&1; p1=$?; [ $p1 = 0 ] && break; sleep 1; done
  [ $lrc = 0 ] && [ $p1 = 0 ] && ok "C's link on" || bad "C's link on" "link on exit $lrc, ping A->C $p1"
  "$peer" --host=e run true > /dev/null 2>&1; erc=$?
  [ $erc = 125 ] && ok "unknown host refused" || bad "unknown host refused" "exit $erc (want 125)"
  exit $fails
fi

if [ "${1:-}" = --inside-a ]; then  # run by the two-host case, in VM A
  repo=$2
  peer="$repo/tools/sandbox-peer"
  logs=$(mktemp -d /tmp/rkv-sandbox-test-a.XXXXXX)
  fails=0
  ok() { echo "[case PASS] sandbox two-host: $1"; }
  bad() {
    echo "[case FAIL] sandbox two-host: $1 ($2)"; fails=$((fails + 1))
    for f in "$logs"/*; do [ -s "$f" ] && { echo "  --- ${f##*/}"; sed 's/^/  /' "$f"; }; done
  }
  ping1=(busybox ping -c 1 -W 2)  # one ping with a 2 s deadline
  command -v ping >/dev/null && ping1=(ping -c 1 -W 2)
  a=$RKV_SANDBOX_ADDR b=${RKV_SANDBOX_PEER_ADDR:-}

  # B is another machine: its own boot, address and rxe0; exit codes and stderr come back.
  a_boot=$(cat /proc/sys/kernel/random/boot_id)
  b_boot=$("$peer" run cat /proc/sys/kernel/random/boot_id)
  b_addr=$("$peer" run printenv RKV_SANDBOX_ADDR)
  b_rxe=$("$peer" run ibv_devices | grep -c rxe0)
  b_err=$("$peer" run sh -c 'echo to-stderr >&2' 2>&1 >/dev/null)
  "$peer" run sh -c 'exit 7'; rc7=$?
  if [ "$a" = 10.78.0.1 ] && [ "$b" = 10.78.0.2 ] && [ "$b_addr" = 10.78.0.2 ] && [ -n "$b_boot" ] &&
     [ "$a_boot" != "$b_boot" ] && [ "$b_rxe" = 1 ] && ibv_devices | grep -q rxe0 && [ "$b_err" = to-stderr ] &&
     [ $rc7 = 7 ]; then
    ok "peer run"
  else
    bad "peer run" "A=$a peer=$b B=$b_addr boots $a_boot/$b_boot B rxe0 $b_rxe stderr '$b_err' exit $rc7 (want 7)"
  fi

  # rping B -> A over rxe: server here, client in B.
  timeout 60 rping -s -a "$a" -C 3 -v > "$logs/rping-server-a.txt" 2>&1 &
  sp=$!
  for i in $(seq 10); do
    sleep 1
    "$peer" run --timeout 60 rping -c -a "$a" -C 3 -v > "$logs/rping-client-b.txt" 2>&1 && break
  done
  wait $sp; src=$?
  n=$(grep -c 'ping data' "$logs/rping-client-b.txt")
  [ $src = 0 ] && [ "$n" = 3 ] && ok "rping B to A (run)" || bad "rping B to A (run)" "server exit $src, $n of 3 pings"
  rm -f "$logs"/*

  # rping A -> B: server spawned in B, client here; wait collects the server's output and code.
  id=$("$peer" spawn --timeout 60 rping -s -a "$b" -C 3 -v)
  for i in $(seq 10); do
    sleep 1
    timeout 60 rping -c -a "$b" -C 3 -v > "$logs/rping-client-a.txt" 2>&1 && break
  done
  "$peer" wait --timeout 60 "$id" > "$logs/rping-server-b.txt" 2>&1; src=$?
  n=$(grep -c 'ping data' "$logs/rping-client-a.txt")
  [ -n "$id" ] && [ $src = 0 ] && [ "$n" = 3 ] && ok "rping A to B (spawn, wait)" ||
    bad "rping A to B (spawn, wait)" "job '$id' exit $src, $n of 3 pings"
  rm -f "$logs"/*

  # kill: a spawned sleep is gone after sandbox-peer kill and wait reports SIGTERM.
  id=$("$peer" spawn sleep 600)
  "$peer" kill "$id"; krc=$?
  "$peer" wait --timeout 10 "$id"; wrc=$?
  [ $krc = 0 ] && [ $wrc = 143 ] && ok "kill" || bad "kill" "kill exit $krc, wait exit $wrc (want 143)"

  # Cable pulled at B: no ping from B to A nor from A to B; commands still run in B.
  "$peer" link off; lrc=$?
  "$peer" run "${ping1[@]}" "$a" > "$logs/ping-b-to-a-off.txt" 2>&1; p1=$?
  "${ping1[@]}" "$b" > "$logs/ping-a-to-b-off.txt" 2>&1; p2=$?
  st=$("$peer" link status)
  [ $lrc = 0 ] && [ $p1 != 0 ] && [ $p2 != 0 ] && [ "$st" = off ] && ok "link off" ||
    bad "link off" "link off exit $lrc, ping B->A exit $p1, A->B exit $p2 (want failures), status '$st'"
  rm -f "$logs"/*

  # Cable plugged back: ping both ways and rping B -> A work again.
  "$peer" link on; lrc=$?
  for i in $(seq 5); do "$peer" run "${ping1[@]}" "$a" > "$logs/ping-b-to-a-on.txt" 2>&1; p1=$?; [ $p1 = 0 ] && break; sleep 1; done
  for i in $(seq 5); do "${ping1[@]}" "$b" > "$logs/ping-a-to-b-on.txt" 2>&1; p2=$?; [ $p2 = 0 ] && break; sleep 1; done
  timeout 60 rping -s -a "$a" -C 2 -v > "$logs/rping-server-a.txt" 2>&1 &
  sp=$!
  for i in $(seq 10); do
    sleep 1
    "$peer" run --timeout 60 rping -c -a "$a" -C 2 -v > "$logs/rping-client-b.txt" 2>&1 && break
  done
  wait $sp; src=$?
  [ $lrc = 0 ] && [ $p1 = 0 ] && [ $p2 = 0 ] && [ $src = 0 ] && [ "$("$peer" link status)" = on ] && ok "link on" ||
    bad "link on" "link on exit $lrc, ping B->A exit $p1, A->B exit $p2, rping server exit $src"
  rm -rf "$logs"
  exit $fails
fi

repo=$(cd "${1:-$(dirname "$0")/../..}" && pwd) || exit 2
[ -x "$repo/tools/rdma-sandbox" ] || { echo "usage: tests/integration/sandbox.sh [REPO]" >&2; exit 2; }
cd "$repo" || exit 2
sb="$repo/tools/rdma-sandbox"
tmp=$(mktemp -d /tmp/rkv-sandbox-test.XXXXXX)
trap 'rm -rf "$tmp"' EXIT
accel_env=${RKV_SANDBOX_ACCEL:-}
unset RKV_SANDBOX_ACCEL RKV_SANDBOX_TEST_KVM RKV_SANDBOX_HOSTS
export RKV_SANDBOX_MODE=vm
failed=0
pass() { echo "[case PASS] sandbox: $1"; }
fail() {
  echo "[case FAIL] sandbox: $1 ($2)"; failed=$((failed + 1))
  for f in "$tmp"/out "$tmp"/err; do [ -s "$f" ] && { echo "  --- ${f##*/}"; tail -n 40 "$f" | sed 's/^/  /'; }; done
}

# (a) KVM that cannot start the guest: fallback to TCG, said once, the command still runs.
RKV_SANDBOX_TEST_KVM=fail "$sb" --timeout 300 -- sh -c 'ibv_devices; exit 3' > "$tmp/out" 2> "$tmp/err"; rc=$?
kvm_lines=$(grep -c KVM "$tmp/err")
if [ $rc = 3 ] && [ "$kvm_lines" = 1 ] && grep -q rxe0 "$tmp/out" &&
   grep -Eq '^rdma-sandbox: KVM cannot run the guest here \(probe: .+\); using TCG \(slower\)$' "$tmp/err"; then
  pass kvm-fallback
else
  fail kvm-fallback "exit $rc (want 3), $kvm_lines KVM lines on stderr (want 1)"
fi

# (b) Forced TCG: no probe, emulated CPU, rxe0 there.
RKV_SANDBOX_ACCEL=tcg "$sb" --timeout 300 -- sh -c 'ibv_devices && grep -m1 "model name" /proc/cpuinfo' > "$tmp/out" 2> "$tmp/err"; rc=$?
if [ $rc = 0 ] && ! grep -q KVM "$tmp/err" && grep -q rxe0 "$tmp/out" && grep -q 'QEMU TCG' "$tmp/out"; then
  pass tcg
else
  fail tcg "exit $rc"
fi

# (c) Two hosts: the checks above run in VM A; each prints its own line.
[ -n "$accel_env" ] && export RKV_SANDBOX_ACCEL=$accel_env
RKV_SANDBOX_HOSTS=2 "$sb" --timeout 900 -- "$repo/tests/integration/sandbox.sh" --inside-a "$repo" > "$tmp/out" 2> "$tmp/err"; rc=$?
grep '^\[case \(PASS\|FAIL\)\] sandbox two-host: \|^  ' "$tmp/out"
n_pass=$(grep -c '^\[case PASS\] sandbox two-host: ' "$tmp/out")
n_fail=$(grep -c '^\[case FAIL\] sandbox two-host: ' "$tmp/out")
failed=$((failed + n_fail))
if [ "$n_fail" = 0 ] && { [ $rc != 0 ] || [ "$n_pass" != 6 ]; }; then
  fail two-host "rdma-sandbox exit $rc, $n_pass of 6 cases passed"
fi

# (d) Four hosts through the hub.
RKV_SANDBOX_HOSTS=4 "$sb" --timeout 900 -- "$repo/tests/integration/sandbox.sh" --inside-a4 "$repo" > "$tmp/out" 2> "$tmp/err"; rc=$?
grep '^\[case \(PASS\|FAIL\)\] sandbox four-host: ' "$tmp/out"
n_pass=$(grep -c '^\[case PASS\] sandbox four-host: ' "$tmp/out")
n_fail=$(grep -c '^\[case FAIL\] sandbox four-host: ' "$tmp/out")
failed=$((failed + n_fail))
if [ "$n_fail" = 0 ] && { [ $rc != 0 ] || [ "$n_pass" != 6 ]; }; then
  fail four-host "rdma-sandbox exit $rc, $n_pass of 6 cases passed"
fi
exit $((failed > 0))
