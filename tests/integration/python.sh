#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# ctest `python`: the Python module's pytest suite in the RDMA sandbox (python/tests/run.sh has
# the details).   tests/integration/python.sh BUILD_DIR
exec "$(dirname "$0")/../../python/tests/run.sh" "$@"
