#include "common/layout.h"

#include <gtest/gtest.h>

#include <set>
#include <string>
#include <vector>

#include "common/lookup.h"

namespace rkv::layout {
TEST(Layout, HashIsStableAndInRange) {
  for (int i = 0; i < 10000; ++i) {
    std::string k = "user" + std::to_string(i);
    KeyHash a = HashKey(k, 7, 1000), b = HashKey(k, 7, 1000);
    EXPECT_EQ(a.hash, b.hash);
    EXPECT_LT(a.bucket[0], 1000u);
    EXPECT_EQ(a.bucket[1], a.bucket[0] + 1);  // adjacent: one READ covers both
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
  EXPECT_EQ(g.entry_capacity(), 65u * 7 + 56);
}
TEST(Lookup, OnlyATornSlotThatMayHoldTheKeyForcesARetry) {
  alignas(64) uint8_t b0[kBucketSize] = {}, b1[kBucketSize] = {};
  KeyHash kh = HashKey("k1", 1, 16);
  EncodeInlineSlot(b0 + kSlotSize, 1, 1, "k1", "v1");
  EncodeInlineSlot(b1 + 2 * kSlotSize, 1, 2, "other", "v");
  b1[2 * kSlotSize + 50] ^= 1;  // torn slot of another key: filtered out by tag and size
  Probe p = ProbeBuckets(b0, b1, "k1", kh, 1);
  EXPECT_EQ(p.outcome, Probe::kFound);
  EXPECT_EQ(p.value, "v1");
  EXPECT_EQ(ProbeBuckets(b0, b1, "k2", HashKey("k2", 1, 16), 1).outcome, Probe::kAbsent);
  // A torn slot of the key itself: re-read.
  EncodeInlineSlot(b1 + 3 * kSlotSize, 1, 3, "k2", "value2");
  b1[3 * kSlotSize + 40] ^= 1;
  EXPECT_EQ(ProbeBuckets(b0, b1, "k2", HashKey("k2", 1, 16), 1).outcome, Probe::kTorn);
}
TEST(Lookup, InPlaceKindChangeSeenTornIsRetriedNotMissed) {
  // k's slot is rewritten in place from inline to indirect; a READ overlapping the copy sees
  // the new header with the old body. Tag and key size are the same in both images, so the
  // reader verifies the slot and retries instead of skipping it.
  KeyHash kh = HashKey("k", 1, 16);
  alignas(64) uint8_t inl[kSlotSize], ind[kSlotSize], mix[kSlotSize];
  EncodeInlineSlot(inl, 1, 5, "k", "small");
  EncodeIndirectSlot(ind, 1, 6, kh.hash, 1, 5000, 4096, 8192);
  EXPECT_EQ(inl[17], ind[17]);
  std::memcpy(mix, ind, 24);  // header of the new image, body of the old
  std::memcpy(mix + 24, inl + 24, kSlotSize - 24);
  EXPECT_EQ(ProbeSlots(mix, 1, "k", kh, 1).outcome, Probe::kTorn);
  std::memcpy(mix, inl, 24);
  std::memcpy(mix + 24, ind + 24, kSlotSize - 24);
  EXPECT_EQ(ProbeSlots(mix, 1, "k", kh, 1).outcome, Probe::kTorn);
}
void PutRef(uint8_t* at, const Ref& r) {
  uint64_t w[2] = {RefWord0(r), RefWord1(r)};
  std::memcpy(at, w, sizeof w);
}
TEST(Layout, RefRoundTripsEveryField) {
  Ref r;
  r.type = Ref::kBlock;
  r.length = 66584;
  r.offset = (uint64_t{1} << 42) + 128 * 77;
  r.fingerprint = 0xdeadbeef;
  r.version = 0x12345678;
  uint8_t b[16];
  PutRef(b, r);
  Ref d = DecodeRef(b);
  EXPECT_EQ(d.type, r.type);
  EXPECT_EQ(d.length, r.length);
  EXPECT_EQ(d.offset, r.offset);
  EXPECT_EQ(d.fingerprint, r.fingerprint);
  EXPECT_EQ(d.version, r.version);
  uint8_t zero[16] = {};
  EXPECT_EQ(DecodeRef(zero).type, Ref::kUnused);
}
TEST(Lookup, OverflowRefsMatchFingerprint) {
  alignas(64) uint8_t b0[kBucketSize] = {}, b1[kBucketSize] = {};
  KeyHash kh = HashKey("key", 1, 16);
  Ref mine{Ref::kSlot, kSlotSize, 128 * 12, kh.fingerprint, 5};
  Ref other{Ref::kSlot, kSlotSize, 128 * 13, kh.fingerprint + 1, 6};
  PutRef(b1 + kRefSize * 3, mine);
  PutRef(b0, other);
  Probe p = ProbeBuckets(b0, b1, "key", kh, 1);
  ASSERT_EQ(p.outcome, Probe::kOverflow);
  ASSERT_EQ(p.ref_count, 1);
  EXPECT_EQ(p.refs[0].offset, 128u * 12);
  EXPECT_EQ(p.refs[0].version, 5u);
}
TEST(Lookup, SlotRefChecksTheVersionOfItsTarget) {
  KeyHash kh = HashKey("key", 1, 16);
  alignas(64) uint8_t slot[kSlotSize];
  EncodeInlineSlot(slot, 1, (uint64_t{7} << 32) | 5, "key", "val");
  Ref r{Ref::kSlot, kSlotSize, 0, kh.fingerprint, 5};
  Probe p = ProbeRef(slot, r, "key", kh, 1);
  ASSERT_EQ(p.outcome, Probe::kFound);
  EXPECT_EQ(p.value, "val");
  r.version = 6;  // the slot was rewritten (or reused) after the ref was read
  EXPECT_EQ(ProbeRef(slot, r, "key", kh, 1).outcome, Probe::kTorn);
  r.version = 5;
  EXPECT_EQ(ProbeRef(slot, r, "other", HashKey("other", 1, 16), 1).outcome, Probe::kAbsent);
  uint8_t empty[kSlotSize] = {};  // deleted since: retry, do not trust the stale ref
  EXPECT_EQ(ProbeRef(empty, r, "key", kh, 1).outcome, Probe::kTorn);
  slot[60] ^= 1;
  EXPECT_EQ(ProbeRef(slot, r, "key", kh, 1).outcome, Probe::kTorn);
}
TEST(Lookup, BlockRefReadsTheValueInOneStep) {
  KeyHash kh = HashKey("key", 1, 16);
  std::string value(5000, 'v');
  std::vector<uint8_t> block(BlockBytes(3, value.size()));
  EncodeBlock(block.data(), 1, 42, "key", value);
  Ref r{Ref::kBlock, uint32_t(block.size()), 4096, kh.fingerprint, 42};
  Probe p = ProbeRef(block.data(), r, "key", kh, 1);
  ASSERT_EQ(p.outcome, Probe::kFound);
  EXPECT_EQ(p.value, value);
  EXPECT_EQ(ProbeRef(block.data(), r, "kez", HashKey("kez", 1, 16), 1).outcome, Probe::kAbsent);
  r.version = 43;  // block freed and reused by a later write
  EXPECT_EQ(ProbeRef(block.data(), r, "key", kh, 1).outcome, Probe::kTorn);
  r.version = 42;
  r.length -= 1;  // sizes must fill exactly the ref's length
  EXPECT_EQ(ProbeRef(block.data(), r, "key", kh, 1).outcome, Probe::kTorn);
  r.length += 1;
  block[100] ^= 1;
  EXPECT_EQ(ProbeRef(block.data(), r, "key", kh, 1).outcome, Probe::kTorn);
}
}  // namespace rkv::layout
