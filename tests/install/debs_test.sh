#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# debs_test.sh [DEB_DIR]: the Debian packages (debian/; docs/install.md) install, work and go
# away cleanly. Builds them with tools/build-debs unless DEB_DIR holds them already, installs all
# with apt-get, checks the programs, the service's unit (systemd-analyze verify; it is never
# started), the flagfile conffile, the rkv user and token, a kvserver started by hand as rkv with
# the shipped flagfile (it must get past flag checking: no flag refused), the Python module, and
# find_package/pkg-config projects built against /usr; then removes (the conffile stays) and
# purges them and checks that no file of theirs is left. The system user rkv stays after purge
# (Debian policy: files it owned elsewhere keep a valid owner); the test says so.
# Needs root (else exit 77: skipped) and must be the only user of these packages on the machine. One line per case:
# "[case PASS] debs: WHAT" or "[case FAIL] debs: WHAT (WHY)"; exit 1 if any failed.
set -uo pipefail
here=$(cd "$(dirname "$0")" && pwd)
src=$(cd "$here/../.." && pwd)
tmp=$(mktemp -d /tmp/rkv-debs-test.XXXXXX)
trap 'rm -rf "$tmp"' EXIT
failed=0
pass() { echo "[case PASS] debs: $1"; }
fail() { echo "[case FAIL] debs: $1 ($2)"; failed=1; }
pkgs=(rkv-server rkv-tools librkv1 librkv-dev python3-rkv)
apt_get() { DEBIAN_FRONTEND=noninteractive apt-get -y -q -o DPkg::Lock::Timeout=600 "$@"; }
if [ "$(id -u)" != 0 ]; then echo "debs_test.sh: needs root (skipped)" >&2; exit 77; fi

start=$(date +%s)
debs=${1:-}
if [ -z "$debs" ]; then
  debs=$tmp/debs
  if "$src/tools/build-debs" "$debs" >"$tmp/build.log" 2>&1; then
    pass "tools/build-debs builds ${pkgs[*]} ($(( $(date +%s) - start )) s; lintian: no errors)"
    if grep -q '^W:' "$debs/lintian.txt"; then
      fail "lintian: no warnings for the five packages" "$(grep '^W:' "$debs/lintian.txt" | head -5 | tr '\n' ';')"
    else
      pass "lintian: no warnings for the five packages"
    fi
  elif ls "$debs"/*.deb >/dev/null 2>&1; then
    fail "tools/build-debs" "lintian errors: $(grep '^E:' "$debs/lintian.txt" | head -3 | tr '\n' ';')"
  else
    sed 's/^/    /' "$tmp/build.log" | tail -n 30
    fail "tools/build-debs" "the package build failed"
    exit 1
  fi
fi
debs=$(cd "$debs" && pwd)
missing=()
for p in "${pkgs[@]}"; do ls "$debs/${p}_"*.deb >/dev/null 2>&1 || missing+=("$p"); done
if [ ${#missing[@]} -eq 0 ]; then pass "every package built: ${pkgs[*]}"; else fail "every package built" "missing: ${missing[*]}"; fi

# Our files outside the packages' own lists: what the purge must leave behind as before.
ours() {
  find /usr /etc /var/lib /lib /opt -xdev \( -iname '*rkv*' -o -name 'kvserver*' -o -name 'kvctl*' \
    -o -name 'kvbench*' \) 2>/dev/null | grep -v -E '^/var/lib/(dpkg|apt)/' | sort
}
ours >"$tmp/before.txt"
for p in "${pkgs[@]}"; do
  if dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed'; then
    echo "debs_test.sh: $p is installed already; it will be purged at the end" >&2
  fi
done

if apt_get install "$debs"/*.deb >"$tmp/install.log" 2>&1; then
  pass "apt-get install of all packages"
else
  sed 's/^/    /' "$tmp/install.log" | tail -n 20
  fail "apt-get install of all packages" "see the log above"
  exit 1
fi

for p in kvserver kvctl kvbench; do
  out=$(timeout 30 "/usr/bin/$p" --help 2>&1)
  rc=$?
  if [ $rc = 0 ] && [ "$(echo "$out" | head -1 | cut -d' ' -f1-2)" = "Usage: $p" ]; then pass "/usr/bin/$p --help runs"
  else fail "/usr/bin/$p --help runs" "exit status $rc: $(echo "$out" | head -2)"; fi
  # Its manual page, installed compressed where man finds it.
  if [ -f "/usr/share/man/man1/$p.1.gz" ] && MANWIDTH=80 man "/usr/share/man/man1/$p.1.gz" 2>/dev/null | grep -q "^NAME"; then
    pass "man page /usr/share/man/man1/$p.1.gz installed and renders"
  else
    fail "man page /usr/share/man/man1/$p.1.gz" "$(ls -l /usr/share/man/man1/$p.1* 2>&1 | head -1)"
  fi
done
# kvctl against nothing: a clear error and exit status 2, no crash.
out=$(timeout 60 kvctl --server=127.0.0.1:1 get k 2>&1)
rc=$?
if [ $rc = 2 ]; then pass "kvctl get against no server: exit 2 ($(echo "$out" | tail -1))"
else fail "kvctl get against no server" "exit status $rc: $(echo "$out" | tail -2)"; fi

unit=""
for d in /lib/systemd/system /usr/lib/systemd/system; do
  [ -f "$d/kvserver.service" ] && unit=$d/kvserver.service
done
if [ -n "$unit" ]; then
  pass "unit file $unit installed"
  if grep -q '^ExecStart=/usr/bin/kvserver --flagfile=/etc/rkv/kvserver.flags$' "$unit" &&
      grep -q '^LimitMEMLOCK=infinity$' "$unit" && grep -q '^User=rkv$' "$unit"; then
    pass "unit runs kvserver --flagfile=/etc/rkv/kvserver.flags as rkv with LimitMEMLOCK=infinity"
  else
    fail "unit runs kvserver --flagfile=/etc/rkv/kvserver.flags as rkv with LimitMEMLOCK=infinity" "$(grep -E '^(ExecStart|User|LimitMEMLOCK)=' "$unit" | tr '\n' ';')"
  fi
  if out=$(systemd-analyze verify "$unit" 2>&1); then
    pass "systemd-analyze verify kvserver.service${out:+: $(echo $out)}"
  else
    fail "systemd-analyze verify kvserver.service" "$(echo $out)"
  fi
  if systemctl is-enabled kvserver.service 2>/dev/null | grep -q '^enabled'; then
    fail "kvserver.service is not enabled on install" "it is enabled"
  else
    pass "kvserver.service is not enabled on install (the operator sets --listen first)"
  fi
else
  fail "unit file kvserver.service installed" "not in /lib/systemd/system or /usr/lib/systemd/system"
fi
if dpkg-query -W -f='${Conffiles}\n' rkv-server | grep -q '^ /etc/rkv/kvserver.flags '; then
  pass "/etc/rkv/kvserver.flags is a conffile"
else
  fail "/etc/rkv/kvserver.flags is a conffile" "$(dpkg-query -W -f='${Conffiles}' rkv-server)"
fi
if getent passwd rkv >/dev/null && [ "$(getent passwd rkv | cut -d: -f7)" != /bin/bash ]; then
  pass "system user rkv ($(getent passwd rkv))"
else
  fail "system user rkv" "$(getent passwd rkv || echo absent)"
fi
# The token: 32 bytes from /dev/urandom in base64 (postinst). It must decode to 32 bytes that
# are not a pattern (at least 16 distinct byte values: 32 random bytes have about 30, and fewer
# than 16 happens with a probability below 1e-20), owned by rkv, mode 600; that it is made anew
# on each machine (not a constant shipped in the package) is checked after the purge below.
token_bytes() {  # FILE -> "N D": decoded length and distinct byte values, or nothing
  base64 -d "$1" 2>/dev/null | od -An -v -tu1 | tr -s ' ' '\n' | grep -v '^$' |
    awk '{n++; seen[$1]=1} END {d=0; for (k in seen) d++; if (n) print n, d}'
}
token1=$(cat /etc/rkv/token 2>/dev/null)
read -r tlen tdistinct <<< "$(token_bytes /etc/rkv/token)"
if [ "$(stat -c '%U %a' /etc/rkv/token 2>/dev/null)" = "rkv 600" ] && [ "${tlen:-0}" = 32 ] &&
    [ "${tdistinct:-0}" -ge 16 ]; then
  pass "/etc/rkv/token: 32 bytes ($tdistinct distinct values) in base64, owned by rkv, mode 600"
else
  fail "/etc/rkv/token: 32 random bytes in base64, owned by rkv, mode 600" \
    "$(stat -c '%U %a %s' /etc/rkv/token 2>&1); decoded ${tlen:-?} bytes, ${tdistinct:-?} distinct"
fi
# kvserver as the service would run it (minus systemd), with --check_config: every flag of the
# shipped flagfile is accepted and the token is readable by rkv (exit 0, "configuration OK").
out=$(cd / && timeout 30 runuser -u rkv -- /usr/bin/kvserver --flagfile=/etc/rkv/kvserver.flags --check_config 2>&1)
rc=$?
if [ $rc = 0 ] && [ "$out" = "kvserver: configuration OK" ]; then
  pass "kvserver as rkv accepts the shipped flagfile (--check_config: $out)"
else
  fail "kvserver as rkv accepts the shipped flagfile" "exit $rc: $(echo "$out" | tail -2 | tr '\n' ';')"
fi
# A flagfile with one bad value is refused the same way (the check above can fail).
sed 's/^--memory=.*/--memory=lots/' /etc/rkv/kvserver.flags > "$tmp/bad.flags"
chmod 644 "$tmp/bad.flags"; chmod 755 "$tmp"
out=$(cd / && timeout 30 runuser -u rkv -- /usr/bin/kvserver --flagfile="$tmp/bad.flags" --check_config 2>&1)
rc=$?
if [ $rc = 2 ] && echo "$out" | grep -q -- '--memory'; then
  pass "kvserver as rkv refuses the shipped flagfile with --memory=lots (exit 2: $(echo "$out" | tail -1))"
else
  fail "kvserver as rkv refuses a bad flagfile" "exit $rc: $(echo "$out" | tail -2 | tr '\n' ';')"
fi

if out=$(cd / && /usr/bin/python3 -c 'import rkv, sys; print(rkv.__file__); sys.exit(0 if hasattr(rkv, "Client") else 1)' 2>&1); then
  pass "/usr/bin/python3: import rkv ($out)"
else
  fail "/usr/bin/python3: import rkv" "$(echo "$out" | tail -1)"
fi

# Outside projects against /usr.
for variant in shared static; do
  b=$tmp/fp-$variant
  opt=-DRKV_STATIC=OFF
  [ $variant = static ] && opt=-DRKV_STATIC=ON
  if cmake -S "$here/find_package" -B "$b" $opt >"$tmp/fp.log" 2>&1 && cmake --build "$b" >>"$tmp/fp.log" 2>&1; then
    if out=$(timeout 60 "$b/consumer" 127.0.0.1:1 2>&1) && echo "$out" | grep -q '^connect 127.0.0.1:1: '; then
      pass "find_package(rkv) project against /usr ($variant) builds and runs: $out"
    else
      fail "find_package(rkv) project against /usr ($variant) runs" "$out"
    fi
  else
    sed 's/^/    /' "$tmp/fp.log" | tail -n 20
    fail "find_package(rkv) project against /usr ($variant) builds" "see the log above"
  fi
done
mkdir -p "$tmp/pc"
if make -s -C "$tmp/pc" -f "$here/pkg_config/Makefile" VPATH="$here/pkg_config" consumer >"$tmp/pc.log" 2>&1 &&
    out=$(timeout 60 "$tmp/pc/consumer" 127.0.0.1:1 2>&1); then
  pass "pkg-config project against /usr builds and runs ($(pkg-config --libs rkv)): $out"
else
  fail "pkg-config project against /usr" "$(tail -3 "$tmp/pc.log") $out"
fi

# Remove: the conffile stays; purge: nothing of ours stays (the rkv user does, by design).
if apt_get remove "${pkgs[@]}" >"$tmp/remove.log" 2>&1 && [ ! -e /usr/bin/kvserver ] &&
    [ ! -e /usr/include/rkv ] && [ -f /etc/rkv/kvserver.flags ]; then
  pass "apt-get remove: programs and library gone, /etc/rkv/kvserver.flags kept"
else
  fail "apt-get remove" "$(tail -3 "$tmp/remove.log" | tr '\n' ';')"
fi
# (dpkg: apt-get no longer knows packages removed that came from .deb files.)
if dpkg --purge "${pkgs[@]}" >"$tmp/purge.log" 2>&1; then
  left=$(dpkg -l "${pkgs[@]}" 2>/dev/null | grep -E '^[a-z][a-z] ' | grep -v '^un' | awk '{print $1, $2}')
  if [ -z "$left" ]; then pass "dpkg --purge: no package left in dpkg's database"
  else fail "dpkg --purge: no package left in dpkg's database" "$(echo $left)"; fi
else
  fail "dpkg --purge" "$(tail -3 "$tmp/purge.log" | tr '\n' ';')"
fi
# Installed again after the purge, rkv-server makes a new token: it is not shipped in the
# package (everyone would share it). Then purged again.
if apt_get install "$debs"/rkv-server_*.deb "$debs"/librkv1_*.deb >"$tmp/reinstall.log" 2>&1; then
  token2=$(cat /etc/rkv/token 2>/dev/null)
  read -r tlen2 _ <<< "$(token_bytes /etc/rkv/token)"
  if [ "${tlen2:-0}" = 32 ] && [ -n "$token1" ] && [ "$token2" != "$token1" ]; then
    pass "a second installation makes a new token (not shipped in the package)"
  else
    fail "a second installation makes a new token" "decoded ${tlen2:-?} bytes; same as the first: $([ "$token2" = "$token1" ] && echo yes || echo no)"
  fi
else
  fail "reinstall of rkv-server after purge" "$(tail -3 "$tmp/reinstall.log" | tr '\n' ';')"
fi
dpkg --purge "${pkgs[@]}" >"$tmp/purge2.log" 2>&1 || fail "second dpkg --purge" "$(tail -3 "$tmp/purge2.log" | tr '\n' ';')"
ours >"$tmp/after.txt"
extra=$(comm -13 "$tmp/before.txt" "$tmp/after.txt")
if [ -z "$extra" ]; then pass "purge leaves no file behind (/usr /etc /var/lib /lib /opt)"
else fail "purge leaves no file behind" "$(echo $extra)"; fi
# Debian policy: the system user stays after purge (files it owned elsewhere keep a valid
# owner); postrm must not delete it.
if getent passwd rkv >/dev/null; then
  pass "system user rkv is kept after purge (Debian policy; userdel rkv removes it)"
else
  fail "system user rkv is kept after purge" "postrm removed it"
fi

echo "debs_test.sh: $(( $(date +%s) - start )) s in all" >&2
exit $failed
