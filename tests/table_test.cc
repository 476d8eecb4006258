#include "server/table.h"

#include <gtest/gtest.h>

#include <map>
#include <random>
#include <thread>
#include <vector>

#include "common/lookup.h"

namespace rkv {
namespace {
struct TestTable {
  explicit TestTable(uint64_t size, uint32_t buckets = 0) : mem(size) {
    EXPECT_TRUE(layout::ComputeGeometry(size, buckets, 0.25, 1234, &geo));
    table = std::make_unique<Table>(mem.data(), geo);
  }
  std::vector<uint8_t> mem;
  layout::Geometry geo;
  std::unique_ptr<Table> table;
};
}  // namespace

TEST(Table, PutGetDeleteOverwrite) {
  TestTable t(8 << 20);
  std::string v;
  EXPECT_TRUE(t.table->Get("a", &v).IsNotFound());
  ASSERT_TRUE(t.table->Put("a", "1").ok());
  ASSERT_TRUE(t.table->Get("a", &v).ok());
  EXPECT_EQ(v, "1");
  ASSERT_TRUE(t.table->Put("a", std::string(5000, 'b')).ok());  // inline -> indirect
  ASSERT_TRUE(t.table->Get("a", &v).ok());
  EXPECT_EQ(v, std::string(5000, 'b'));
  ASSERT_TRUE(t.table->Put("a", "").ok());  // indirect -> inline empty value
  ASSERT_TRUE(t.table->Get("a", &v).ok());
  EXPECT_EQ(v, "");
  EXPECT_EQ(t.table->entries(), 1u);
  EXPECT_EQ(t.table->heap_bytes_in_use(), 0u);
  ASSERT_TRUE(t.table->Delete("a").ok());
  EXPECT_TRUE(t.table->Delete("a").IsNotFound());
  EXPECT_TRUE(t.table->Get("a", &v).IsNotFound());
  EXPECT_EQ(t.table->entries(), 0u);
}
TEST(Table, LimitsAndErrors) {
  TestTable t(8 << 20);
  EXPECT_EQ(t.table->Put("", "x").code(), Code::kInvalidArgument);
  EXPECT_EQ(t.table->Put(std::string(1025, 'k'), "x").code(), Code::kTooLarge);
  EXPECT_EQ(t.table->Put("k", std::string(65537, 'v')).code(), Code::kTooLarge);
  ASSERT_TRUE(t.table->Put(std::string(1024, 'k'), std::string(65536, 'v')).ok());
  std::string v;
  ASSERT_TRUE(t.table->Get(std::string(1024, 'k'), &v).ok());
  EXPECT_EQ(v.size(), 65536u);
}
TEST(Table, BinaryKeysDistinct) {
  TestTable t(8 << 20);
  std::string k1("a\0b", 3), k2("a\0c", 3);
  ASSERT_TRUE(t.table->Put(k1, "1").ok());
  ASSERT_TRUE(t.table->Put(k2, "2").ok());
  std::string v;
  ASSERT_TRUE(t.table->Get(k1, &v).ok());
  EXPECT_EQ(v, "1");
  ASSERT_TRUE(t.table->Get(k2, &v).ok());
  EXPECT_EQ(v, "2");
}
TEST(Table, FillsPastNinetyPercentThenTableFull) {
  TestTable t(4 << 20, 512);
  uint64_t n = 0;
  Status s;
  for (;; ++n) {
    s = t.table->Put("user" + std::to_string(n), "value" + std::to_string(n));
    if (!s.ok()) break;
  }
  EXPECT_EQ(s.code(), Code::kTableFull);
  double load = double(n) / t.table->entry_capacity();
  EXPECT_GE(load, 0.90) << n << " of " << t.table->entry_capacity();
  // Everything inserted is still there and right.
  std::string v;
  for (uint64_t i = 0; i < n; ++i) {
    ASSERT_TRUE(t.table->Get("user" + std::to_string(i), &v).ok()) << i;
    ASSERT_EQ(v, "value" + std::to_string(i));
  }
  // Deleting frees room for new keys, including overflow slots.
  for (uint64_t i = 0; i < n; i += 2) ASSERT_TRUE(t.table->Delete("user" + std::to_string(i)).ok());
  EXPECT_EQ(t.table->entries(), n / 2);
  for (uint64_t i = 0; i < n / 4; ++i)
    ASSERT_TRUE(t.table->Put("new" + std::to_string(i), "x").ok());
}
TEST(Table, OverflowShareAtNinetyPercentIsSmall) {
  TestTable t(16 << 20, 2048);
  uint64_t target = t.table->entry_capacity() * 9 / 10;
  for (uint64_t i = 0; i < target; ++i)
    ASSERT_TRUE(t.table->Put("user" + std::to_string(i), "v").ok()) << i;
  double share = double(t.table->overflow_entries()) / target;
  // Overflow entries need a second round trip; the design target is <= 10% at 90% load.
  EXPECT_LT(share, 0.10) << share;
}
TEST(Table, ConcurrentWritersKeepEveryKeyConsistent) {
  TestTable t(32 << 20);
  std::vector<std::thread> threads;
  for (int th = 0; th < 4; ++th) {
    threads.emplace_back([&, th] {
      std::mt19937 rng(th);
      for (int i = 0; i < 20000; ++i) {
        std::string k = "k" + std::to_string(rng() % 2000);
        size_t len = rng() % 3 == 0 ? 3000 : 20;
        ASSERT_TRUE(t.table->Put(k, std::string(len, char('a' + th))).ok());
        if (rng() % 10 == 0) (void)t.table->Delete(k);
      }
    });
  }
  for (auto& th : threads) th.join();
  std::string v;
  uint64_t found = 0;
  for (int i = 0; i < 2000; ++i) {
    Status s = t.table->Get("k" + std::to_string(i), &v);
    if (s.IsNotFound()) continue;
    ASSERT_TRUE(s.ok());
    ++found;
    ASSERT_FALSE(v.empty());
    ASSERT_EQ(v, std::string(v.size(), v[0]));
  }
  EXPECT_EQ(found, t.table->entries());
}
}  // namespace rkv
