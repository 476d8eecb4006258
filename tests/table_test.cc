// SPDX-License-Identifier: Apache-2.0
#include "server/store/table.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <functional>
#include <map>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "common/table/lookup.h"
#include "tests/colliding_keys.h"
#include "tests/local_reader.h"

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
  EXPECT_EQ(v, std::string(65536, 'v'));
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
namespace {
// What a remote reader does (tests/local_reader.h). Returns the number of READ round trips the
// GET needed, or -1 if it did not find `want`.
int RemoteGetRoundTrips(const TestTable& t, std::string_view key, const std::string& want,
                        bool* via_ref = nullptr) {
  testing::LocalReadResult r = testing::LocalRead(t.mem.data(), t.geo, key);
  if (via_ref) *via_ref = r.via_ref;
  if (r.outcome != testing::LocalReadResult::kFound || r.value != want) return -1;
  return r.round_trips;
}
}  // namespace
TEST(Table, LargeValuesInOverflowTakeTwoRoundTrips) {
  // Fill a small table to 90% with a mix of small and large values; every entry, including the
  // large ones that landed in the overflow area, is at most two READ round trips away, and
  // updates and deletes that change an overflow entry's kind keep it so.
  TestTable t(16 << 20, 256);
  uint64_t target = t.table->entry_capacity() * 9 / 10;
  std::map<std::string, std::string> model;
  for (uint64_t i = 0; i < target; ++i) {
    std::string k = "user" + std::to_string(i);
    std::string v = i % 3 == 0 ? std::string(300 + i % 700, char('a' + i % 26)) : "small";
    ASSERT_TRUE(t.table->Put(k, v).ok()) << i;
    model[k] = v;
  }
  ASSERT_GT(t.table->overflow_entries(), 0u);
  auto check_all = [&] {
    int large_via_ref = 0;
    for (const auto& [k, v] : model) {
      bool via_ref = false;
      int rtts = RemoteGetRoundTrips(t, k, v, &via_ref);
      ASSERT_GE(rtts, 1) << k;
      ASSERT_LE(rtts, 2) << k;
      large_via_ref += via_ref && !layout::FitsInline(k.size(), v.size());
    }
    EXPECT_GT(large_via_ref, 0);  // the case under test occurred
  };
  check_all();
  // Flip every entry's kind (small <-> large), then delete a third and check again.
  uint64_t i = 0;
  for (auto& [k, v] : model) {
    v = v == "small" ? std::string(2000 + i % 50, 'L') : "tiny" + std::to_string(i);
    ASSERT_TRUE(t.table->Put(k, v).ok()) << k;
    ++i;
  }
  check_all();
  for (auto it = model.begin(); it != model.end();) {
    if (std::hash<std::string>{}(it->first) % 3 == 0) {
      ASSERT_TRUE(t.table->Delete(it->first).ok());
      EXPECT_EQ(RemoteGetRoundTrips(t, it->first, ""), -1);
      it = model.erase(it);
    } else {
      ++it;
    }
  }
  check_all();
  EXPECT_EQ(t.table->entries(), model.size());
  for (const auto& [k, v] : model) ASSERT_TRUE(t.table->Delete(k).ok());
  EXPECT_EQ(t.table->heap_bytes_in_use(), 0u);
  EXPECT_EQ(t.table->overflow_entries(), 0u);
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
namespace rkv {
namespace {
bool HeapRefusal(const Status& s) {
  return s.code() == Code::kTableFull && s.message().find("heap") != std::string::npos;
}
std::string SizedKey(const std::string& prefix, uint64_t i) {
  char buf[32];
  snprintf(buf, sizeof buf, "%s%012llu", prefix.c_str(), static_cast<unsigned long long>(i));
  return buf;
}
// Fills with values of `size` until the heap refuses (index refusals are skipped: they are the
// index's, not the heap's). Adds the keys to *live; returns the live key+value+header bytes of
// heap entries among *live at the refusal, or 0 if the index ran out first.
// The value FillUntilHeapRefuses stores under key k: `size` copies of a letter k picks.
std::string FillValue(const std::string& k, size_t size) {
  return std::string(size, char('a' + std::hash<std::string>{}(k) % 26));
}
uint64_t FillUntilHeapRefuses(Table* t, const std::string& prefix, size_t size,
                              std::map<std::string, size_t>* live, bool* heap_refused) {
  *heap_refused = false;
  int index_refusals = 0;
  for (uint64_t i = 0; index_refusals < 200; ++i) {
    std::string k = SizedKey(prefix, i);
    Status s = t->Put(k, FillValue(k, size));
    if (s.ok()) {
      (*live)[k] = size;
    } else if (HeapRefusal(s)) {
      *heap_refused = true;
      break;
    } else {
      EXPECT_EQ(s.code(), Code::kTableFull) << s.ToString();
      ++index_refusals;
    }
  }
  uint64_t bytes = 0;
  for (const auto& [k, sz] : *live)
    if (!layout::FitsInline(k.size(), sz)) bytes += layout::BlockBytes(k.size(), sz);
  return bytes;
}
}  // namespace

// The value heap never refuses a value while it holds room for it: after a fill with one size,
// a delete-all and a refill with another size (both directions), and after a random history of
// puts and deletes, a fill is refused for lack of heap space only when at least 85% of the heap's
// bytes hold live blocks, and the refill holds at least 85% of the first fill's live bytes.
TEST(TableHeap, FillDeleteRefillWithAnotherSizeBothWays) {
  const size_t sizes[] = {100, 200, 1000, 3000, 16000, 65536};
  for (size_t a : sizes) {
    for (size_t b : sizes) {
      if (a == b) continue;
      // 16 MiB, 8192 buckets: an index with room for the smallest values' entries.
      TestTable t(16 << 20, 8192);
      std::map<std::string, size_t> live;
      bool refused;
      uint64_t first = FillUntilHeapRefuses(t.table.get(), "first", a, &live, &refused);
      const double cap = double(t.table->heap_capacity());
      ASSERT_TRUE(refused) << a;
      EXPECT_GE(first / cap, 0.85) << "fill with " << a << " B refused at " << first / cap;
      for (const auto& [k, sz] : live) ASSERT_TRUE(t.table->Delete(k).ok());
      live.clear();
      ASSERT_EQ(t.table->heap_bytes_in_use(), 0u);
      uint64_t second = FillUntilHeapRefuses(t.table.get(), "second", b, &live, &refused);
      ASSERT_TRUE(refused) << b;
      EXPECT_GE(second / cap, 0.85) << "refill with " << b << " B refused at " << second / cap;
      EXPECT_GE(double(second) / first, 0.85) << a << " then " << b;
      printf(
          "heap fill %6zu B: %.1f%% live at refusal; refill %6zu B: %.1f%% (%.1f%% of the "
          "first)\n",
          a, 100.0 * first / cap, b, 100.0 * second / cap, 100.0 * second / first);
      // Everything stored is intact (blocks moved by the cleaner included).
      std::string v;
      for (const auto& [k, sz] : live) {
        ASSERT_TRUE(t.table->Get(k, &v).ok()) << k;
        ASSERT_EQ(v, FillValue(k, sz)) << k;
        testing::LocalReadResult r = testing::LocalRead(t.mem.data(), t.geo, k);
        ASSERT_EQ(r.outcome, testing::LocalReadResult::kFound) << k;
        ASSERT_EQ(r.value, v);
      }
    }
  }
}

TEST(TableHeap, AfterAnyHistoryAFillIsRefusedOnlyWhenTheHeapIsFull) {
  for (uint32_t seed = 1; seed <= 4; ++seed) {
    TestTable t(16 << 20, 8192);
    std::mt19937 rng(seed);
    std::map<std::string, size_t> live;
    // A random history: sizes from 1 B to 64 KiB (log-uniform), a third of the puts deleted
    // again, updates that change sizes.
    for (int i = 0; i < 3000; ++i) {
      std::string k = SizedKey("h", rng() % 1500);
      size_t size = size_t(std::exp2(double(rng() % 1600) / 100.0));
      if (rng() % 3 == 0) {
        if (t.table->Delete(k).ok()) live.erase(k);
        continue;
      }
      Status s = t.table->Put(k, std::string(size, 'h'));
      if (s.ok()) live[k] = size;
    }
    for (size_t size : {100, 3000, 65536}) {
      std::map<std::string, size_t> all = live;
      bool refused;
      uint64_t bytes = FillUntilHeapRefuses(t.table.get(), "f" + std::to_string(size) + "-", size,
                                            &all, &refused);
      ASSERT_TRUE(refused);
      double frac = double(bytes) / t.table->heap_capacity();
      EXPECT_GE(frac, 0.85) << "seed " << seed << " size " << size;
      printf("history %u then fill %5zu B: %.1f%% of the heap live at refusal (%llu moves)\n", seed,
             size, 100 * frac, static_cast<unsigned long long>(t.table->heap().moves()));
      // Back to the history's state for the next size.
      for (const auto& [k, sz] : all) {
        if (live.count(k)) continue;
        ASSERT_TRUE(t.table->Delete(k).ok());
      }
    }
    std::string v;
    for (const auto& [k, sz] : live) {
      ASSERT_TRUE(t.table->Get(k, &v).ok()) << k;
      ASSERT_EQ(v, std::string(sz, 'h'));
    }
  }
}

// Keys whose 64-bit hashes are equal (crafted: tests/colliding_keys.h) share a bucket pair, a
// tag and, when large, a hash in their slots: every one stays readable, updatable and deletable,
// by the server's lookup and by the client's.
TEST(Table, CraftedHashCollisionsAreCorrectNotJustImprobable) {
  TestTable t(8 << 20, 64);
  std::vector<std::string> keys = testing::CollidingKeys(t.geo.seed, 24);
  const uint64_t h0 = layout::HashKey(keys[0], t.geo.seed, t.geo.num_buckets).hash;
  for (const std::string& k : keys)
    ASSERT_EQ(layout::HashKey(k, t.geo.seed, t.geo.num_buckets).hash, h0);
  std::map<std::string, std::string> model;
  auto check = [&] {
    std::string v;
    for (const std::string& k : keys) {
      auto it = model.find(k);
      Status s = t.table->Get(k, &v);
      testing::LocalReadResult r = testing::LocalRead(t.mem.data(), t.geo, k);
      if (it == model.end()) {
        EXPECT_TRUE(s.IsNotFound());
        EXPECT_EQ(r.outcome, testing::LocalReadResult::kAbsent);
      } else {
        ASSERT_TRUE(s.ok());
        EXPECT_EQ(v, it->second);
        ASSERT_EQ(r.outcome, testing::LocalReadResult::kFound);
        EXPECT_EQ(r.value, it->second);
      }
    }
  };
  // 14 slots + 16 refs hold 30 entries of one bucket pair; 24 of them: slots and refs in use,
  // both inline (in slots and overflow slots) and in heap blocks.
  for (size_t i = 0; i < keys.size(); ++i) {
    std::string v = i % 2 ? std::string(200 + i, char('A' + i)) : "v" + std::to_string(i);
    ASSERT_TRUE(t.table->Put(keys[i], v).ok()) << i;
    model[keys[i]] = v;
  }
  EXPECT_GT(t.table->overflow_entries(), 0u);
  check();
  for (size_t i = 0; i < keys.size(); i += 3) {  // flip sizes
    std::string v =
        model[keys[i]].size() > 50 ? "small" + std::to_string(i) : std::string(3000, char('a' + i));
    ASSERT_TRUE(t.table->Put(keys[i], v).ok());
    model[keys[i]] = v;
  }
  check();
  for (size_t i = 0; i < keys.size(); i += 2) {
    ASSERT_TRUE(t.table->Delete(keys[i]).ok());
    model.erase(keys[i]);
  }
  check();
  for (const auto& [k, v] : model) ASSERT_TRUE(t.table->Delete(k).ok());
  EXPECT_EQ(t.table->entries(), 0u);
  EXPECT_EQ(t.table->heap_bytes_in_use(), 0u);
}

// The slot filter (tag + key size) skips foreign slots without a checksum. With YCSB-style keys
// of one size at 90% load, it must skip about 255 of 256 foreign slots.
TEST(Table, SlotFilterSkipsForeignSlotsOfEqualSizeKeys) {
  TestTable t(16 << 20, 2048);
  const uint64_t n = t.table->entry_capacity() * 9 / 10;
  for (uint64_t i = 0; i < n; ++i) ASSERT_TRUE(t.table->Put(SizedKey("user", i), "value").ok());
  uint64_t foreign = 0, verified_foreign = 0, absent_second_trip = 0;
  auto count = [&](const std::string& key, bool present) {
    layout::KeyHash kh = layout::HashKey(key, t.geo.seed, t.geo.num_buckets);
    const uint8_t* b = t.mem.data() + t.geo.bucket_offset(kh.bucket[0]);
    int occupied = 0;
    for (int s = 0; s < 2 * int(layout::kSlotsPerBucket); ++s)
      if (s % layout::kSlotsPerBucket != 0 && b[s * layout::kSlotSize + 16] != layout::kEmpty)
        ++occupied;
    testing::LocalReadResult r = testing::LocalRead(t.mem.data(), t.geo, key);
    const int own = present && !r.via_ref && r.outcome == testing::LocalReadResult::kFound;
    foreign += occupied - own;
    absent_second_trip += !present && r.round_trips > 1;
    verified_foreign += r.slots_verified - own;
  };
  for (uint64_t i = 0; i < 20000; ++i) count(SizedKey("user", i % n), true);
  for (uint64_t i = 0; i < 20000; ++i) count(SizedKey("miss", i), false);
  double skip = 1.0 - double(verified_foreign) / foreign;
  printf("slot filter: %llu foreign occupied slots seen, %llu checksummed: skip rate %.4f\n",
         static_cast<unsigned long long>(foreign),
         static_cast<unsigned long long>(verified_foreign), skip);
  printf("absent keys needing a second round trip (a ref's tag matched): %.2f%%\n",
         100.0 * absent_second_trip / 20000);
  EXPECT_GE(skip, 0.99);
}
}  // namespace rkv
