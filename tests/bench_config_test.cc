// SPDX-License-Identifier: Apache-2.0
#include <gtest/gtest.h>

#include "bench/config.h"

namespace rkv::bench {
namespace {
RawFlags RunFlags() {
  RawFlags r;
  r.phase = "run";
  return r;
}
std::string ErrorOf(const RawFlags& r) {
  Config c;
  return Resolve(r, &c);
}
}  // namespace

TEST(BenchConfig, CoreWorkloadsResolveToYcsbMixes) {
  Config c;
  RawFlags r = RunFlags();
  ASSERT_EQ(Resolve(r, &c), "");  // default: workload a
  EXPECT_EQ(c.workload, "a");
  EXPECT_DOUBLE_EQ(c.mix[kRead], 0.5);
  EXPECT_DOUBLE_EQ(c.mix[kUpdate], 0.5);
  EXPECT_EQ(c.distribution, Distribution::kZipfian);
  r.workload = "d";
  ASSERT_EQ(Resolve(r, &c), "");
  EXPECT_DOUBLE_EQ(c.mix[kInsert], 0.05);
  EXPECT_EQ(c.distribution, Distribution::kLatest);
  r.distribution = "uniform";  // an explicit distribution overrides the workload's
  ASSERT_EQ(Resolve(r, &c), "");
  EXPECT_EQ(c.distribution, Distribution::kUniform);
  r.workload = "f";
  ASSERT_EQ(Resolve(r, &c), "");
  EXPECT_DOUBLE_EQ(c.mix[kRmw], 0.5);
}
TEST(BenchConfig, WorkloadEIsRefusedWithTheReason) {
  RawFlags r = RunFlags();
  r.workload = "e";
  EXPECT_NE(ErrorOf(r).find("range scans"), std::string::npos) << ErrorOf(r);
  r.workload = "z";
  EXPECT_NE(ErrorOf(r).find("unknown --workload=z"), std::string::npos);
}
TEST(BenchConfig, CustomProportions) {
  Config c;
  RawFlags r = RunFlags();
  r.read = 0.7;
  r.del = 0.1;
  r.insert = 0.2;
  ASSERT_EQ(Resolve(r, &c), "");
  EXPECT_EQ(c.workload, "custom");
  EXPECT_DOUBLE_EQ(c.mix[kRead], 0.7);
  EXPECT_DOUBLE_EQ(c.mix[kUpdate], 0);
  EXPECT_DOUBLE_EQ(c.mix[kDelete], 0.1);
  r.read = 0.5;  // sums to 0.8
  EXPECT_NE(ErrorOf(r).find("add up to 0.8"), std::string::npos) << ErrorOf(r);
  // On top of a named workload, a given proportion replaces that workload's.
  RawFlags b = RunFlags();
  b.workload = "b";
  b.read = 0.9;
  b.update = 0.1;
  ASSERT_EQ(Resolve(b, &c), "");
  EXPECT_EQ(c.workload, "b+custom");
  b.update = RawFlags::kUnset;  // 0.9 + b's 0.05
  EXPECT_NE(ErrorOf(b).find("add up to 0.95"), std::string::npos);
  RawFlags n = RunFlags();
  n.rmw = -0.1;
  EXPECT_NE(ErrorOf(n).find("--rmw-proportion must be in [0, 1]"), std::string::npos);
}
TEST(BenchConfig, OptionErrorsNameTheFlag) {
  struct Case {
    void (*set)(RawFlags*);
    const char* flag;
  } cases[] = {
      {[](RawFlags* r) { r->phase = "walk"; }, "load or run"},
      {[](RawFlags* r) { r->distribution = "gauss"; }, "--distribution=gauss"},
      {[](RawFlags* r) { r->zipf_theta = 1; }, "--zipf-theta"},
      {[](RawFlags* r) { r->hotspot_data_fraction = 0; }, "--hotspot-data-fraction"},
      {[](RawFlags* r) { r->records = 0; }, "--records"},
      {[](RawFlags* r) { r->operations = -1; }, "--operations"},
      {[](RawFlags* r) { r->duration = -1; }, "--duration"},
      {[](RawFlags* r) { r->target = -5; }, "--target"},
      {[](RawFlags* r) { r->threads = 0; }, "--threads"},
      {[](RawFlags* r) { r->connections = 65; }, "--connections"},
      {[](RawFlags* r) { r->depth = 0; }, "--depth"},
      {[](RawFlags* r) { r->key_size = "abc"; }, "--key-size"},
      {[](RawFlags* r) { r->key_size = "2000"; }, "--key-size must be at most 1024"},
      {[](RawFlags* r) { r->key_size = "3"; }, "too short"},
      {[](RawFlags* r) { r->value_size = "100-10"; }, "--value-size"},
      {[](RawFlags* r) { r->value_size = "70000"; }, "at most 65536"},
  };
  for (const Case& c : cases) {
    RawFlags r = RunFlags();
    c.set(&r);
    std::string e = ErrorOf(r);
    EXPECT_NE(e.find(c.flag), std::string::npos) << "want '" << c.flag << "', got '" << e << "'";
  }
}
TEST(BenchConfig, SizeRanges) {
  SizeRange s;
  ASSERT_TRUE(ParseSizeRange("64", &s));
  EXPECT_EQ(s.min, 64u);
  EXPECT_TRUE(s.fixed());
  ASSERT_TRUE(ParseSizeRange("16-1024", &s));
  EXPECT_EQ(s.min, 16u);
  EXPECT_EQ(s.max, 1024u);
  EXPECT_FALSE(s.fixed());
  for (const char* bad : {"", "-", "1-", "-5", "x", "5-3", "1--2", "99999999999"})
    EXPECT_FALSE(ParseSizeRange(bad, &s)) << bad;
}
}  // namespace rkv::bench
