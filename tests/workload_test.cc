// SPDX-License-Identifier: Apache-2.0
#include "bench/workload.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <random>
#include <set>
#include <string>
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
  EXPECT_EQ(CheckValue("user1", mix), ValueCheck::kWrong);
  EXPECT_EQ(CheckValue("user2", v), ValueCheck::kWrong);
}
// Every size kvbench can write is verifiable (issue 13: `run --verify` after any load), and a
// value written by something else is told apart from a torn one where a marker fits.
TEST(Workload, EverySizeIsVerifiableAndForeignValuesAreNamed) {
  for (size_t n = 0; n <= 300; ++n) {
    std::string v(n, '\0');
    FillValue("user7", 1000 + n, &v);
    ASSERT_EQ(v.size(), n);
    EXPECT_EQ(CheckValue("user7", v), ValueCheck::kOk) << n;
    if (n == 0) continue;
    EXPECT_NE(CheckValue("user8", v), ValueCheck::kOk) << n;
    std::string flipped = v;
    flipped[n - 1] ^= 0x20;
    EXPECT_NE(CheckValue("user7", flipped), ValueCheck::kOk) << n;
  }
  EXPECT_EQ(CheckValue("user1", "hello world, plain text"), ValueCheck::kForeign);
  EXPECT_EQ(CheckValue("user1", std::string(64, 'x')), ValueCheck::kForeign);
  EXPECT_EQ(CheckValue("user1", "short"), ValueCheck::kMismatch);
  EXPECT_NE(std::string(ValueCheckText(ValueCheck::kForeign)).find("not written by kvbench"),
            std::string::npos);
}
namespace {
Config ChooserConfig(Distribution d, uint64_t records) {
  Config c;
  c.distribution = d;
  c.records = records;
  return c;
}
}  // namespace
TEST(Workload, LatestFavoursTheNewestKeys) {
  KeyChooser k(ChooserConfig(Distribution::kLatest, 1000));
  std::mt19937_64 rng(3);
  const uint64_t inserted = 1500;  // 500 inserted during the run
  uint64_t newest = 0, newest10 = 0;
  const int draws = 100000;
  for (int i = 0; i < draws; ++i) {
    uint64_t n = k.Next(rng, inserted);
    ASSERT_LT(n, inserted);
    newest += n == inserted - 1;
    newest10 += n >= inserted - 10;
  }
  // The newest key takes the zipfian top share (1/zeta(1000, 0.99) ~ 0.13).
  EXPECT_NEAR(double(newest) / draws, 1.0 / Zipfian(1000, 0.99).zetan(), 0.01);
  EXPECT_GT(double(newest10) / draws, 0.3);
}
TEST(Workload, HotspotSendsItsShareToTheHotSet) {
  Config c = ChooserConfig(Distribution::kHotspot, 1000);
  c.hotspot_data_fraction = 0.2;
  c.hotspot_opn_fraction = 0.8;
  KeyChooser k(c);
  std::mt19937_64 rng(4);
  const int draws = 100000;
  uint64_t hot = 0;
  for (int i = 0; i < draws; ++i) {
    uint64_t n = k.Next(rng, 1000);
    ASSERT_LT(n, 1000u);
    hot += n < 200;
  }
  EXPECT_NEAR(double(hot) / draws, 0.8, 0.01);
}
TEST(Workload, UniformAndScrambledZipfianCoverTheKeySpace) {
  for (Distribution d : {Distribution::kUniform, Distribution::kZipfian}) {
    KeyChooser k(ChooserConfig(d, 100));
    std::mt19937_64 rng(5);
    std::vector<int> seen(100);
    for (int i = 0; i < 50000; ++i) ++seen[k.Next(rng, 100)];
    int covered = 0;
    for (int s : seen) covered += s > 0;
    EXPECT_GE(covered, d == Distribution::kUniform ? 100 : 60) << DistributionName(d);
  }
}
// --distribution=zipfian is YCSB's scrambled zipfian: zipfian popularity (item 0 hottest), with
// item r sent to key Fnv64(r) % n, so the hot keys are spread over the key space. Uniform fails
// the first check (the top key's share would be 1/n), plain zipfian (key r = item r) the last
// two (keys 0..9 would take about 39% of the draws, the upper half of the keys about 9%).
TEST(Workload, ScrambledZipfianIsSkewedAndHashedOverTheKeySpace) {
  const uint64_t n = 1000;
  KeyChooser k(ChooserConfig(Distribution::kZipfian, n));
  std::mt19937_64 rng(6);
  std::vector<uint64_t> count(n);
  const int draws = 200000;
  for (int i = 0; i < draws; ++i) {
    const uint64_t key = k.Next(rng, n);
    ASSERT_LT(key, n);
    ++count[key];
  }
  const uint64_t hottest = uint64_t(std::max_element(count.begin(), count.end()) - count.begin());
  EXPECT_EQ(hottest, Fnv64(0) % n) << "the hottest key is not where item 0 hashes to";
  EXPECT_NEAR(double(count[hottest]) / draws, 1.0 / Zipfian(n, 0.99).zetan(), 0.01);
  uint64_t low10 = 0, upper_half = 0;
  for (uint64_t i = 0; i < 10; ++i) low10 += count[i];
  for (uint64_t i = n / 2; i < n; ++i) upper_half += count[i];
  EXPECT_LT(double(low10) / draws, 0.05) << "keys 0..9 are the hot ones: not scrambled";
  EXPECT_GT(double(upper_half) / draws, 0.3) << "the upper half of the keys is cold";
}
TEST(Workload, KeyNamesHaveTheAskedSizeAndStayDistinct) {
  std::set<std::string> names;
  for (uint64_t n = 0; n < 2000; ++n) {
    std::string a = KeyName(n, SizeRange{8, 8});
    ASSERT_EQ(a.size(), 8u);
    names.insert(a);
    std::string b = KeyName(n, SizeRange{24, 100});
    ASSERT_GE(b.size(), 24u);
    ASSERT_LE(b.size(), 100u);
    ASSERT_EQ(b, KeyName(n, SizeRange{24, 100}));  // a key keeps its name
  }
  EXPECT_EQ(names.size(), 2000u);
  EXPECT_EQ(KeyName(5, SizeRange{0, 0}), KeyOf(5));
}
}  // namespace rkv::bench
