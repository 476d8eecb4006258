// SPDX-License-Identifier: Apache-2.0
// LatencyHistogram: a fixed-bucket histogram of durations for the Prometheus endpoint
// (docs/metrics.md), counted on the server's request path.
// Buckets: kBoundsNs are the inclusive upper bounds (Prometheus `le`), 1 µs .. 10 s in a
// 1-2.5-5 series; a value above the last bound counts in the +Inf bucket only.
// Thread safety: Record() may run on any number of threads at once (relaxed atomic adds, no
// lock, no allocation); Read() from any thread. A Read() concurrent with Record()s is not a
// consistent cut, but its count is the sum of its buckets, so the +Inf bucket always equals
// _count in what is rendered.
// Ownership: plain value; no pointers.
#ifndef RKV_SERVER_METRICS_LATENCY_HISTOGRAM_H_
#define RKV_SERVER_METRICS_LATENCY_HISTOGRAM_H_

#include <array>
#include <atomic>
#include <cstddef>
#include <cstdint>

namespace rkv::metrics {

class LatencyHistogram {
 public:
  static constexpr size_t kBounds = 22;
  static constexpr std::array<uint64_t, kBounds> kBoundsNs = {
      1'000,         2'500,         5'000,         10'000,        25'000,      50'000,
      100'000,       250'000,       500'000,       1'000'000,     2'500'000,   5'000'000,
      10'000'000,    25'000'000,    50'000'000,    100'000'000,   250'000'000, 500'000'000,
      1'000'000'000, 2'500'000'000, 5'000'000'000, 10'000'000'000};

  struct Snapshot {
    std::array<uint64_t, kBounds + 1> buckets{};  // not cumulative; [kBounds] is above the last
    uint64_t count = 0;                           // sum of buckets
    uint64_t sum_ns = 0;
  };

  LatencyHistogram();
  LatencyHistogram(const LatencyHistogram&) = delete;
  LatencyHistogram& operator=(const LatencyHistogram&) = delete;

  // The bucket a duration of `ns` counts in: the first bound >= ns, kBounds above the last.
  static size_t BucketOf(uint64_t ns);
  void Record(uint64_t ns);
  Snapshot Read() const;

 private:
  std::array<std::atomic<uint64_t>, kBounds + 1> buckets_;
  std::atomic<uint64_t> sum_ns_{0};
};

}  // namespace rkv::metrics

#endif  // RKV_SERVER_METRICS_LATENCY_HISTOGRAM_H_
