// SPDX-License-Identifier: Apache-2.0
// Command-line flags for every connection parameter, shared by kvserver, kvctl and kvbench
// (gflags; defined in conn_flags.cc, so each binary that links rkv_flags has them all).
// ConnFlags() turns them into ExchangeOptions + QpSettings, checking ranges, with a message
// that names the flag. Role decides the defaults that differ: the server never READs from a
// client (max_rd_atomic 0), a client never serves READs (max_dest_rd_atomic 0).
// Thread safety: call after gflags parsed the command line, from the main thread.
#ifndef RKV_COMMON_VERBS_CONN_FLAGS_H_
#define RKV_COMMON_VERBS_CONN_FLAGS_H_

#include <string>
#include <vector>

#include "common/cli/usage.h"
#include "rkv/connection_params.h"
#include "rkv/status.h"

namespace rkv {

enum class Role { kServer, kClient };
[[nodiscard]] Status ConnFlags(Role role, ExchangeOptions* exchange, QpSettings* qp);

// The flags above in --help's and the manual pages' groups (common/cli/usage.h): parameter
// exchange, device and path, queue pair, testing.
std::vector<cli::FlagGroup> ConnFlagGroups();
// Appends those groups to a program's usage and returns it (kvserver, kvctl, kvbench).
cli::Usage WithConnFlagGroups(cli::Usage usage);

}  // namespace rkv

#endif  // RKV_COMMON_VERBS_CONN_FLAGS_H_
