#include "bench/workload.h"

#include <gtest/gtest.h>

#include <random>
#include <vector>

namespace rkv::bench {
TEST(Workload, KeysLookLikeYcsb) {
  EXPECT_EQ(KeyOf(0).rfind("user", 0), 0u);
  EXPECT_NE(KeyOf(1), KeyOf(2));
  EXPECT_EQ(KeyOf(7), KeyOf(7));
}
TEST(Workload, ZipfianTopKeyShareMatchesTheory) {
  const uint64_t n = 1000;
  Zipfian z(n, 0.99);
  std::mt19937_64 rng(1);
  std::uniform_real_distribution<double> u(0, 1);
  std::vector<uint64_t> count(n);
  const int draws = 200000;
  for (int i = 0; i < draws; ++i) {
    uint64_t k = z.Next(u(rng));
    ASSERT_LT(k, n);
    ++count[k];
  }
  double expected_top = 1.0 / z.zetan();  // P(item 0) = 1 / zeta(n, theta)
  EXPECT_NEAR(double(count[0]) / draws, expected_top, 0.01);
  EXPECT_GT(count[0], count[1]);
  EXPECT_GT(count[1], count[10]);
  EXPECT_GT(count[10], count[500]);
}
TEST(Workload, VerifiedValuesDetectTearsAndWrongKeys) {
  std::string v(64, '\0');
  FillValue("user1", 42, &v);
  EXPECT_TRUE(VerifyValue("user1", v));
  EXPECT_FALSE(VerifyValue("user2", v));
  std::string torn = v;
  torn[40] ^= 1;
  EXPECT_FALSE(VerifyValue("user1", torn));
  std::string other(64, '\0');
  FillValue("user1", 43, &other);
  std::string mix = v.substr(0, 32) + other.substr(32);
  EXPECT_FALSE(VerifyValue("user1", mix));
  EXPECT_FALSE(VerifyValue("user1", "short"));
}
}  // namespace rkv::bench
