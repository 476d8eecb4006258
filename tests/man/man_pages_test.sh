#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# The programs' --help, --version and manual pages (issue 22; common/cli/usage.h,
# cmake/rkv_man.cmake), with no RDMA device:
#  - every flag a program defines (gflags' --helpxml, less glog's and gflags' own) is listed in
#    its --help under a group heading (none left under "Other flags:") and in its manual page
#    as rendered by `man -l`; glog's flags are not in --help (they are behind --helpfull);
#  - --help opens with "Usage: NAME", --version with "NAME (rkv) X.Y.Z" and the wire protocol and
#    table format versions; both exit 0;
#  - negative control: the same check on a page with one flag's entry removed reports it missing.
#   tests/man/man_pages_test.sh BUILD_DIR   (builds the man_pages target first)
set -uo pipefail
build=$(cd "${1:?usage: man_pages_test.sh BUILD_DIR}" && pwd) || exit 2
failed=0
pass() { echo "[case PASS] man: $1"; }
fail() { echo "[case FAIL] man: $1 ($2)"; failed=1; }
if ! out=$(cmake --build "$build" --target man_pages 2>&1); then
  echo "$out" | tail -n 20
  fail "build the manual pages (cmake --build --target man_pages)" "failed"
  exit 1
fi
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
# The flags a program defines itself: --helpxml's <name> of every flag whose <file> is not glog's
# or gflags' (matched by base name, as common/cli/usage.cc does).
own_flags() {
  "$1" --helpxml 2>/dev/null | python3 -c '
import sys, xml.etree.ElementTree as ET
lib = {"logging.cc", "utilities.cc", "vlog_is_on.cc", "gflags.cc", "gflags_reporting.cc",
       "gflags_completions.cc", "symbolize.cc", "signalhandler.cc"}
for f in ET.fromstring(sys.stdin.read()).iter("flag"):
    if f.findtext("file", "").rsplit("/", 1)[-1] not in lib:
        print(f.findtext("name"))'
}
# missing_from TEXT_FILE INDENT FLAGS...: the flags with no entry "--NAME" starting a line at
# exactly INDENT spaces (an entry's place: 2 in --help, 7 in a rendered page; a mention in the
# synopsis or in another flag's text does not count).
missing_from() {
  local file=$1 ind=$2 f out=()
  shift 2
  for f in "$@"; do grep -qE -- "^ {$ind}--$f(=|[[:space:]]|$)" "$file" || out+=("$f"); done
  echo "${out[*]}"
}
for p in kvserver kvctl kvbench; do
  bin=$build/$p page=$build/man/$p.1
  mapfile -t flags < <(own_flags "$bin")
  if [ "${#flags[@]}" -lt 5 ]; then
    fail "$p: its flags from --helpxml" "only ${#flags[@]}: ${flags[*]}"
    continue
  fi
  "$bin" --help > "$tmp/$p.help" 2>&1; rc=$?
  miss=$(missing_from "$tmp/$p.help" 2 "${flags[@]}")
  if [ $rc = 0 ] && [ "$(head -1 "$tmp/$p.help" | cut -d' ' -f1-2)" = "Usage: $p" ] && [ -z "$miss" ] &&
      ! grep -q '^Other flags:' "$tmp/$p.help" && ! grep -qE '^  --(logtostderr|log_dir|minloglevel)' "$tmp/$p.help"; then
    pass "$p --help lists all ${#flags[@]} of its flags in groups, glog's behind --helpfull"
  else
    fail "$p --help" "exit $rc; missing: ${miss:-none}; $(grep -c '^Other flags:' "$tmp/$p.help") 'Other flags' sections; first line: $(head -1 "$tmp/$p.help")"
  fi
  "$bin" --version > "$tmp/$p.version" 2>&1; rc=$?
  if [ $rc = 0 ] && grep -qE "^$p \(rkv\) [0-9]+\.[0-9]+\.[0-9]+$" <(head -1 "$tmp/$p.version") &&
      grep -q '^wire protocol version [0-9]' "$tmp/$p.version" && grep -q '^table format version [0-9]' "$tmp/$p.version" &&
      grep -q 'Apache License, Version 2.0' "$tmp/$p.version"; then
    pass "$p --version: $(head -1 "$tmp/$p.version"), $(sed -n 2p "$tmp/$p.version"), $(sed -n 3p "$tmp/$p.version")"
  else
    fail "$p --version" "exit $rc: $(tr '\n' ';' < "$tmp/$p.version")"
  fi
  if [ ! -f "$page" ]; then fail "$p.1 built" "no $page"; continue; fi
  MANWIDTH=100 man -l "$page" 2>"$tmp/$p.man.err" | col -b > "$tmp/$p.man"
  miss=$(missing_from "$tmp/$p.man" 7 "${flags[@]}")
  if [ -s "$tmp/$p.man" ] && [ -z "$miss" ] && grep -q "^NAME" "$tmp/$p.man" && ! [ -s "$tmp/$p.man.err" ]; then
    pass "$p.1: man -l renders it (no warning) and it lists all ${#flags[@]} flags"
  else
    fail "$p.1" "missing: ${miss:-none}; man said: $(head -3 "$tmp/$p.man.err" | tr '\n' ';')"
  fi
done
# Negative control: kvserver's page without the --memory entry must be found lacking it.
sed '/^\\fB\\-\\-memory\\fR/,+1d' "$build/man/kvserver.1" > "$tmp/cut.1"
MANWIDTH=100 man -l "$tmp/cut.1" 2>/dev/null | col -b > "$tmp/cut.man"
miss=$(missing_from "$tmp/cut.man" 7 memory listen)
if [ "$miss" = memory ]; then pass "negative control: a page lacking --memory is caught (missing: $miss)"
else fail "negative control: a page lacking --memory is caught" "missing reported: '${miss}'"; fi
exit $failed
