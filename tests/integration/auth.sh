#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# Authentication and the handshake (issue 12; docs/security.md), in the RDMA sandbox. Starts an
# authenticating kvserver (--auth_token_file) and one without, and checks with raw_client's
# `auth` mode (judged attacks) and the real tools:
#   start-up: a token file others can read, one in a directory others may write, one owned by
#     another user, a symlink, a token under 32 bytes (trailing whitespace stripped), and a
#     wildcard --listen without auth in any spelling (0.0.0.0, 0, 0x0, [::], ...) are refused;
#     --allow_unauthenticated allows the wildcard, with one warning line
#   anonymous: the accept data is the 32-byte hello (no rkey, no address; rdma_cm pads it with
#     zeros to 196 bytes on RoCE, and the padding must be zero); a request before OPEN
#     gets UNAUTHENTICATED and the connection is dropped (both servers)
#   wrong token, no mac, replayed OPEN: refused
#   open: READ with the granted rkey works; RDMA WRITE and atomic on the region fail
#   kvctl/kvbench with the token work (rdma_cm and tcp exchange); without it / with a wrong one
#     they fail with UNAUTHENTICATED and a clear message
#   private rkeys: A's rkey is refused to B while A is connected and after A has left; AUTH_MANY
#     connections show no constant step in rkeys or PSNs; granted addresses are 0; the same on a
#     server with --client_rkeys=registration (open, read, no write/atomic, B refused A's rkey,
#     AUTH_REG_MANY connections without a step, kvctl over rdma_cm and tcp, a verified kvbench
#     run, every connection drained and none leaked); a 6 KiB request before OPEN is refused
#     and the connection dropped on both (registration mode: more than its 4 KiB setup buffer)
#   nothing left to read: a scan of the whole region through a window after deletes and an
#     overwrite finds none of the dead values' bytes (inline and heap) and finds the live ones
#   measure: connect+OPEN time with and without authentication, and with a window bind vs a
#     registration per client (reported, not judged)
#   tests/integration/auth.sh BUILD_DIR [ADDR LOGDIR]   (only BUILD_DIR: enters the sandbox)
# Environment: AUTH_CONNECTS (connects per timing run, default 30), AUTH_MANY (connections of
# the step check, default 1000), AUTH_PORT_BASE (7560).
set -uo pipefail
build=$(cd "${1:?usage: auth.sh BUILD_DIR [ADDR LOGDIR]}" && pwd) || exit 2
if [ $# -eq 1 ] && [ -z "${RKV_IN_SANDBOX:-}" ]; then
  export RKV_IN_SANDBOX=1
  exec "$(dirname "$0")/../../tools/rdma-sandbox" --timeout 1100 -- sh -c \
    "$0 \"$build\" \$RKV_SANDBOX_ADDR \$(mktemp -d /tmp/rkv-auth.XXXXXX)"
fi
addr=${2:?usage: auth.sh BUILD_DIR ADDR LOGDIR}
logs=${3:?usage: auth.sh BUILD_DIR ADDR LOGDIR}
mkdir -p "$logs" || exit 2
KNOB_PREFIX=AUTH
. "$(dirname "$0")/common.sh"
CONNECTS=$(knob CONNECTS 30)
MANY=$(knob MANY 1000)
REG_MANY=$(knob REG_MANY 200)  # registration mode: each connect registers the region
PORT=$(knob PORT_BASE 7560)
KVSERVER=$build/kvserver RAW=$build/raw_client KVCTL=$build/kvctl KVBENCH=$build/kvbench
rc=0
pass() { echo "[case PASS] auth: $1${2:+ ($2)}"; }
fail() { echo "[case FAIL] auth: $1${2:+ ($2)}"; rc=1; }
pids=()
cleanup() { for p in "${pids[@]}"; do kill "$p" 2>/dev/null; done; wait 2>/dev/null; }
trap cleanup EXIT

# Tokens of 64 bytes, as `openssl rand -hex 32` makes them (the sandbox may lack openssl).
token=$logs/token
printf 'sandbox-secret-token-0123456789abcdef0123456789abcdef0123456789ab\n' > "$token"
chmod 600 "$token"
wrong=$logs/wrong
printf 'another-secret-token-9876543210fedcba9876543210fedcba9876543210fe\r\n' > "$wrong"
chmod 600 "$wrong"

# --- start-up checks ---------------------------------------------------------------------------
cp "$token" "$logs/open-token" && chmod 644 "$logs/open-token"
out=$("$KVSERVER" --listen="$addr:$PORT" --memory=8M --auth_token_file="$logs/open-token" 2>&1)
[ $? -eq 2 ] && [[ $out == *"chmod 600"* ]] && pass "token-file-mode" || fail "token-file-mode" "$out"
# 31 bytes once the trailing whitespace (CR LF, blanks) is stripped.
printf '0123456789abcdef0123456789abcde \t\r\n' > "$logs/short" && chmod 600 "$logs/short"
out=$("$KVSERVER" --listen="$addr:$PORT" --memory=8M --auth_token_file="$logs/short" 2>&1)
[ $? -eq 2 ] && [[ $out == *"at least 32"* ]] && pass "short-token" || fail "short-token" "$out"
out=$("$KVCTL" --server="$addr:$PORT" --auth_token_file="$logs/short" get k 2>&1)
[ $? -ne 0 ] && [[ $out == *"at least 32"* ]] && pass "short-token-client" || fail "short-token-client" "$out"
mkdir -p "$logs/open-dir" && chmod 777 "$logs/open-dir" && cp "$token" "$logs/open-dir/token" && chmod 600 "$logs/open-dir/token"
out=$("$KVSERVER" --listen="$addr:$PORT" --memory=8M --auth_token_file="$logs/open-dir/token" 2>&1)
[ $? -eq 2 ] && [[ $out == *"its directory"* ]] && pass "token-dir-writable" || fail "token-dir-writable" "$out"
if [ "$(id -u)" = 0 ]; then
  cp "$token" "$logs/other-token" && chmod 600 "$logs/other-token" && chown 65534 "$logs/other-token"
  out=$("$KVSERVER" --listen="$addr:$PORT" --memory=8M --auth_token_file="$logs/other-token" 2>&1)
  [ $? -eq 2 ] && [[ $out == *"owned by uid 65534"* ]] && pass "token-owner" || fail "token-owner" "$out"
else
  echo "[case SKIP] auth: token-owner (not root: cannot give the token file to another user)"
fi
ln -s "$token" "$logs/link-token"
out=$("$KVSERVER" --listen="$addr:$PORT" --memory=8M --auth_token_file="$logs/link-token" 2>&1)
[ $? -eq 2 ] && [[ $out == *"symbolic link"* ]] && pass "token-symlink" || fail "token-symlink" "$out"
# Protected mode judges the resolved address: every spelling of the wildcard is refused.
for h in 0.0.0.0 0 0x0 0.0 000.000.000.000 "[::]" 0:0:0:0:0:0:0:0; do
  out=$("$KVSERVER" --listen="$h:$PORT" --memory=8M 2>&1)
  [ $? -eq 2 ] && [[ $out == *"--allow_unauthenticated"* ]] && pass "protected-mode $h" || fail "protected-mode $h" "$out"
done

# wait_up LOG: until the server logs that it listens (30 s).
wait_up() { for _ in $(seq 300); do grep -q "kvserver listening on" "$1" && return 0; sleep 0.1; done; return 1; }
"$KVSERVER" --listen="0.0.0.0:$((PORT + 3))" --memory=8M --allow_unauthenticated > "$logs/wild.log" 2>&1 &
pids+=($!)
if wait_up "$logs/wild.log" && [ "$(grep -c "can read and write every key" "$logs/wild.log")" = 1 ]; then
  pass "allow-unauthenticated" "wildcard listen allowed, one warning line"
else
  fail "allow-unauthenticated" "$(tail -3 "$logs/wild.log")"
fi

# --- servers -------------------------------------------------------------------------------------
A="$addr:$PORT" N="$addr:$((PORT + 1))"
"$KVSERVER" --listen="$A" --memory=16M --workers=2 --auth_token_file="$token" --exchange=tcp > "$logs/auth-server.log" 2>&1 &
pids+=($!)
"$KVSERVER" --listen="$N" --memory=16M --workers=2 > "$logs/open-server.log" 2>&1 &
pids+=($!)
R="$addr:$((PORT + 2))"
"$KVSERVER" --listen="$R" --memory=16M --workers=2 --auth_token_file="$token" --client_rkeys=registration --exchange=tcp > "$logs/reg-server.log" 2>&1 &
pids+=($!)
wait_up "$logs/auth-server.log" && wait_up "$logs/open-server.log" && wait_up "$logs/reg-server.log" || { fail "servers" "did not start"; exit 1; }
ibv_devinfo -v 2>/dev/null | grep -iE "hca_id|MEM_WINDOW|max_mw" | sed 's/^[[:space:]]*/auth device: /'
grep -h "private rkeys" "$logs/auth-server.log" "$logs/reg-server.log" | sed 's/^.*\] /auth server: /'
if grep -q "memory window per client" "$logs/auth-server.log"; then pass "windows-in-use"; else fail "windows-in-use" "the device has no type-2 windows?"; fi
if grep -q "authentication on" "$logs/auth-server.log" && ! grep -q "can read and write every key" "$logs/auth-server.log"; then
  pass "auth-server-start"
else
  fail "auth-server-start"
fi

# judged raw_client cases: NAME SERVER ARGS...
raw() {
  local name=$1 server=$2; shift 2
  local line st
  line=$("$RAW" auth --server="$server" --timeout_ms=8000 "$@" 2>>"$logs/raw.err" | tail -1)
  st=$?  # raw_client's (pipefail): 0 only if it judged the case passed
  if [ $st -eq 0 ] && [[ $line == *"verdict=pass"* ]]; then pass "$name" "$line"; else fail "$name" "$line (exit $st)"; fi
}
raw anonymous-auth "$A" --auth_case=anonymous
raw anonymous-noauth "$N" --auth_case=anonymous
raw no-mac "$A" --auth_case=no-mac
raw wrong-token "$A" --auth_case=wrong-token --wrong_token="$(cat "$wrong")"
raw replay "$A" --auth_case=replay --auth_token_file="$token"
raw open-read-no-write "$A" --auth_case=open --auth_token_file="$token"
raw open-read-no-write-noauth "$N" --auth_case=open
raw cross-rkey "$A" --auth_case=cross-rkey --auth_token_file="$token"
raw many-no-constant-step "$A" --auth_case=many --count="$MANY" --auth_token_file="$token"
raw open-read-no-write-registration "$R" --auth_case=open --auth_token_file="$token"
# Registration mode: each connection's QP, its registration of the region and its buffers are in
# a protection domain of its own, so B's QP cannot use A's rkey either (server/conn/private_domain.h).
raw big-before-open "$A" --auth_case=big-before-open
raw big-before-open-registration "$R" --auth_case=big-before-open --big_refused=false
raw cross-rkey-registration "$R" --auth_case=cross-rkey --auth_token_file="$token"
raw many-no-constant-step-registration "$R" --auth_case=many --count="$REG_MANY" --auth_token_file="$token"
# The real tools on the registration server: rdma_cm and manual mode (a receive queue of its
# own per connection instead of the shared SRQ), and a verified kvbench load and run.
regctl() { "$KVCTL" --server="$R" --auth_token_file="$token" "$@"; }
if regctl put rkey rvalue && [ "$(regctl get rkey)" = rvalue ] &&
   regctl --exchange=tcp put tkey tvalue && [ "$(regctl --exchange=tcp get tkey)" = tvalue ] &&
   regctl del rkey && regctl --exchange=tcp del tkey; then
  pass "kvctl-registration" "rdma_cm and tcp exchange"
else
  fail "kvctl-registration"
fi
if "$KVBENCH" --server="$R" --auth_token_file="$token" --records=300 --threads=2 --value_size=2000 --verify load > "$logs/reg-bench-load.txt" 2>&1 &&
   "$KVBENCH" --server="$R" --auth_token_file="$token" --records=300 --threads=2 --value_size=2000 --verify run --workload=a --operations=1500 > "$logs/reg-bench-run.txt" 2>&1 &&
   grep -q "^\[VERIFY\], Failures, 0$" "$logs/reg-bench-run.txt"; then
  pass "kvbench-registration"
else
  fail "kvbench-registration" "$(tail -3 "$logs/reg-bench-run.txt" "$logs/reg-bench-load.txt")"
fi
# Every connection above is gone and drained: its flushed receives counted back, its QP and
# PD destroyed, none leaked (the stats connection itself is the one active).
stats=""
for _ in $(seq 50); do
  stats=$(regctl stats 2>&1)
  [ "$(echo "$stats" | awk '$1=="connections_active"{print $2}')" = 1 ] && break
  sleep 0.2
done
if [ "$(echo "$stats" | awk '$1=="connections_active"{print $2}')" = 1 ] &&
   [ "$(echo "$stats" | awk '$1=="qps_leaked"{print $2}')" = 0 ]; then
  pass "registration-drains" "$(echo "$stats" | awk '$1=="connections_total"||$1=="qps_leaked"{printf "%s=%s ", $1, $2}')"
else
  fail "registration-drains" "$(echo "$stats" | grep -E "connections_active|qps_leaked" | tr '\n' ' ')"
fi
# Nothing left to read: deleted and overwritten values (inline, heap) are not in the region that
# a client's window shows; live ones are (the scan works).
mk() { od -An -tx1 -N32 /dev/urandom | tr -d ' \n'; }
pad=$(printf 'x%.0s' $(seq 2900))
d1=$(mk) d2=$(mk) d3=$(mk) l1=$(mk) l2=$(mk)
kv() { "$KVCTL" --server="$A" --auth_token_file="$token" "$@" > /dev/null 2>&1; }
kv put scan-dead-inline "$d1" && kv put scan-dead-heap "$d2$pad" && kv put scan-over "$d3$pad" &&
  kv put scan-over "replaced" && kv del scan-dead-inline && kv del scan-dead-heap &&
  kv put scan-live-inline "$l1" && kv put scan-live-heap "$l2$pad" ||
  fail "region-scan setup" "kvctl put/del failed"
raw region-scan-after-deletes "$A" --auth_case=scan --auth_token_file="$token" \
  --scan_live="$l1,$l2" --scan_dead="$d1,$d2,$d3"
if grep -qE "0x7f[0-9a-f]{10}|region addr" "$logs"/auth-server.log "$logs"/open-server.log; then
  fail "no-address-in-logs" "$(grep -hE "0x7f[0-9a-f]{10}|region addr" "$logs"/*.log | head -2)"
else
  pass "no-address-in-logs"
fi

# --- the real tools --------------------------------------------------------------------------------
ctl() { "$KVCTL" --server="$A" "$@"; }
if ctl --auth_token_file="$token" put akey avalue && [ "$(ctl --auth_token_file="$token" get akey)" = avalue ] &&
   ctl --auth_token_file="$token" del akey; then
  pass "kvctl-token"
else
  fail "kvctl-token"
fi
# A refused kvctl must also exit non-zero (the message alone is not the refusal).
out=$(ctl get akey 2>&1)
[ $? -ne 0 ] && [[ $out == *"UNAUTHENTICATED"*"server requires authentication"* ]] && pass "kvctl-no-token" "$out" || fail "kvctl-no-token" "$out"
out=$(ctl --auth_token_file="$wrong" get akey 2>&1)
[ $? -ne 0 ] && [[ $out == *"UNAUTHENTICATED"*"authentication failed"* ]] && pass "kvctl-wrong-token" "$out" || fail "kvctl-wrong-token" "$out"
out=$("$KVCTL" --server="$N" --auth_token_file="$token" get akey 2>&1)
[ $? -ne 0 ] && [[ $out == *"UNAUTHENTICATED"* ]] && pass "kvctl-token-vs-open-server" "$out" || fail "kvctl-token-vs-open-server" "$out"
# Manual mode (tcp exchange): the same, and kvctl check still works.
if ctl --exchange=tcp --auth_token_file="$token" put tkey tvalue && [ "$(ctl --exchange=tcp --auth_token_file="$token" get tkey)" = tvalue ]; then
  pass "kvctl-tcp-token"
else
  fail "kvctl-tcp-token"
fi
out=$(ctl --exchange=tcp get tkey 2>&1)
[ $? -ne 0 ] && [[ $out == *"UNAUTHENTICATED"* ]] && pass "kvctl-tcp-no-token" "$out" || fail "kvctl-tcp-no-token" "$out"
out=$(ctl --exchange=tcp check 2>&1)
if [ $? -eq 0 ]; then
  pass "kvctl-tcp-check"
else
  fail "kvctl-tcp-check" "$out"
fi
info=$(ctl --auth_token_file="$token" info 2>&1)
echo "$info" > "$logs/info.txt"
if echo "$info" | grep -q "^region_addr 0x0$" && ! echo "$info" | grep -E "^ *remote_addr" | grep -qE "0x[1-9a-f]"; then
  pass "kvctl-info-no-address"
else
  fail "kvctl-info-no-address" "$(grep -E "region_addr|remote_addr" "$logs/info.txt" | head -3)"
fi
if "$KVBENCH" --server="$A" --auth_token_file="$token" --records=500 --threads=2 --verify load > "$logs/bench-load.txt" 2>&1 &&
   "$KVBENCH" --server="$A" --auth_token_file="$token" --records=500 --threads=2 --verify run --workload=a --operations=2000 > "$logs/bench-run.txt" 2>&1 &&
   grep -q "^\[VERIFY\], Failures, 0$" "$logs/bench-run.txt"; then
  pass "kvbench-token"
else
  fail "kvbench-token" "$(tail -3 "$logs/bench-run.txt" "$logs/bench-load.txt")"
fi
out=$("$KVBENCH" --server="$A" --records=10 load 2>&1)
[ $? -ne 0 ] && [[ $out == *"UNAUTHENTICATED"* ]] && pass "kvbench-no-token" || fail "kvbench-no-token" "$out"

# --- cost (reported) ---------------------------------------------------------------------------
t_auth=$("$RAW" auth --server="$A" --auth_case=connect-time --count="$CONNECTS" --auth_token_file="$token" 2>>"$logs/raw.err" | tail -1)
t_open=$("$RAW" auth --server="$N" --auth_case=connect-time --count="$CONNECTS" 2>>"$logs/raw.err" | tail -1)
t_reg=$("$RAW" auth --server="$R" --auth_case=connect-time --count="$CONNECTS" --auth_token_file="$token" 2>>"$logs/raw.err" | tail -1)
echo "auth measure: auth + window bind:          $t_auth"
echo "auth measure: no auth + window bind:       $t_open"
echo "auth measure: auth + registration (16M):   $t_reg"

# Every server (the wildcard one too) is still running, stops cleanly on SIGTERM (exit 0) and
# leaves no crash report in its log, shutdown's included.
stopped=""
for p in "${pids[@]}"; do
  if ! kill -0 "$p" 2>/dev/null; then
    wait "$p"; stopped+="pid $p had died (exit $?); "; continue
  fi
  kill "$p"
  for _ in $(seq 150); do kill -0 "$p" 2>/dev/null || break; sleep 0.2; done
  if kill -0 "$p" 2>/dev/null; then
    kill -9 "$p"; wait "$p"; stopped+="pid $p still running 30 s after SIGTERM; "; continue
  fi
  wait "$p"
  st=$?
  [ $st -eq 0 ] || stopped+="pid $p exit status $st after SIGTERM; "
done
pids=()
crash=$(grep -h -m1 -E "$CRASH_PATTERN" "$logs"/*.log | head -1)
if [ -z "$stopped$crash" ]; then
  pass "servers-clean-stop" "alive to the end, exit 0 on SIGTERM, no crash report"
else
  stopped=${stopped%; }
  fail "servers-clean-stop" "$stopped${crash:+${stopped:+; }$crash}"
fi
grep -c "OPEN refused\|request before OPEN" "$logs/auth-server.log" | sed 's/^/auth server refusals logged: /'
[ $rc = 0 ] && echo "auth: all passed (logs in $logs)" || echo "auth: FAILED (logs in $logs)"
exit $rc
