// SPDX-License-Identifier: Apache-2.0
// Histogram: latency recorder with bounded memory and <= 1/64 relative error.
// Values (microseconds) below 128 are exact; above, each power-of-two range is split into 64
// sub-buckets (log-linear, like HdrHistogram with 2 significant digits).
// Thread safety: none; use one per thread and Merge.
#ifndef RKV_BENCH_HISTOGRAM_H_
#define RKV_BENCH_HISTOGRAM_H_

#include <cstddef>
#include <cstdint>
#include <utility>
#include <vector>

namespace rkv::bench {

class Histogram {
 public:
  Histogram();
  void Record(uint64_t value);
  void Merge(const Histogram& other);
  void Clear();
  uint64_t count() const { return count_; }
  uint64_t min() const { return count_ ? min_ : 0; }
  uint64_t max() const { return max_; }
  double mean() const { return count_ ? double(sum_) / double(count_) : 0; }
  // Smallest recorded bucket value v such that at least q of the values are <= v (q in [0,1]).
  uint64_t Percentile(double q) const;
  // Non-empty buckets as (lower bound, count) pairs, for JSON output.
  std::vector<std::pair<uint64_t, uint64_t>> Buckets() const;

 private:
  static constexpr int kSubBits = 6;  // 64 sub-buckets per power of two
  static size_t Index(uint64_t v);
  static uint64_t LowerBound(size_t index);
  std::vector<uint64_t> counts_;
  uint64_t count_ = 0, sum_ = 0, min_ = UINT64_MAX, max_ = 0;
};

}  // namespace rkv::bench

#endif  // RKV_BENCH_HISTOGRAM_H_
