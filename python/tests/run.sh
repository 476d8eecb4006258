#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# The rkv Python module's pytest suite (python/tests/test_client.py) on a real RDMA stack.
#   python/tests/run.sh BUILD_DIR               (ctest via tests/integration/python.sh)
#   python/tests/run.sh BUILD_DIR ADDR WORKDIR  (inside the sandbox)
# Outside the sandbox: installs the build into WORKDIR/prefix (cmake --install; the build
# directory is read-only inside the VM) and re-executes itself in tools/rdma-sandbox. Inside:
# starts a kvserver with --auth_token_file (token in a 0700 directory under /tmp, plus a wrong
# token) and one without authentication, runs pytest -v against them with PYTHONPATH at
# BUILD_DIR/python, then a few tests again against the installed package (PYTHONPATH at
# WORKDIR/prefix/lib/python3/dist-packages, nothing of the build tree on any path). Prints one
# `[case PASS|FAIL|SKIP] python: NAME` line per test (from pytest's junit XML) and exits with pytest's
# status (non-zero if either run failed, the install failed or a server died).
# Environment: PY_PORT_BASE / RKV_PY_PORT_BASE (7600), RKV_PY_PYTHON (/usr/bin/python3: Debian's
# interpreter, which has python3-pytest).
set -uo pipefail
here=$(cd "$(dirname "$0")" && pwd)
src=$(cd "$here/../.." && pwd)
build=$(cd "${1:?usage: run.sh BUILD_DIR [ADDR WORKDIR]}" && pwd) || exit 2
if [ $# -eq 1 ] && [ -z "${RKV_IN_SANDBOX:-}" ]; then
  export RKV_IN_SANDBOX=1
  [ -z "${PY_PORT_BASE:-}" ] || export RKV_PY_PORT_BASE=$PY_PORT_BASE  # only RKV_* reaches the VM
  work=$(mktemp -d /tmp/rkv-py.XXXXXX) || exit 2
  cmake --install "$build" --prefix "$work/prefix" > "$work/install.log" 2>&1
  echo $? > "$work/install.rc"
  exec "$src/tools/rdma-sandbox" --timeout 400 -- sh -c \
    "\"$here/run.sh\" \"$build\" \$RKV_SANDBOX_ADDR \"$work\""
fi
addr=${2:?usage: run.sh BUILD_DIR ADDR WORKDIR}
work=${3:?usage: run.sh BUILD_DIR ADDR WORKDIR}
mkdir -p "$work" || exit 2
work=$(cd "$work" && pwd)
KNOB_PREFIX=PY
. "$src/tests/integration/common.sh"
PORT=$(knob PORT_BASE 7600)
PY=${RKV_PY_PYTHON:-/usr/bin/python3}
export PYTHONDONTWRITEBYTECODE=1
# pytest's output capture truncates unlinked temporary files, which the VM's 9p /tmp cannot do
# (ENOENT): temporary files go to a tmpfs when there is one, else capture stays in Python.
capture=fd
if shm=$(mktemp -d /dev/shm/rkv-py.XXXXXX 2>/dev/null); then
  export TMPDIR=$shm
else
  shm=
  capture=sys
fi

pids=()
cleanup() {
  for p in "${pids[@]}"; do kill "$p" 2>/dev/null; done
  wait 2>/dev/null
  [ -z "${shm:-}" ] || rm -rf "$shm"
}
trap cleanup EXIT

if ! "$PY" -c 'import pytest' 2>/dev/null; then
  echo "python: $PY cannot import pytest (apt-get install python3-pytest)"
  exit 1
fi

# Tokens of 64 bytes plus a newline (as `openssl rand -hex 32 > token` writes them).
tokdir=$(mktemp -d /tmp/rkv-py-token.XXXXXX) || exit 2
chmod 700 "$tokdir"
printf 'python-test-token-0123456789abcdef0123456789abcdef0123456789abcd\n' > "$tokdir/token"
printf 'a-wrong-token-for-tests-fedcba9876543210fedcba9876543210fedcba98\n' > "$tokdir/wrong"
chmod 600 "$tokdir/token" "$tokdir/wrong"

wait_up() { for _ in $(seq 300); do grep -q "kvserver listening on" "$1" && return 0; sleep 0.1; done; return 1; }
"$build/kvserver" --listen="$addr:$PORT" --memory=64M --workers=2 \
  --auth_token_file="$tokdir/token" --exchange=tcp > "$work/kvserver-auth.log" 2>&1 &
auth_pid=$!
pids+=($auth_pid)
"$build/kvserver" --listen="$addr:$((PORT + 1))" --memory=16M --workers=2 \
  > "$work/kvserver-open.log" 2>&1 &
open_pid=$!
pids+=($open_pid)
if ! wait_up "$work/kvserver-auth.log" || ! wait_up "$work/kvserver-open.log"; then
  echo "python: the kvservers did not start"; tail -n 5 "$work"/kvserver-*.log
  exit 1
fi

export RKV_PY_ADDR="$addr:$PORT" RKV_PY_OPEN_ADDR="$addr:$((PORT + 1))"
export RKV_PY_DEAD_ADDR="$addr:$((PORT + 2))" RKV_PY_HOST="$addr"
export RKV_PY_TOKEN_FILE="$tokdir/token" RKV_PY_WRONG_TOKEN_FILE="$tokdir/wrong"

# One `[case PASS|FAIL] python: PREFIXNAME` line per test case of a junit XML file.
cases() {
  "$PY" - "$1" "$2" <<'EOF'
import sys
import xml.etree.ElementTree as ET
path, prefix = sys.argv[1], sys.argv[2]
try:
    root = ET.parse(path).getroot()
except (OSError, ET.ParseError) as e:
    print(f"[case FAIL] python: {prefix}junit-xml ({e})")
    sys.exit(0)
for case in root.iter("testcase"):
    name = prefix + case.get("name")
    if case.find("skipped") is not None:
        # tools/ci-summary fails a skip that tools/ci-allowed-skips does not allow.
        print(f"[case SKIP] python: {name} ({case.find('skipped').get('message', '')})")
    elif case.find("failure") is not None or case.find("error") is not None:
        print(f"[case FAIL] python: {name}")
    else:
        print(f"[case PASS] python: {name}")
EOF
}
pytest_run() {  # pytest_run JUNIT_XML PYTHONPATH [pytest args...]
  local xml=$1 path=$2
  shift 2
  (cd "$work" && PYTHONPATH="$path" "$PY" -m pytest -v -rA -p no:cacheprovider \
    --capture=$capture --junitxml="$xml" "$src/python/tests" "$@")
}

# 1. The module of the build tree.
pytest_run "$work/junit.xml" "$build/python" -k "not installed_module"
rc=$?
cases "$work/junit.xml" ""

# 2. The installed package: the install step's result, then a few tests with only the prefix.
installed="$work/prefix/lib/python3/dist-packages"
if [ "$(cat "$work/install.rc" 2>/dev/null)" != 0 ] || [ ! -f "$installed/rkv/__init__.py" ]; then
  echo "[case FAIL] python: installed/cmake-install (see $work/install.log)"
  tail -n 5 "$work/install.log"
  rc=1
else
  echo "[case PASS] python: installed/cmake-install"
  RKV_PY_EXPECT_DIR="$work/prefix" pytest_run "$work/junit-installed.xml" "$installed" \
    -k "installed_module or put_get_delete_roundtrip or auth_wrong_token"
  irc=$?
  cases "$work/junit-installed.xml" "installed/"
  [ $irc = 0 ] || rc=$irc
fi

# The servers must have survived everything the tests did.
for p in $auth_pid $open_pid; do
  if ! kill -0 "$p" 2>/dev/null; then
    echo "[case FAIL] python: servers-alive (kvserver $p died; logs in $work)"
    rc=1
  fi
done
if grep -Eq "$CRASH_PATTERN" "$work"/kvserver-*.log; then
  echo "[case FAIL] python: servers-clean ($(grep -Eh "$CRASH_PATTERN" "$work"/kvserver-*.log | head -n 1))"
  rc=1
fi
echo "python: logs in $work; exit $rc"
exit $rc
