// SPDX-License-Identifier: Apache-2.0
#include "bench/histogram.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <random>
#include <vector>

namespace rkv::bench {
TEST(Histogram, ExactForSmallValues) {
  Histogram h;
  for (uint64_t v = 1; v <= 100; ++v) h.Record(v);
  EXPECT_EQ(h.count(), 100u);
  EXPECT_EQ(h.min(), 1u);
  EXPECT_EQ(h.max(), 100u);
  EXPECT_DOUBLE_EQ(h.mean(), 50.5);
  EXPECT_EQ(h.Percentile(0.5), 50u);
  EXPECT_EQ(h.Percentile(0.99), 99u);
  EXPECT_EQ(h.Percentile(1.0), 100u);
}
TEST(Histogram, PercentilesOfExponentialWithinOnePercent) {
  std::mt19937_64 rng(3);
  std::exponential_distribution<double> d(1.0 / 200.0);  // mean 200 us
  Histogram h, a, b;
  std::vector<uint64_t> all;
  for (int i = 0; i < 200000; ++i) {
    uint64_t v = uint64_t(d(rng)) + 1;
    all.push_back(v);
    (i % 2 ? a : b).Record(v);
  }
  h.Merge(a);
  h.Merge(b);
  std::sort(all.begin(), all.end());
  for (double q : {0.5, 0.95, 0.99, 0.999}) {
    double exact = double(all[size_t(q * all.size()) - 1]);
    EXPECT_NEAR(double(h.Percentile(q)), exact, exact * 0.02 + 1) << q;
  }
  EXPECT_EQ(h.count(), all.size());
  EXPECT_EQ(h.max(), all.back());
}
TEST(Histogram, HugeValuesAndEmpty) {
  Histogram h;
  EXPECT_EQ(h.Percentile(0.5), 0u);
  h.Record(uint64_t(1) << 40);
  h.Record(0);
  EXPECT_EQ(h.max(), uint64_t(1) << 40);
  EXPECT_EQ(h.Percentile(1.0), uint64_t(1) << 40);
  uint64_t total = 0;
  for (auto& [lo, n] : h.Buckets()) total += n;
  EXPECT_EQ(total, 2u);
}
}  // namespace rkv::bench
