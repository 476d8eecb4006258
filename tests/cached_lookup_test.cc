// SPDX-License-Identifier: Apache-2.0
// The location cache's safety rule (common/table/cached_lookup.h), checked over a real Table in
// local memory: a location cached at any time, however stale, either verifies to the key's
// current value or misses; it never yields an older value or another key's. One test per way a
// cached location goes stale, then a random history that keeps every location ever reported.
#include "common/table/cached_lookup.h"

#include <gtest/gtest.h>

#include <map>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "client/location_cache.h"
#include "common/table/entry_location.h"
#include "server/store/table.h"
#include "tests/colliding_keys.h"

namespace rkv {
namespace {

using layout::CachedOutcome;
using layout::EntryLocation;

struct TestTable {
  explicit TestTable(uint64_t size, uint32_t buckets) : mem(size) {
    EXPECT_TRUE(layout::ComputeGeometry(size, buckets, 0.25, 99, &geo));
    table = std::make_unique<Table>(mem.data(), geo);
  }
  EntryLocation Put(const std::string& k, const std::string& v) {
    EntryLocation where;
    Status s = table->Put(k, v, &where);
    EXPECT_TRUE(s.ok()) << s.message();
    EXPECT_TRUE(layout::EntryLocationFits(where, geo, 72 * 1024));
    return where;
  }
  std::vector<uint8_t> mem;
  layout::Geometry geo;
  std::unique_ptr<Table> table;
};

struct CachedResult {
  enum { kFound, kMiss } outcome = kMiss;
  std::string value;
  bool followed = false;
  EntryLocation now;
};

// What a client's cached GET does (client/cached_read.cc): copy the anchor and the block (like
// the two READs of one round trip), decide, and follow a moved block once.
CachedResult ReadCached(const TestTable& t, const std::string& key, const EntryLocation& loc) {
  CachedResult r;
  const layout::KeyHash kh = layout::HashKey(key, t.geo.seed, t.geo.num_buckets);
  std::vector<uint8_t> anchor(t.mem.begin() + loc.anchor,
                              t.mem.begin() + loc.anchor + layout::kSlotSize);
  std::vector<uint8_t> block;
  if (loc.has_block())
    block.assign(t.mem.begin() + loc.block, t.mem.begin() + loc.block + loc.block_len);
  layout::FoundValue v;
  layout::Target follow;
  switch (layout::ProbeCached(loc, anchor.data(), block.data(), key, kh, t.geo.seed, &v, &follow,
                              &r.now)) {
    case CachedOutcome::kFound:
      r.outcome = CachedResult::kFound;
      v.AssignTo(&r.value);
      return r;
    case CachedOutcome::kFollow: {
      r.followed = true;
      EXPECT_LE(follow.offset + follow.length, t.geo.region_size);
      std::vector<uint8_t> target(t.mem.begin() + follow.offset,
                                  t.mem.begin() + follow.offset + follow.length);
      if (layout::ProbeTarget(target.data(), follow, key, t.geo.seed, &v) ==
          layout::TargetOutcome::kFound) {
        r.outcome = CachedResult::kFound;
        v.AssignTo(&r.value);
      }
      return r;
    }
    case CachedOutcome::kMiss:
      break;
  }
  return r;
}

std::string Key(int i) { return "key-" + std::to_string(i); }

// The i-th key (of a fixed sequence) whose home bucket is 0 in a table of 2 buckets: all such
// keys share one bucket pair, so slots fill, overflow and get reused as the tests need.
std::string PairKey(int i, const layout::Geometry& geo) {
  static std::vector<std::string> keys;
  static int n = 0;
  for (; static_cast<int>(keys.size()) <= i; ++n) {
    std::string k = "pk-" + std::to_string(n);
    if (layout::HashKey(k, geo.seed, geo.num_buckets).bucket[0] == 0) keys.push_back(k);
  }
  return keys[i];
}

TEST(EntryLocation, WireRoundTripAndBounds) {
  layout::Geometry g;  // 1 MiB, 64 buckets: index [0, 66560), overflow [69632, 76800)
  ASSERT_TRUE(layout::ComputeGeometry(1 << 20, 64, 0.25, 1, &g));
  ASSERT_EQ(g.index_bytes(), 65u * 1024);
  const uint64_t overflow_end = g.overflow_offset + uint64_t{g.overflow_slots} * 128;
  EntryLocation in{4096 + 128, 512 * 1024, 200, EntryLocation::kSlotIndirect};
  uint8_t rec[layout::kEntryLocationWireSize];
  layout::EncodeEntryLocation(in, rec);
  std::string_view bytes(reinterpret_cast<const char*>(rec), sizeof rec);
  EntryLocation out;
  ASSERT_TRUE(layout::DecodeEntryLocation(bytes, g, 72 * 1024, &out));
  EXPECT_EQ(out.anchor, in.anchor);
  EXPECT_EQ(out.block, in.block);
  EXPECT_EQ(out.block_len, in.block_len);
  EXPECT_EQ(out.kind, in.kind);
  EXPECT_EQ(rec[0], 128);  // little-endian
  EXPECT_EQ(rec[1], 16);
  EXPECT_FALSE(layout::DecodeEntryLocation(bytes.substr(1), g, 72 * 1024, &out));
  EXPECT_FALSE(layout::DecodeEntryLocation(bytes, g, 100, &out));  // block too long
  layout::Geometry small = g;
  small.region_size = 512 * 1024 + 100;  // the block would end past the region
  EXPECT_FALSE(layout::DecodeEntryLocation(bytes, small, 72 * 1024, &out));
  auto fits = [&](EntryLocation l) { return layout::EntryLocationFits(l, g, 72 * 1024); };
  using K = EntryLocation;
  EXPECT_TRUE(fits({1024 + 128, 0, 0, K::kSlotInline}));
  EXPECT_FALSE(fits({1024, 0, 0, K::kSlotInline})) << "a bucket header is not an entry slot";
  EXPECT_FALSE(fits({g.overflow_offset, 0, 0, K::kSlotInline}))
      << "an overflow slot read alone could hold a write the log does not have yet";
  EXPECT_FALSE(fits({1024 + 130, 0, 0, K::kSlotInline})) << "not a whole slot";
  EXPECT_FALSE(fits({1024 + 128, 8, 0, K::kSlotInline})) << "inline names no block";
  EXPECT_TRUE(fits({2048, g.overflow_offset + 256, 128, K::kOverflowSlot}));
  EXPECT_FALSE(fits({2048 + 128, g.overflow_offset + 256, 128, K::kOverflowSlot}))
      << "refs live in bucket headers";
  EXPECT_FALSE(fits({2048, overflow_end, 128, K::kOverflowSlot})) << "past the overflow area";
  EXPECT_FALSE(fits({2048, g.overflow_offset + 8, 128, K::kOverflowSlot})) << "not a slot";
  EXPECT_TRUE(fits({2048, overflow_end + 4096, 3000, K::kRefBlock}));
  EXPECT_FALSE(fits({2048, g.overflow_offset, 3000, K::kRefBlock}))
      << "a block in the overflow area";
  EXPECT_FALSE(fits({2048, 4096, 3000, K::kRefBlock})) << "a block in the index";
  auto bad = [&](auto mutate) {
    uint8_t r[layout::kEntryLocationWireSize];
    std::memcpy(r, rec, sizeof r);
    mutate(r);
    return layout::DecodeEntryLocation(std::string_view(reinterpret_cast<const char*>(r), sizeof r),
                                       g, 72 * 1024, &out);
  };
  EXPECT_FALSE(bad([](uint8_t* r) { r[20] = 0; }));   // kNone
  EXPECT_FALSE(bad([](uint8_t* r) { r[20] = 5; }));   // unknown kind
  EXPECT_FALSE(bad([](uint8_t* r) { r[23] = 1; }));   // reserved byte
  EXPECT_FALSE(bad([](uint8_t* r) { r[0] = 129; }));  // anchor not a slot
  EXPECT_FALSE(bad([](uint8_t* r) { r[8] = 3; }));    // block not 8-aligned
  EXPECT_FALSE(bad([](uint8_t* r) { r[20] = 4; }));   // ref kinds anchor a bucket header
  EXPECT_FALSE(bad([](uint8_t* r) {                   // anchor past the index
    r[0] = 0;
    r[1] = 0;
    r[2] = 2;
  }));
}

TEST(LocationCache, InsertLookupEraseEvict) {
  LocationCache c(10);  // rounded up: 4 sets of 4 ways
  EXPECT_EQ(c.capacity(), 16u);
  EntryLocation loc{1024 + 128, 0, 0, EntryLocation::kSlotInline}, got;
  EXPECT_FALSE(c.Lookup(7, &got));
  c.Insert(7, loc);
  ASSERT_TRUE(c.Lookup(7, &got));
  EXPECT_EQ(got.anchor, loc.anchor);
  loc.anchor = 2048 + 256;
  c.Insert(7, loc);  // replaces, does not take a second way
  ASSERT_TRUE(c.Lookup(7, &got));
  EXPECT_EQ(got.anchor, loc.anchor);
  c.Erase(7);
  EXPECT_FALSE(c.Lookup(7, &got));
  // Five hashes of one set (bits 16.. equal): one is evicted, the rest stay.
  for (uint64_t i = 0; i < 5; ++i) c.Insert(i, loc);
  int present = 0;
  for (uint64_t i = 0; i < 5; ++i) present += c.Lookup(i, &got);
  EXPECT_EQ(present, 4);
  c.Clear();
  for (uint64_t i = 0; i < 5; ++i) EXPECT_FALSE(c.Lookup(i, &got));
  LocationCache off(0);
  off.Insert(7, loc);
  EXPECT_FALSE(off.Lookup(7, &got));
}

TEST(CachedLookup, EachKindHitsWhereThePutSaysAndNowhereElse) {
  TestTable t(1 << 20, 2);
  std::map<std::string, EntryLocation> where;
  for (int i = 0; i < 14; ++i)
    where[PairKey(i, t.geo)] = t.Put(PairKey(i, t.geo), "v" + std::to_string(i));
  const std::string big = PairKey(20, t.geo), small = PairKey(21, t.geo);
  where[big] = t.Put(big, std::string(3000, 'b'));  // both buckets full: a ref to a block
  where[small] = t.Put(small, "s");                 // ... and to an overflow slot
  EXPECT_EQ(where[PairKey(0, t.geo)].kind, EntryLocation::kSlotInline);
  EXPECT_EQ(where[big].kind, EntryLocation::kRefBlock);
  EXPECT_EQ(where[small].kind, EntryLocation::kOverflowSlot);
  for (auto& [k, loc] : where) {
    CachedResult r = ReadCached(t, k, loc);
    ASSERT_EQ(r.outcome, CachedResult::kFound) << k;
    std::string v;
    ASSERT_TRUE(t.table->Get(k, &v).ok());
    EXPECT_EQ(r.value, v) << k;
    // Another key through this location: never found.
    EXPECT_EQ(ReadCached(t, k + "x", loc).outcome, CachedResult::kMiss) << k;
  }
  // An indirect bucket slot.
  TestTable u(1 << 20, 64);
  EntryLocation ind = u.Put("k", std::string(500, 'i'));
  EXPECT_EQ(ind.kind, EntryLocation::kSlotIndirect);
  CachedResult r = ReadCached(u, "k", ind);
  ASSERT_EQ(r.outcome, CachedResult::kFound);
  EXPECT_EQ(r.value, std::string(500, 'i'));
}

TEST(CachedLookup, DeletedEntryMissesForEveryKind) {
  TestTable t(1 << 20, 2);
  std::map<std::string, EntryLocation> where;
  for (int i = 0; i < 14; ++i) where[PairKey(i, t.geo)] = t.Put(PairKey(i, t.geo), "v");
  where[PairKey(20, t.geo)] = t.Put(PairKey(20, t.geo), std::string(3000, 'b'));
  where[PairKey(21, t.geo)] = t.Put(PairKey(21, t.geo), "s");
  for (auto& [k, loc] : where) {
    ASSERT_TRUE(t.table->Delete(k).ok());
    EXPECT_EQ(ReadCached(t, k, loc).outcome, CachedResult::kMiss) << k;
  }
}

TEST(CachedLookup, SlotReusedByAnotherKeyMisses) {
  TestTable t(1 << 20, 2);
  EntryLocation k0 = t.Put(PairKey(0, t.geo), "old");
  for (int i = 1; i < 14; ++i) t.Put(PairKey(i, t.geo), "v");
  ASSERT_TRUE(t.table->Delete(PairKey(0, t.geo)).ok());
  EntryLocation other = t.Put(PairKey(20, t.geo), "x");  // the only free slot: key 0's
  ASSERT_EQ(other.anchor, k0.anchor);
  EXPECT_EQ(ReadCached(t, PairKey(0, t.geo), k0).outcome, CachedResult::kMiss);
  // And re-inserted elsewhere (an overflow slot now): the old slot still misses, the new hits.
  EntryLocation again = t.Put(PairKey(0, t.geo), "new");
  EXPECT_EQ(again.kind, EntryLocation::kOverflowSlot);
  EXPECT_EQ(ReadCached(t, PairKey(0, t.geo), k0).outcome, CachedResult::kMiss);
  CachedResult r = ReadCached(t, PairKey(0, t.geo), again);
  ASSERT_EQ(r.outcome, CachedResult::kFound);
  EXPECT_EQ(r.value, "new");
}

TEST(CachedLookup, RewrittenValueIsFollowedNeverOld) {
  for (bool clear : {true, false}) {
    TestTable t(1 << 20, 64);
    t.table->set_clear_freed_blocks_for_testing(clear);  // false: the old block stays intact
    EntryLocation inl = t.Put("k", "small");
    EntryLocation ind = t.Put("k", std::string(800, '1'));  // inline -> indirect, same slot
    ASSERT_EQ(ind.anchor, inl.anchor);
    CachedResult r = ReadCached(t, "k", inl);  // the slot now names a block
    ASSERT_EQ(r.outcome, CachedResult::kFound);
    EXPECT_EQ(r.value, std::string(800, '1'));
    EXPECT_EQ(r.now.kind, EntryLocation::kSlotIndirect);
    t.Put("k", std::string(800, '2'));  // a new block; the old one freed (cleared or not)
    r = ReadCached(t, "k", ind);
    ASSERT_EQ(r.outcome, CachedResult::kFound) << clear;
    EXPECT_TRUE(r.followed);
    EXPECT_EQ(r.value, std::string(800, '2'));
    t.Put("k", "tiny");  // back inline
    r = ReadCached(t, "k", ind);
    ASSERT_EQ(r.outcome, CachedResult::kFound);
    EXPECT_EQ(r.value, "tiny");
  }
}

TEST(CachedLookup, OverflowTargetsNeedTheirRef) {
  TestTable t(1 << 20, 2);
  t.table->set_clear_freed_blocks_for_testing(false);
  for (int i = 0; i < 14; ++i) t.Put(PairKey(i, t.geo), "v");
  const std::string o = PairKey(20, t.geo);
  EntryLocation slot = t.Put(o, "first");
  ASSERT_EQ(slot.kind, EntryLocation::kOverflowSlot);
  // An overflow slot written before its ref (a write not yet logged or published) is not
  // accepted: the ref still holds the old version.
  std::vector<uint8_t> saved(t.mem.begin() + slot.block, t.mem.begin() + slot.block + 128);
  layout::EncodeInlineSlot(t.mem.data() + slot.block, t.geo.seed, 1u << 30, o, "unpublished");
  EXPECT_EQ(ReadCached(t, o, slot).outcome, CachedResult::kMiss);
  std::copy(saved.begin(), saved.end(), t.mem.begin() + slot.block);
  ASSERT_EQ(ReadCached(t, o, slot).value, "first");
  EntryLocation blk = t.Put(o, std::string(2000, 'x'));  // now a ref block
  ASSERT_EQ(blk.kind, EntryLocation::kRefBlock);
  EXPECT_EQ(ReadCached(t, o, slot).outcome, CachedResult::kMiss);
  t.Put(o, std::string(2000, 'y'));  // a new block; the old one stays intact (no clearing)
  EXPECT_EQ(ReadCached(t, o, blk).outcome, CachedResult::kMiss);
}

// Keys with one 64-bit hash (crafted: the seed is public) share cache entries: the location of
// one never yields the other's value, however the two are laid out (inline or in the heap).
TEST(CachedLookup, HashTwinsNeverTakeEachOthersValue) {
  TestTable t(1 << 20, 64);
  std::vector<std::string> twins = testing::CollidingKeys(t.geo.seed, 4);
  ASSERT_EQ(layout::HashKey(twins[0], t.geo.seed, 64).hash,
            layout::HashKey(twins[1], t.geo.seed, 64).hash);
  std::vector<EntryLocation> where;
  for (size_t i = 0; i < twins.size(); ++i)  // two inline, two in the heap
    where.push_back(t.Put(twins[i], std::string(i < 2 ? 8 : 600, char('a' + i))));
  for (size_t i = 0; i < twins.size(); ++i) {
    for (size_t j = 0; j < twins.size(); ++j) {
      CachedResult r = ReadCached(t, twins[i], where[j]);
      if (i == j) {
        ASSERT_EQ(r.outcome, CachedResult::kFound);
        EXPECT_EQ(r.value, std::string(i < 2 ? 8 : 600, char('a' + i)));
      } else {
        EXPECT_EQ(r.outcome, CachedResult::kMiss) << i << " through " << j;
      }
    }
  }
}

// The locations a bucket-pair READ reports (LocationOfFound), for every kind, are where the
// PUT said the entry is.
TEST(CachedLookup, BucketPathReportsThePutsLocation) {
  TestTable t(1 << 20, 2);
  std::map<std::string, EntryLocation> where;
  for (int i = 0; i < 14; ++i)
    where[PairKey(i, t.geo)] = t.Put(PairKey(i, t.geo), i % 2 ? "v" : std::string(500, 'h'));
  where[PairKey(20, t.geo)] = t.Put(PairKey(20, t.geo), std::string(3000, 'b'));
  where[PairKey(21, t.geo)] = t.Put(PairKey(21, t.geo), "s");
  for (const auto& [k, put] : where) {
    const layout::KeyHash kh = layout::HashKey(k, t.geo.seed, t.geo.num_buckets);
    const uint64_t pair = t.geo.bucket_offset(kh.bucket[0]);
    const uint8_t* b = t.mem.data() + pair;
    layout::Probe p = layout::ProbeBuckets(b, b + layout::kBucketSize, k, kh, t.geo.seed);
    EntryLocation got;
    if (p.outcome == layout::Probe::kFound) {
      got = layout::LocationOfFound(p, -1, pair);
    } else {
      ASSERT_EQ(p.outcome, layout::Probe::kFollow) << k;
      for (int i = 0; i < p.target_count && got.kind == EntryLocation::kNone; ++i) {
        layout::FoundValue v;
        if (layout::ProbeTarget(t.mem.data() + p.targets[i].offset, p.targets[i], k, t.geo.seed,
                                &v) == layout::TargetOutcome::kFound)
          got = layout::LocationOfFound(p, i, pair);
      }
    }
    EXPECT_EQ(got.kind, put.kind) << k;
    EXPECT_EQ(got.anchor, put.anchor) << k;
    EXPECT_EQ(got.block, put.block) << k;
    EXPECT_EQ(got.block_len, put.block_len) << k;
  }
}

// The two READs of a cached GET are not atomic together: the slot is read, then the table
// changes, then the block is read. Whatever happens in between, the answer is the value the slot
// named (current when the slot was read) or a miss, never a newer slot with an older block.
TEST(CachedLookup, ChangesBetweenTheSlotAndTheBlockRead) {
  for (int change = 0; change < 3; ++change) {
    TestTable t(1 << 20, 64);
    t.table->set_clear_freed_blocks_for_testing(change == 2);
    EntryLocation loc = t.Put("k", std::string(700, '1'));
    ASSERT_EQ(loc.kind, EntryLocation::kSlotIndirect);
    std::vector<uint8_t> anchor(t.mem.begin() + loc.anchor, t.mem.begin() + loc.anchor + 128);
    if (change == 0) {
      ASSERT_TRUE(t.table->Delete("k").ok());
    }
    if (change >= 1) t.Put("k", std::string(700, '2'));  // a new block; the old one freed
    std::vector<uint8_t> block(t.mem.begin() + loc.block,
                               t.mem.begin() + loc.block + loc.block_len);
    const layout::KeyHash kh = layout::HashKey("k", t.geo.seed, t.geo.num_buckets);
    layout::FoundValue v;
    layout::Target follow;
    EntryLocation now;
    CachedOutcome o = layout::ProbeCached(loc, anchor.data(), block.data(), "k", kh, t.geo.seed, &v,
                                          &follow, &now);
    if (o == CachedOutcome::kFound) {
      std::string got;
      v.AssignTo(&got);
      EXPECT_EQ(got, std::string(700, '1')) << "the value the slot named when it was read";
    } else {
      EXPECT_EQ(o, CachedOutcome::kMiss) << change;  // the block was cleared: its checksum fails
    }
  }
}

// A random history over a small table and heap (overflow, heap cleaning that moves blocks, freed
// blocks left intact): every location ever reported for a key, checked after every operation,
// gives the key's current value or misses.
TEST(CachedLookup, NoLocationEverYieldsAStaleValue) {
  TestTable t(256 << 10, 4);
  t.table->set_clear_freed_blocks_for_testing(false);
  std::mt19937_64 rng(42);
  std::map<std::string, std::string> current;
  std::map<std::string, std::vector<EntryLocation>> seen;
  int found = 0, followed = 0, missed = 0;
  for (int op = 0; op < 6000; ++op) {
    const std::string k = Key(static_cast<int>(rng() % 40));
    if (rng() % 5 == 0) {
      if (t.table->Delete(k).ok()) current.erase(k);
    } else {
      const size_t sizes[] = {1, 40, 90, 300, 2000, 6000};
      std::string v(sizes[rng() % 6], 'a' + static_cast<char>(op % 26));
      v += std::to_string(op);
      EntryLocation where;
      if (t.table->Put(k, v, &where).ok()) {
        current[k] = v;
        auto& locs = seen[k];
        locs.push_back(where);
        if (locs.size() > 8) locs.erase(locs.begin());
      }
    }
    for (const auto& [key, locs] : seen) {
      for (const EntryLocation& loc : locs) {
        CachedResult r = ReadCached(t, key, loc);
        if (r.outcome == CachedResult::kMiss) {
          ++missed;
          continue;
        }
        auto it = current.find(key);
        ASSERT_NE(it, current.end()) << key << " deleted, found through a cached location";
        ASSERT_EQ(r.value, it->second) << key << " at op " << op;
        ++found;
        followed += r.followed;
      }
    }
  }
  printf("cached reads: %d found (%d followed a moved or rewritten block), %d missed\n", found,
         followed, missed);
  EXPECT_GT(found, 0);
  EXPECT_GT(followed, 0);
  EXPECT_GT(missed, 0);
}

}  // namespace
}  // namespace rkv
