# SPDX-License-Identifier: Apache-2.0
# pytest fixtures of the rkv Python tests (python/tests/run.sh starts the servers and sets these).
#
# Contract: the servers come from the environment, set by tests/integration/python.sh inside the
# RDMA sandbox:
#   RKV_PY_ADDR        HOST:PORT of a kvserver with --auth_token_file
#   RKV_PY_TOKEN_FILE  its token file (mode 600, in a 0700 directory)
#   RKV_PY_WRONG_TOKEN_FILE  another valid-looking token
#   RKV_PY_OPEN_ADDR   HOST:PORT of a kvserver without authentication
#   RKV_PY_DEAD_ADDR   HOST:PORT where nothing listens
#   RKV_PY_HOST        the RDMA interface's address (for a silent TCP listener)
# Tests that need a server are skipped when these are unset (e.g. pytest run on a host without
# RDMA); the rest (options, exceptions) run anywhere. Fixtures are per test; no shared state.
import os

import pytest

import rkv


def _env(name):
    value = os.environ.get(name)
    if not value:
        pytest.skip(f"{name} is not set (run python/tests/run.sh BUILD_DIR for the sandbox)")
    return value


@pytest.fixture
def addr():
    return _env("RKV_PY_ADDR")


@pytest.fixture
def token_file():
    return _env("RKV_PY_TOKEN_FILE")


@pytest.fixture
def wrong_token_file():
    return _env("RKV_PY_WRONG_TOKEN_FILE")


@pytest.fixture
def open_addr():
    return _env("RKV_PY_OPEN_ADDR")


@pytest.fixture
def dead_addr():
    return _env("RKV_PY_DEAD_ADDR")


@pytest.fixture
def host():
    return _env("RKV_PY_HOST")


@pytest.fixture
def client(addr, token_file):
    """A Client of the authenticating server (closed after the test)."""
    with rkv.Client(addr, auth_token_file=token_file, connect_timeout_ms=10000,
                    rpc_timeout_ms=10000) as c:
        yield c
