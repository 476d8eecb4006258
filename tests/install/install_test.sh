#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# install_test.sh BUILD_DIR: installs a built tree into a fresh temporary prefix and checks what a
# user gets (docs/install.md): the file list, librkv.so's SONAME and that it exports only the
# public API, that every public header compiles on its own and includes nothing internal, and two
# outside projects (tests/install/find_package with CMake, tests/install/pkg_config with
# pkg-config), each linked with the shared and with the static library, built and run. No RDMA
# device is needed: the outside program's connect to 127.0.0.1:1 fails and it prints the status.
# One line per case: "[case PASS] install: WHAT" or "[case FAIL] install: WHAT (WHY)"; exit 1 if
# any failed. ctest test `install`. RKV_INSTALL_KEEP=1 keeps the temporary directory.
set -uo pipefail
build=${1:?usage: install_test.sh BUILD_DIR}
build=$(cd "$build" && pwd)
here=$(cd "$(dirname "$0")" && pwd)
src=$(cd "$here/../.." && pwd)
tmp=$(mktemp -d /tmp/rkv-install-test.XXXXXX)
[ "${RKV_INSTALL_KEEP:-0}" = 1 ] || trap 'rm -rf "$tmp"' EXIT
P=$tmp/prefix
failed=0
pass() { echo "[case PASS] install: $1"; }
fail() { echo "[case FAIL] install: $1 ($2)"; failed=1; }
log() { echo "--- $1:"; sed 's/^/    /' "$2" | tail -n 30; }

# The build's install targets must be up to date (ctest does not build).
if ! cmake --build "$build" --target kvserver kvctl kvbench rkv_shared rkv_static man_pages rkv_python \
    >"$tmp/build.log" 2>&1; then
  log "build" "$tmp/build.log"
  fail "build the installed targets" "cmake --build failed"
  exit 1
fi

if cmake --install "$build" --prefix "$P" >"$tmp/install.log" 2>&1; then
  pass "cmake --install into a fresh prefix"
else
  log "cmake --install" "$tmp/install.log"
  fail "cmake --install into a fresh prefix" "exit status $?"
  exit 1
fi

# --- The file list.
missing=()
for f in bin/kvserver bin/kvctl bin/kvbench lib/librkv.so.1.0.0 lib/librkv.a \
    lib/cmake/rkv/rkvConfig.cmake lib/cmake/rkv/rkvConfigVersion.cmake \
    lib/cmake/rkv/rkvTargets.cmake lib/cmake/rkv/rkvStaticTargets.cmake lib/pkgconfig/rkv.pc \
    share/man/man1/kvserver.1 share/man/man1/kvctl.1 share/man/man1/kvbench.1; do
  [ -f "$P/$f" ] || missing+=("$f")
done
for h in "$src"/client/include/rkv/*.h; do
  [ -f "$P/include/rkv/$(basename "$h")" ] || missing+=("include/rkv/$(basename "$h")")
done
for f in bin/kvserver bin/kvctl bin/kvbench; do [ -x "$P/$f" ] || missing+=("$f executable"); done
[ "$(readlink "$P/lib/librkv.so.1")" = librkv.so.1.0.0 ] || missing+=("lib/librkv.so.1 -> librkv.so.1.0.0")
[ "$(readlink "$P/lib/librkv.so")" = librkv.so.1 ] || missing+=("lib/librkv.so -> librkv.so.1")
if [ ${#missing[@]} -eq 0 ]; then
  pass "file list (bin/kvserver kvctl kvbench, lib/librkv.so.1 links, librkv.a, include/rkv, lib/cmake/rkv, rkv.pc, share/man/man1)"
else
  fail "file list" "missing: ${missing[*]}"
fi
extra=$(cd "$P" && find . -type f -o -type l | sort | grep -v -E \
  '^\./(bin/(kvserver|kvctl|kvbench)|lib/librkv\.(so|so\.1|so\.1\.0\.0|a)|include/rkv/[a-z_]+\.h|lib/cmake/rkv/rkv[A-Za-z-]+\.cmake|lib/pkgconfig/rkv\.pc|share/man/man1/(kvserver|kvctl|kvbench)\.1|lib/python3/.*)$')
if [ -z "$extra" ]; then pass "nothing else installed"; else fail "nothing else installed" "$(echo $extra)"; fi

# --- SONAME, needed libraries, no build-tree RPATH.
soname=$(readelf -d "$P/lib/librkv.so.1.0.0" 2>/dev/null | sed -n 's/.*(SONAME).*\[\(.*\)\]/\1/p')
if [ "$soname" = librkv.so.1 ]; then pass "SONAME librkv.so.1"; else fail "SONAME librkv.so.1" "got '$soname'"; fi
if readelf -d "$P/lib/librkv.so.1.0.0" "$P/bin/kvserver" "$P/bin/kvctl" "$P/bin/kvbench" |
    grep -E 'R(UN)?PATH' | grep -q "$build"; then
  fail "no build-tree RPATH in installed files" "$(readelf -d "$P/bin/kvctl" | grep -E 'R(UN)?PATH')"
else
  pass "no build-tree RPATH in installed files"
fi
if ldd -r "$P/lib/librkv.so.1.0.0" 2>&1 | grep -q -E 'undefined symbol|not found'; then
  fail "librkv.so resolves all its symbols" "$(ldd -r "$P/lib/librkv.so.1.0.0" 2>&1 | grep -E 'undefined|not found' | head -3)"
else
  pass "librkv.so resolves all its symbols"
fi

# --- Exported symbols: the public API only (cmake/librkv.map).
nm -D --defined-only -C "$P/lib/librkv.so.1.0.0" | awk '{ $1 = ""; $2 = ""; sub(/^  /, ""); print }' \
  >"$tmp/exports.txt"
allowed='^(rkv::Client::|rkv::Status::|rkv::CodeName\(|rkv::ExchangeName\(|rkv::ParseExchange\(|rkv::CheckConnection\(|RKV_1\.0$)'
bad=$(grep -v -E "$allowed" "$tmp/exports.txt" | head -5)
if [ -z "$bad" ]; then
  pass "librkv.so exports only the public API ($(wc -l <"$tmp/exports.txt") symbols)"
else
  fail "librkv.so exports only the public API" "also exports: $(echo "$bad" | tr '\n' ';')"
fi
need=("rkv::Client::Connect(" "rkv::Client::~Client()" "rkv::Client::Get(" "rkv::Client::MultiGet("
      "rkv::Client::Put(" "rkv::Client::Delete(" "rkv::Client::Stats(" "rkv::Client::Reconnect()"
      "rkv::Client::RequestSnapshot(" "rkv::Client::counters() const" "rkv::Client::server_info() const"
      "rkv::Status::ToString" "rkv::CodeName(" "rkv::ExchangeName(" "rkv::ParseExchange("
      "rkv::CheckConnection(")
absent=()
for s in "${need[@]}"; do grep -q -F "$s" "$tmp/exports.txt" || absent+=("$s"); done
if [ ${#absent[@]} -eq 0 ]; then
  pass "librkv.so exports every function the public headers declare"
else
  fail "librkv.so exports every function the public headers declare" "missing: ${absent[*]}"
fi

# --- Public headers: each compiles alone, includes only the standard library and rkv/.
hdr_fail=()
for h in "$P"/include/rkv/*.h; do
  name=rkv/$(basename "$h")
  if ! printf '#include <%s>\n' "$name" |
      g++ -std=c++17 -Wall -Wextra -Werror -fsyntax-only -I"$P/include" -x c++ - \
        >"$tmp/hdr.log" 2>&1; then
    hdr_fail+=("$name: $(head -1 "$tmp/hdr.log")")
  fi
done
if [ ${#hdr_fail[@]} -eq 0 ]; then pass "each public header compiles on its own"; else
  fail "each public header compiles on its own" "${hdr_fail[*]}"; fi
internal=$(grep -h '^#include' "$P"/include/rkv/*.h | grep -v -E '^#include (<[a-z_]+>|"rkv/[a-z_]+\.h"|<rkv/[a-z_]+\.h>)$')
if [ -z "$internal" ]; then pass "public headers include only the standard library and rkv/"; else
  fail "public headers include only the standard library and rkv/" "$(echo $internal)"; fi

# run_consumer WHAT BINARY [ENV...]: runs an outside program against 127.0.0.1:1.
run_consumer() {
  local what=$1 bin=$2
  shift 2
  if out=$(env "$@" timeout 60 "$bin" 127.0.0.1:1 2>"$tmp/run.err"); then
    if echo "$out" | grep -q '^connect 127.0.0.1:1: '; then
      pass "$what runs: $out"
    else
      fail "$what runs" "unexpected output: $out"
    fi
  else
    fail "$what runs" "exit status $?: $(tail -2 "$tmp/run.err")"
  fi
}
# linked_to_so BINARY: does it load librkv.so.1 (from the prefix)?
linked_to_so() { ldd "$1" 2>/dev/null | grep -q "librkv.so.1 => $P/lib/librkv.so.1"; }

# --- find_package: shared (rkv::rkv) and static (rkv::rkv_static).
for variant in shared static; do
  b=$tmp/fp-$variant
  opt=-DRKV_STATIC=OFF
  [ $variant = static ] && opt=-DRKV_STATIC=ON
  if cmake -S "$here/find_package" -B "$b" -DCMAKE_PREFIX_PATH="$P" $opt >"$tmp/fp.log" 2>&1 &&
      cmake --build "$b" >>"$tmp/fp.log" 2>&1; then
    pass "find_package(rkv) project builds ($variant)"
    if [ $variant = shared ]; then
      if linked_to_so "$b/consumer"; then pass "find_package shared program loads $P/lib/librkv.so.1 (RPATH)"
      else fail "find_package shared program loads $P/lib/librkv.so.1 (RPATH)" "$(ldd "$b/consumer" | grep rkv)"; fi
    else
      if ldd "$b/consumer" | grep -q librkv; then fail "find_package static program needs no librkv.so" "$(ldd "$b/consumer" | grep rkv)"
      else pass "find_package static program needs no librkv.so"; fi
    fi
    run_consumer "find_package $variant program" "$b/consumer"
  else
    log "find_package $variant" "$tmp/fp.log"
    fail "find_package(rkv) project builds ($variant)" "see the log above"
  fi
done
# find_package(rkv 2) must be refused (version file).
mkdir -p "$tmp/fpv"
printf 'cmake_minimum_required(VERSION 3.18)\nproject(v CXX)\nfind_package(rkv 2 QUIET)\nif(rkv_FOUND)\n  message(FATAL_ERROR "rkv 2 found")\nendif()\n' >"$tmp/fpv/CMakeLists.txt"
if cmake -S "$tmp/fpv" -B "$tmp/fpv/b" -DCMAKE_PREFIX_PATH="$P" >"$tmp/fpv.log" 2>&1; then
  pass "find_package(rkv 2) is not satisfied by rkv 1.0.0"
else
  fail "find_package(rkv 2) is not satisfied by rkv 1.0.0" "$(grep -m1 -A2 Error "$tmp/fpv.log")"
fi

# --- pkg-config: flags, then the Makefile project shared and static.
export PKG_CONFIG_PATH=$P/lib/pkgconfig
flags=$(pkg-config --cflags --libs rkv 2>&1 | sed "s/ *$//")
sflags=$(pkg-config --static --libs rkv 2>&1 | sed "s/ *$//")
if [ "$flags" = "-I$P/include -L$P/lib -lrkv" ]; then
  pass "pkg-config --cflags --libs rkv: $flags"
else
  fail "pkg-config --cflags --libs rkv" "got '$flags'"
fi
if echo "$sflags" | grep -q -- '-lrkv .*-libverbs .*-lrdmacm .*-lxxhash .*-lglog .*-lcurl .*-lcrypto'; then
  pass "pkg-config --static --libs rkv: $sflags"
else
  fail "pkg-config --static --libs rkv" "got '$sflags'"
fi
[ "$(pkg-config --modversion rkv)" = 1.0.0 ] && pass "pkg-config --modversion rkv: 1.0.0" ||
  fail "pkg-config --modversion rkv" "got '$(pkg-config --modversion rkv 2>&1)'"
for variant in shared static; do
  b=$tmp/pc-$variant
  mkdir -p "$b"
  st=0
  [ $variant = static ] && st=1
  if make -s -C "$b" -f "$here/pkg_config/Makefile" VPATH="$here/pkg_config" STATIC=$st consumer \
      >"$tmp/pc.log" 2>&1; then
    pass "pkg-config project builds ($variant)"
    if [ $variant = shared ]; then
      if LD_LIBRARY_PATH=$P/lib linked_to_so "$b/consumer"; then pass "pkg-config shared program loads $P/lib/librkv.so.1"
      else fail "pkg-config shared program loads $P/lib/librkv.so.1" "$(LD_LIBRARY_PATH=$P/lib ldd "$b/consumer" | grep rkv)"; fi
      run_consumer "pkg-config $variant program" "$b/consumer" LD_LIBRARY_PATH="$P/lib"
    else
      if ldd "$b/consumer" | grep -q librkv; then fail "pkg-config static program needs no librkv.so" "$(ldd "$b/consumer" | grep rkv)"
      else pass "pkg-config static program needs no librkv.so"; fi
      run_consumer "pkg-config $variant program" "$b/consumer"
    fi
  else
    log "pkg-config $variant" "$tmp/pc.log"
    fail "pkg-config project builds ($variant)" "see the log above"
  fi
done

# --- The installed programs run (their --help and --version; no device needed), and their
# manual pages render.
for p in kvserver kvctl kvbench; do
  out=$(timeout 30 "$P/bin/$p" --help 2>&1)
  rc=$?
  if [ $rc = 0 ] && [ "$(echo "$out" | head -1 | cut -d' ' -f1-2)" = "Usage: $p" ]; then
    pass "bin/$p --help: exit 0, 'Usage: $p ...'"
  else
    fail "bin/$p --help" "exit status $rc: $(echo "$out" | head -2)"
  fi
  out=$(timeout 30 "$P/bin/$p" --version 2>&1)
  rc=$?
  if [ $rc = 0 ] && [ "$(echo "$out" | head -1)" = "$p (rkv) $(sed -n 's/^project(rkv VERSION \([0-9.]*\).*/\1/p' "$src/CMakeLists.txt")" ]; then
    pass "bin/$p --version: $(echo "$out" | head -1)"
  else
    fail "bin/$p --version" "exit status $rc: $(echo "$out" | head -2)"
  fi
  if MANWIDTH=80 man -l "$P/share/man/man1/$p.1" 2>"$tmp/man.err" | grep -q -- "--help" && ! [ -s "$tmp/man.err" ]; then
    pass "share/man/man1/$p.1 renders (man -l)"
  else
    fail "share/man/man1/$p.1 renders" "$(head -2 "$tmp/man.err")"
  fi
done
# The Python package says its version and licence.
if out=$(cd / && PYTHONPATH="$P/lib/python3/dist-packages" /usr/bin/python3 -c '
import importlib.metadata as m, rkv
md = m.metadata("rkv")
assert md["License"] == "Apache-2.0" and rkv.__license__ == "Apache-2.0", md["License"]
assert md["Version"] == rkv.__version__, (md["Version"], rkv.__version__)
print(rkv.__version__, md["License"])' 2>&1); then
  pass "Python package metadata: version and licence ($out)"
else
  fail "Python package metadata" "$(echo "$out" | tail -1)"
fi
if grep -q '^set(rkv_LICENSE "Apache-2.0")' "$P/lib/cmake/rkv/rkvConfig.cmake" && grep -q 'Apache-2.0' "$P/lib/pkgconfig/rkv.pc"; then
  pass "CMake package and rkv.pc name the licence (Apache-2.0)"
else
  fail "CMake package and rkv.pc name the licence" "not in rkvConfig.cmake or rkv.pc"
fi

exit $failed
