// SPDX-License-Identifier: Apache-2.0
// The limit options of ServerOptions checked in one place (review of issue 12): Server::Start
// refuses values kvserver's flag parsing would refuse, so that a program embedding rkv::Server
// cannot turn a limit off by accident (a negative or NaN rate, a negative cap).
// Thread safety: pure functions.
#ifndef RKV_SERVER_LIMIT_OPTIONS_H_
#define RKV_SERVER_LIMIT_OPTIONS_H_

#include "rkv/status.h"
#include "server/server_options.h"

namespace rkv {

// Ok, or Code::kInvalidArgument naming the option (field and kvserver flag) and its range:
// max_connections 1..65536, max_pending 1..4096, accept_timeout_ms 100..600000,
// max_conns_per_source 0..65536, max_pending_per_source -1..4096,
// connects_per_source_per_s 0..1e6 (not NaN), connect_burst_per_source 1..1e6.
[[nodiscard]] Status CheckLimitOptions(const ServerOptions& o);

// max_pending_per_source as the limiter applies it: -1 means max(1, max_pending / 8).
int EffectivePendingPerSource(const ServerOptions& o);

}  // namespace rkv

#endif  // RKV_SERVER_LIMIT_OPTIONS_H_
