// SPDX-License-Identifier: Apache-2.0
#include "bench/histogram.h"

#include <algorithm>
#include <cmath>

namespace rkv::bench {

Histogram::Histogram() : counts_((64 - kSubBits) * (1 << kSubBits) + (2 << kSubBits), 0) {}

size_t Histogram::Index(uint64_t v) {
  if (v < (2u << kSubBits)) return size_t(v);
  int msb = 63 - __builtin_clzll(v);  // >= kSubBits + 1
  int shift = msb - kSubBits;
  uint64_t sub = (v >> shift) - (1u << kSubBits);  // 0..63
  return (2u << kSubBits) + size_t(shift - 1) * (1u << kSubBits) + size_t(sub);
}

uint64_t Histogram::LowerBound(size_t index) {
  if (index < (2u << kSubBits)) return index;
  size_t rel = index - (2u << kSubBits);
  int shift = int(rel >> kSubBits) + 1;
  uint64_t sub = rel & ((1u << kSubBits) - 1);
  return ((1u << kSubBits) + sub) << shift;
}

void Histogram::Record(uint64_t v) {
  ++counts_[Index(v)];
  ++count_;
  sum_ += v;
  min_ = std::min(min_, v);
  max_ = std::max(max_, v);
}

void Histogram::Merge(const Histogram& o) {
  for (size_t i = 0; i < counts_.size(); ++i) counts_[i] += o.counts_[i];
  count_ += o.count_;
  sum_ += o.sum_;
  min_ = std::min(min_, o.min_);
  max_ = std::max(max_, o.max_);
}

void Histogram::Clear() {
  std::fill(counts_.begin(), counts_.end(), 0);
  count_ = sum_ = max_ = 0;
  min_ = UINT64_MAX;
}

uint64_t Histogram::Percentile(double q) const {
  if (count_ == 0) return 0;
  // The rank-th smallest value, rank = ceil(q * count): at least q of the values are <= it.
  uint64_t rank = uint64_t(std::ceil(q * double(count_) - 1e-9));
  if (rank < 1) rank = 1;
  if (rank > count_) rank = count_;
  uint64_t seen = 0;
  for (size_t i = 0; i < counts_.size(); ++i) {
    seen += counts_[i];
    if (seen >= rank) return std::clamp(LowerBound(i), min_, max_);
  }
  return max_;
}

std::vector<std::pair<uint64_t, uint64_t>> Histogram::Buckets() const {
  std::vector<std::pair<uint64_t, uint64_t>> out;
  for (size_t i = 0; i < counts_.size(); ++i)
    if (counts_[i]) out.emplace_back(LowerBound(i), counts_[i]);
  return out;
}

}  // namespace rkv::bench
