// SPDX-License-Identifier: Apache-2.0
#include "server/metrics/rpc_metrics.h"

#include "rkv/status.h"

namespace rkv::metrics {

RpcMetrics::RpcMetrics() {
  for (auto& row : replies_)
    for (auto& c : row) c.store(0, std::memory_order_relaxed);
}

const char* RpcMetrics::OpName(size_t op_index) {
  static constexpr const char* kNames[kOps] = {
      "unknown", "put",           "delete",      "stats",          "params",   "snapshot",
      "open",    "migrate_begin", "migrate_put", "migrate_delete", "replicate"};
  return op_index < kOps ? kNames[op_index] : kNames[0];
}

const char* RpcMetrics::CodeLabel(size_t code_index) {
  if (code_index > kMaxCode) return "OTHER";
  return CodeName(static_cast<Code>(code_index));
}

}  // namespace rkv::metrics
