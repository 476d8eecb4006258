// SPDX-License-Identifier: Apache-2.0
// kvctl's --json output: `kvctl stats --json` and `kvctl info --json` as one JSON object each,
// for scripts and monitoring (docs/kvctl.md lists the fields).
// Thread safety: pure functions. Ownership: they return new strings.
// Invariants: the output is one valid JSON object followed by a newline; server-supplied text
// is escaped by nlohmann::json, never pasted in raw.
#ifndef RKV_TOOLS_KVCTL_JSON_OUTPUT_H_
#define RKV_TOOLS_KVCTL_JSON_OUTPUT_H_

#include <string>

#include "rkv/client.h"

namespace rkv::kvctl {

// The STATS reply's "name value" lines as {"name": value}: a value that is a whole decimal
// number (unsigned or negative) or a finite decimal fraction becomes a JSON number, anything
// else a string. A line without a value maps to "". Later duplicates win.
std::string StatsJson(const std::string& stats_text);

// Everything `kvctl info` prints: the granted region (address, rkey, size, geometry, limits),
// the connection in use, and every connection parameter of both QPs as "local" and "peer"
// objects (GIDs as text, MTUs in bytes).
std::string InfoJson(const ServerInfo& info);

}  // namespace rkv::kvctl

#endif  // RKV_TOOLS_KVCTL_JSON_OUTPUT_H_
