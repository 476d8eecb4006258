// SPDX-License-Identifier: Apache-2.0
// MetricsRegistry: what kvserver's /metrics page shows (docs/metrics.md lists every metric).
// It is made from the same figures as `kvctl stats` (a StatValue list from the server, mapped
// by name to Prometheus names, types, units and help; a figure without a mapping still appears,
// as the gauge rkv_stat_<name>), plus the per-request counters and latency histograms of
// RpcMetrics, rkv_up, rkv_build_info and rkv_instance_info.
// Rate bound: Render() gathers at most once per `min_interval` and otherwise returns the last
// page, so however often scrapers ask, the few figures that take a lock of the request path
// (the heap's, the log's: a load each, never held across I/O) are read at most that often.
// Thread safety: Render() from any thread (its own mutex, which no request path takes); the
// sources must be safe to read from another thread. Families() is pure.
// Ownership: holds the sources' callback and a pointer to the RpcMetrics, which must outlive it.
#ifndef RKV_SERVER_METRICS_METRICS_REGISTRY_H_
#define RKV_SERVER_METRICS_METRICS_REGISTRY_H_

#include <chrono>
#include <cstdint>
#include <functional>
#include <mutex>
#include <string>
#include <vector>

#include "server/metrics/prometheus_text.h"
#include "server/metrics/rpc_metrics.h"
#include "server/metrics/stat_value.h"

namespace rkv::metrics {

class MetricsRegistry {
 public:
  struct Sources {
    std::function<std::vector<StatValue>()> stats;  // the `kvctl stats` figures
    const RpcMetrics* rpcs = nullptr;               // may be null (no request metrics)
  };
  MetricsRegistry(Sources sources, std::chrono::milliseconds min_interval);
  MetricsRegistry(const MetricsRegistry&) = delete;
  MetricsRegistry& operator=(const MetricsRegistry&) = delete;

  // The page (Prometheus text format 0.0.4).
  std::string Render();

  // The families for these figures. `start_time_s`: the process start, Unix seconds.
  static std::vector<MetricFamily> Families(const std::vector<StatValue>& stats,
                                            const RpcMetrics* rpcs, double start_time_s);

 private:
  const Sources sources_;
  const std::chrono::milliseconds min_interval_;
  const double start_time_s_;
  std::mutex mu_;
  std::string page_;                                  // guarded by mu_
  std::chrono::steady_clock::time_point rendered_{};  // guarded by mu_
  bool have_page_ = false;                            // guarded by mu_
};

}  // namespace rkv::metrics

#endif  // RKV_SERVER_METRICS_METRICS_REGISTRY_H_
