#include "common/layout.h"

#include <gtest/gtest.h>

#include <set>
#include <string>

#include "common/lookup.h"

namespace rkv::layout {
TEST(Layout, HashIsStableAndInRange) {
  for (int i = 0; i < 10000; ++i) {
    std::string k = "user" + std::to_string(i);
    KeyHash a = HashKey(k, 7, 1000), b = HashKey(k, 7, 1000);
    EXPECT_EQ(a.hash, b.hash);
    EXPECT_LT(a.bucket[0], 1000u);
    EXPECT_LT(a.bucket[1], 1000u);
    EXPECT_NE(a.bucket[0], a.bucket[1]);
  }
  EXPECT_NE(HashKey("a", 1, 100).hash, HashKey("a", 2, 100).hash);
}
TEST(Layout, InlineSlotRoundTripAndTornDetection) {
  uint8_t slot[kSlotSize];
  std::string key("bin\0key", 7), value(64, 'x');
  EncodeInlineSlot(slot, 99, 5, key, value);
  SlotView v;
  ASSERT_EQ(DecodeSlot(slot, 99, &v), SlotState::kValid);
  EXPECT_EQ(v.key, key);
  EXPECT_EQ(v.value, value);
  EXPECT_EQ(v.version, 5u);
  // Any single-byte change (a torn read) is detected.
  for (size_t i = 0; i < kSlotSize; ++i) {
    if (i == 16) continue;  // kind byte: 0 reads as empty, others as torn
    uint8_t copy[kSlotSize];
    std::memcpy(copy, slot, kSlotSize);
    copy[i] ^= 0x40;
    EXPECT_EQ(DecodeSlot(copy, 99, &v), SlotState::kTorn) << "byte " << i;
  }
  // Wrong seed = not our table.
  EXPECT_EQ(DecodeSlot(slot, 98, &v), SlotState::kTorn);
}
TEST(Layout, MixedOldNewIsTorn) {
  uint8_t a[kSlotSize], b[kSlotSize], mix[kSlotSize];
  EncodeInlineSlot(a, 1, 1, "key", std::string(60, 'a'));
  EncodeInlineSlot(b, 1, 2, "key", std::string(60, 'b'));
  std::memcpy(mix, a, 64);
  std::memcpy(mix + 64, b + 64, 64);
  SlotView v;
  EXPECT_EQ(DecodeSlot(mix, 1, &v), SlotState::kTorn);
}
TEST(Layout, BlockChecksVersionAndKey) {
  std::vector<uint8_t> block(BlockBytes(3, 5000));
  std::string value(5000, 'z');
  EncodeBlock(block.data(), 3, 77, "abc", value);
  SlotView s;
  s.kind = kIndirect;
  s.version = 77;
  s.key_size = 3;
  s.value_size = 5000;
  std::string_view k, v;
  ASSERT_TRUE(DecodeBlock(block.data(), block.size(), 3, s, &k, &v));
  EXPECT_EQ(k, "abc");
  EXPECT_EQ(v, value);
  s.version = 78;  // block reused by a later write
  EXPECT_FALSE(DecodeBlock(block.data(), block.size(), 3, s, &k, &v));
  s.version = 77;
  block[100] ^= 1;
  EXPECT_FALSE(DecodeBlock(block.data(), block.size(), 3, s, &k, &v));
}
TEST(Layout, GeometryFitsRegion) {
  Geometry g;
  ASSERT_TRUE(ComputeGeometry(64 << 20, 0, 0.25, 1, &g));
  EXPECT_GT(g.num_buckets, 1000u);
  EXPECT_LE(g.overflow_offset + uint64_t{g.overflow_slots} * kSlotSize, g.heap_offset);
  EXPECT_LT(g.heap_offset, g.region_size);
  EXPECT_EQ(g.overflow_offset % 4096, 0u);
  EXPECT_FALSE(ComputeGeometry(4096, 0, 0.25, 1, &g));
  ASSERT_TRUE(ComputeGeometry(1 << 20, 64, 0.25, 1, &g));
  EXPECT_EQ(g.num_buckets, 64u);
  EXPECT_EQ(g.entry_capacity(), 64u * 7 + 56);
}
TEST(Lookup, TornSlotForcesRetryOnlyWhenKeyNotFound) {
  alignas(64) uint8_t b0[kBucketSize] = {}, b1[kBucketSize] = {};
  KeyHash kh = HashKey("k1", 1, 16);
  EncodeInlineSlot(b0 + kSlotSize, 1, 1, "k1", "v1");
  EncodeInlineSlot(b1 + 2 * kSlotSize, 1, 2, "other", "v");
  b1[2 * kSlotSize + 50] ^= 1;  // torn unrelated slot
  Probe p = ProbeBuckets(b0, b1, "k1", kh, 1);
  EXPECT_EQ(p.outcome, Probe::kFoundInline);
  EXPECT_EQ(p.value, "v1");
  p = ProbeBuckets(b0, b1, "k2", HashKey("k2", 1, 16), 1);
  EXPECT_EQ(p.outcome, Probe::kTorn);
  b1[2 * kSlotSize + 50] ^= 1;
  p = ProbeBuckets(b0, b1, "k2", HashKey("k2", 1, 16), 1);
  EXPECT_EQ(p.outcome, Probe::kAbsent);
}
TEST(Lookup, OverflowRefsMatchFingerprint) {
  alignas(64) uint8_t b0[kBucketSize] = {}, b1[kBucketSize] = {};
  KeyHash kh = HashKey("key", 1, 16);
  uint64_t ref = MakeRef(kh.fingerprint, 12);
  std::memcpy(b1 + 8 * 3, &ref, 8);
  uint64_t other = MakeRef(kh.fingerprint + 1, 13);
  std::memcpy(b0, &other, 8);
  Probe p = ProbeBuckets(b0, b1, "key", kh, 1);
  ASSERT_EQ(p.outcome, Probe::kOverflow);
  ASSERT_EQ(p.overflow_count, 1);
  EXPECT_EQ(p.overflow[0], 12u);
}
}  // namespace rkv::layout
