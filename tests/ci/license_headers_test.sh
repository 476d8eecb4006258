#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# Every source file of rkv says its licence (issue 22): "SPDX-License-Identifier: Apache-2.0"
# in its first four lines (a #! line may come first). Source files: the tracked *.cc, *.h, *.py, *.sh,
# *.cmake, CMakeLists.txt, *.in (but python/METADATA.in, which has no comment syntax), the
# Debian maintainer scripts and debian/rules, fuzz/run, .ci/run, and every tracked executable script
# (a #! line) under tools/, bench/ and fuzz/. A negative control checks a file without it.
#   tests/ci/license_headers_test.sh [SOURCE_DIR]
set -uo pipefail
src=$(cd "${1:-$(dirname "$0")/../..}" && pwd) || exit 2
cd "$src" || exit 2
if git rev-parse --is-inside-work-tree >/dev/null 2>&1; then
  list() { git ls-files; }
else  # a tarball: every file
  list() { find . -type f -not -path './.git/*' -not -path './build*' | sed 's|^\./||'; }
fi
has_spdx() { head -n 4 "$1" | grep -q 'SPDX-License-Identifier: Apache-2.0'; }
is_source() {
  case "$1" in
    python/METADATA.in) return 1 ;;
    *.cc | *.h | *.py | *.sh | *.cmake | */CMakeLists.txt | CMakeLists.txt | *.in) return 0 ;;
    debian/rules | debian/*.postinst | debian/*.postrm | fuzz/run | .ci/run) return 0 ;;
    tools/* | bench/* | fuzz/*) [ -f "$1" ] && head -c 2 "$1" | grep -q '#!' ;;
    *) return 1 ;;
  esac
}
missing=() n=0
while IFS= read -r f; do
  [ -f "$f" ] || continue
  is_source "$f" || continue
  n=$((n + 1))
  has_spdx "$f" || missing+=("$f")
done < <(list)
if [ "$n" -ge 200 ] && [ ${#missing[@]} -eq 0 ]; then
  echo "[case PASS] licence: all $n source files carry SPDX-License-Identifier: Apache-2.0"
  rc=0
else
  echo "[case FAIL] licence: ${#missing[@]} of $n source files lack the SPDX line: ${missing[*]:0:20}"
  rc=1
fi
tmp=$(mktemp)
printf '// a file without its licence line\nint x;\n' > "$tmp"
if has_spdx "$tmp"; then
  echo "[case FAIL] licence: negative control (a file without the line was accepted)"; rc=1
else
  echo "[case PASS] licence: negative control (a file without the line is caught)"
fi
rm -f "$tmp"
exit $rc
