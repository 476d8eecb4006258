// SPDX-License-Identifier: Apache-2.0
// RpcMetrics: the server's per-request figures for the Prometheus endpoint: replies posted by
// request type and reply status (a fixed [op][code] array of counters, so the label sets are
// bounded whatever a client sends), and per type a latency histogram of the time from the
// request's receive completion being polled to its reply being posted (docs/metrics.md).
// Op index: 1..6 are wire::Op (put, delete, stats, params, snapshot, open); 0 ("unknown") is a
// request that did not decode or carried an op this server does not know. Code index: rkv::Code
// 0..kMaxCode; anything else is kCodes - 1 ("OTHER").
// Thread safety: Record() on any thread at once (relaxed atomics only, no lock, no allocation:
// it is on the request path); the readers from any thread.
// Ownership: plain value, owned by ServerCounters.
#ifndef RKV_SERVER_METRICS_RPC_METRICS_H_
#define RKV_SERVER_METRICS_RPC_METRICS_H_

#include <array>
#include <atomic>
#include <cstddef>
#include <cstdint>

#include "server/metrics/latency_histogram.h"

namespace rkv::metrics {

class RpcMetrics {
 public:
  static constexpr size_t kOps = 11;
  static constexpr size_t kMaxCode = 17;  // rkv::Code::kUnavailable
  static constexpr size_t kCodes = kMaxCode + 2;

  RpcMetrics();
  RpcMetrics(const RpcMetrics&) = delete;
  RpcMetrics& operator=(const RpcMetrics&) = delete;

  static size_t OpIndex(uint8_t wire_op) { return wire_op < kOps ? wire_op : 0; }
  static size_t CodeIndex(uint16_t code) { return code <= kMaxCode ? code : kCodes - 1; }
  // Label values: "unknown", "put", "delete", "stats", "params", "snapshot", "open".
  static const char* OpName(size_t op_index);
  // "OK", "NOT_FOUND", ... (rkv::CodeName), "OTHER" for the last index.
  static const char* CodeLabel(size_t code_index);

  // One reply posted: `wire_op` and `code` as in the reply header, `ns` since the request's
  // receive completion was polled.
  void Record(uint8_t wire_op, uint16_t code, uint64_t ns) {
    size_t op = OpIndex(wire_op);
    replies_[op][CodeIndex(code)].fetch_add(1, std::memory_order_relaxed);
    latency_[op].Record(ns);
  }
  uint64_t replies(size_t op_index, size_t code_index) const {
    return replies_[op_index][code_index].load(std::memory_order_relaxed);
  }
  const LatencyHistogram& latency(size_t op_index) const { return latency_[op_index]; }

 private:
  std::array<std::array<std::atomic<uint64_t>, kCodes>, kOps> replies_;
  std::array<LatencyHistogram, kOps> latency_;
};

}  // namespace rkv::metrics

#endif  // RKV_SERVER_METRICS_RPC_METRICS_H_
