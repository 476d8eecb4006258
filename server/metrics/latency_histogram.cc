// SPDX-License-Identifier: Apache-2.0
#include "server/metrics/latency_histogram.h"

namespace rkv::metrics {

LatencyHistogram::LatencyHistogram() {
  for (auto& b : buckets_) b.store(0, std::memory_order_relaxed);
}

size_t LatencyHistogram::BucketOf(uint64_t ns) {
  // Linear: request latencies land in the first few buckets.
  size_t i = 0;
  while (i < kBounds && ns > kBoundsNs[i]) ++i;
  return i;
}

void LatencyHistogram::Record(uint64_t ns) {
  buckets_[BucketOf(ns)].fetch_add(1, std::memory_order_relaxed);
  sum_ns_.fetch_add(ns, std::memory_order_relaxed);
}

LatencyHistogram::Snapshot LatencyHistogram::Read() const {
  Snapshot s;
  for (size_t i = 0; i < buckets_.size(); ++i) {
    s.buckets[i] = buckets_[i].load(std::memory_order_relaxed);
    s.count += s.buckets[i];
  }
  s.sum_ns = sum_ns_.load(std::memory_order_relaxed);
  return s;
}

}  // namespace rkv::metrics
