// SPDX-License-Identifier: Apache-2.0
// StatValue: one named figure of `kvctl stats` (server/metrics/counters.h, Server::CollectStats),
// the one list both the stats text and the Prometheus endpoint are made from. Thread safety,
// ownership: plain value; `name` points to a string literal.
#ifndef RKV_SERVER_METRICS_STAT_VALUE_H_
#define RKV_SERVER_METRICS_STAT_VALUE_H_

#include <cstdint>

namespace rkv {

struct StatValue {
  const char* name = "";
  bool is_double = false;
  uint64_t u = 0;  // when !is_double
  double d = 0;    // when is_double
  static StatValue U(const char* name, uint64_t v) { return {name, false, v, 0}; }
  static StatValue D(const char* name, double v) { return {name, true, 0, v}; }
};

}  // namespace rkv

#endif  // RKV_SERVER_METRICS_STAT_VALUE_H_
