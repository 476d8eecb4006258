// SPDX-License-Identifier: Apache-2.0
#include "common/table/layout.h"

#include <gtest/gtest.h>

#include <set>
#include <string>
#include <vector>

#include "common/table/lookup.h"

namespace rkv::layout {
std::string Plain(const FoundValue& v) {
  std::string s;
  v.AssignTo(&s);
  return s;
}
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
  EncodeBlock(block.data(), 3, 77, "abc", value, 0x0123456789abcdefull);
  // Stored masked: the plain value's bytes do not appear.
  EXPECT_EQ(std::string(reinterpret_cast<char*>(block.data()), block.size()).find("zzzzzzzz"),
            std::string::npos);
  BlockView b;
  ASSERT_TRUE(DecodeBlock(block.data(), block.size(), 3, 77, 3, 5000, &b));
  EXPECT_TRUE(b.KeyIs("abc"));
  EXPECT_FALSE(b.KeyIs("abd"));
  EXPECT_EQ(Plain(b.Value()), value);
  // block reused by a later write
  EXPECT_FALSE(DecodeBlock(block.data(), block.size(), 3, 78, 3, 5000, &b));
  EXPECT_FALSE(DecodeBlock(block.data(), block.size(), 3, 77, 3, 4999, &b));
  block[100] ^= 1;
  EXPECT_FALSE(DecodeBlock(block.data(), block.size(), 3, 77, 3, 5000, &b));
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
  b1[2 * kSlotSize + 50] ^= 1;  // torn slot of another key: filtered out by its size
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
  alignas(64) uint8_t b0[kBucketSize] = {}, b1[kBucketSize] = {};
  alignas(64) uint8_t inl[kSlotSize], ind[kSlotSize];
  EncodeInlineSlot(inl, 1, 5, "k", "small");
  EncodeIndirectSlot(ind, 1, 6, kh.hash, 1, 5000, 4096, 8192);
  EXPECT_EQ(inl[17], ind[17]);
  uint8_t* mix = b0 + kSlotSize;
  std::memcpy(mix, ind, 24);  // header of the new image, body of the old
  std::memcpy(mix + 24, inl + 24, kSlotSize - 24);
  EXPECT_EQ(ProbeBuckets(b0, b1, "k", kh, 1).outcome, Probe::kTorn);
  std::memcpy(mix, inl, 24);
  std::memcpy(mix + 24, ind + 24, kSlotSize - 24);
  EXPECT_EQ(ProbeBuckets(b0, b1, "k", kh, 1).outcome, Probe::kTorn);
}
void PutRef(uint8_t* at, const Ref& r) {
  uint64_t w[2] = {RefWord0(r), RefWord1(r)};
  std::memcpy(at, w, sizeof w);
}
Ref MakeRef(uint8_t type, uint8_t tag, uint32_t length, uint64_t offset, uint64_t version) {
  Ref r;
  r.type = type;
  r.tag = tag;
  r.length = length;
  r.offset = offset;
  r.version = version;
  return r;
}
TEST(Layout, RefRoundTripsEveryField) {
  Ref r = MakeRef(Ref::kBlock, 0xa5, RoundBlock(66584), (uint64_t{1} << 42) + 8 * 77,
                  0xfedcba9876543210ull);
  uint8_t b[16];
  PutRef(b, r);
  Ref d = DecodeRef(b);
  EXPECT_EQ(d.type, r.type);
  EXPECT_EQ(d.tag, r.tag);
  EXPECT_EQ(d.length, r.length);
  EXPECT_EQ(d.offset, r.offset);
  EXPECT_EQ(d.version, r.version);  // all 64 bits: no reuse of a version can match (design.md)
  Ref max = MakeRef(Ref::kSlot, 0xff, kMaxRefLength, kMaxRegionSize - 8, ~uint64_t{0});
  PutRef(b, max);
  d = DecodeRef(b);
  EXPECT_EQ(d.length, kMaxRefLength);
  EXPECT_EQ(d.offset, kMaxRegionSize - 8);
  EXPECT_EQ(d.tag, 0xff);
  EXPECT_EQ(d.type, Ref::kSlot);
  uint8_t zero[16] = {};
  EXPECT_EQ(DecodeRef(zero).type, Ref::kUnused);
}
TEST(Layout, TagComesFromBitsIndependentOfTheBucket) {
  // Keys of one bucket pair must spread over all 256 tags (the top byte, used before, gave
  // them 2-3 values in a table of 256+ buckets).
  constexpr uint32_t kBuckets = 4096;
  std::set<int> tags;
  int in_bucket = 0;
  for (int i = 0; in_bucket < 4000; ++i) {
    KeyHash kh = HashKey("user" + std::to_string(i), 7, kBuckets);
    if (kh.bucket[0] != 17) continue;
    ++in_bucket;
    tags.insert(kh.tag);
  }
  EXPECT_GE(tags.size(), 250u);
}
TEST(Lookup, OverflowRefsMatchTag) {
  alignas(64) uint8_t b0[kBucketSize] = {}, b1[kBucketSize] = {};
  KeyHash kh = HashKey("key", 1, 16);
  PutRef(b1 + kRefSize * 3, MakeRef(Ref::kSlot, kh.tag, kSlotSize, 128 * 12, 5));
  PutRef(b0, MakeRef(Ref::kSlot, uint8_t(kh.tag + 1), kSlotSize, 128 * 13, 6));
  Probe p = ProbeBuckets(b0, b1, "key", kh, 1);
  ASSERT_EQ(p.outcome, Probe::kFollow);
  ASSERT_EQ(p.target_count, 1);
  EXPECT_EQ(p.targets[0].kind, Target::kRefSlot);
  EXPECT_EQ(p.targets[0].offset, 128u * 12);
  EXPECT_EQ(p.targets[0].version, 5u);
}
TEST(Lookup, EveryMatchingRefIsFollowedNotJustFour) {
  // 16 refs share the key's tag (the seed is public: tags can be matched on purpose); the key's
  // own entry is behind the last one.
  alignas(64) uint8_t b0[kBucketSize] = {}, b1[kBucketSize] = {};
  KeyHash kh = HashKey("key", 1, 16);
  for (uint32_t r = 0; r < 2 * kRefsPerBucket; ++r)
    PutRef((r < kRefsPerBucket ? b0 : b1) + kRefSize * (r % kRefsPerBucket),
           MakeRef(Ref::kSlot, kh.tag, kSlotSize, 128 * (100 + r), 1000 + r));
  Probe p = ProbeBuckets(b0, b1, "key", kh, 1);
  ASSERT_EQ(p.outcome, Probe::kFollow);
  ASSERT_EQ(p.target_count, 16);
  alignas(64) uint8_t other[kSlotSize], mine[kSlotSize];
  FoundValue v;
  for (int i = 0; i < 15; ++i) {
    EncodeInlineSlot(other, 1, 1000 + i, "kez", "x");  // another key, same version as its ref
    EXPECT_EQ(ProbeTarget(other, p.targets[i], "key", 1, &v), TargetOutcome::kNotThis);
  }
  EncodeInlineSlot(mine, 1, 1015, "key", "mine");
  ASSERT_EQ(ProbeTarget(mine, p.targets[15], "key", 1, &v), TargetOutcome::kFound);
  EXPECT_EQ(Plain(v), "mine");
}
TEST(Lookup, TornSlotIsNotForgottenWhenRefsHoldOtherKeys) {
  // The key's slot is seen torn (being rewritten) and a ref with its tag points at another
  // key's entry: the GET must retry, not answer NOT_FOUND.
  alignas(64) uint8_t b0[kBucketSize] = {}, b1[kBucketSize] = {};
  KeyHash kh = HashKey("key", 1, 16);
  EncodeInlineSlot(b0 + 2 * kSlotSize, 1, 9, "key", "value");
  b0[2 * kSlotSize + 40] ^= 1;
  PutRef(b1, MakeRef(Ref::kSlot, kh.tag, kSlotSize, 128 * 12, 5));
  Probe p = ProbeBuckets(b0, b1, "key", kh, 1);
  ASSERT_EQ(p.outcome, Probe::kFollow);
  EXPECT_TRUE(p.torn);
  alignas(64) uint8_t other[kSlotSize];
  EncodeInlineSlot(other, 1, 5, "kez", "x");
  FoundValue v;
  EXPECT_EQ(ProbeTarget(other, p.targets[0], "key", 1, &v), TargetOutcome::kNotThis);
}
TEST(Lookup, HashTwinsInSlotsAreAllCandidates) {
  // Two indirect slots carry the key's full 64-bit hash and size (a crafted collision): the
  // first one's block holds the twin; the search goes on to the second.
  alignas(64) uint8_t b0[kBucketSize] = {}, b1[kBucketSize] = {};
  KeyHash kh = HashKey("key", 1, 16);
  EncodeIndirectSlot(b0 + kSlotSize, 1, 20, kh.hash, 3, 500, 8192, 536);
  EncodeIndirectSlot(b1 + 4 * kSlotSize, 1, 21, kh.hash, 3, 500, 16384, 536);
  Probe p = ProbeBuckets(b0, b1, "key", kh, 1);
  ASSERT_EQ(p.outcome, Probe::kFollow);
  ASSERT_EQ(p.target_count, 2);
  EXPECT_FALSE(p.torn);
  std::vector<uint8_t> twin(BlockBytes(3, 500)), mine(BlockBytes(3, 500));
  EncodeBlock(twin.data(), 1, 20, "kez", std::string(500, 't'), 0x5bd1e9955bd1e995ull);
  EncodeBlock(mine.data(), 1, 21, "key", std::string(500, 'm'), 0x5bd1e9955bd1e995ull);
  FoundValue v;
  EXPECT_EQ(ProbeTarget(twin.data(), p.targets[0], "key", 1, &v), TargetOutcome::kNotThis);
  ASSERT_EQ(ProbeTarget(mine.data(), p.targets[1], "key", 1, &v), TargetOutcome::kFound);
  EXPECT_EQ(Plain(v), std::string(500, 'm'));
  // A block reused since the slot was read (other version) is a change, not an answer.
  EncodeBlock(mine.data(), 1, 99, "key", std::string(500, 'm'), 0x5bd1e9955bd1e995ull);
  EXPECT_EQ(ProbeTarget(mine.data(), p.targets[1], "key", 1, &v), TargetOutcome::kChanged);
}
TEST(Lookup, SlotRefChecksTheVersionOfItsTarget) {
  KeyHash kh = HashKey("key", 1, 16);
  alignas(64) uint8_t slot[kSlotSize];
  const uint64_t version = (uint64_t{7} << 32) | 5;
  EncodeInlineSlot(slot, 1, version, "key", "val");
  Target t{};
  t.kind = Target::kRefSlot;
  t.length = kSlotSize;
  t.version = version;
  FoundValue v;
  ASSERT_EQ(ProbeTarget(slot, t, "key", 1, &v), TargetOutcome::kFound);
  EXPECT_EQ(Plain(v), "val");
  t.version = 5;  // equal low 32 bits: a version 2^32 writes older does not match
  EXPECT_EQ(ProbeTarget(slot, t, "key", 1, &v), TargetOutcome::kChanged);
  t.version = version;
  EXPECT_EQ(ProbeTarget(slot, t, "other", 1, &v), TargetOutcome::kNotThis);
  uint8_t empty[kSlotSize] = {};  // deleted since: retry, do not trust the stale ref
  EXPECT_EQ(ProbeTarget(empty, t, "key", 1, &v), TargetOutcome::kChanged);
  slot[60] ^= 1;
  EXPECT_EQ(ProbeTarget(slot, t, "key", 1, &v), TargetOutcome::kChanged);
  (void)kh;
}
TEST(Lookup, BlockRefReadsTheValueInOneStep) {
  std::string value(5001, 'v');
  std::vector<uint8_t> block(RoundBlock(BlockBytes(3, value.size())));
  EncodeBlock(block.data(), 1, 42, "key", value, 0x5bd1e9955bd1e995ull);
  Target t{};
  t.kind = Target::kRefBlock;
  t.length = uint32_t(block.size());
  t.offset = 4096;
  t.version = 42;
  FoundValue v;
  ASSERT_EQ(ProbeTarget(block.data(), t, "key", 1, &v), TargetOutcome::kFound);
  EXPECT_EQ(Plain(v), value);
  EXPECT_EQ(ProbeTarget(block.data(), t, "kez", 1, &v), TargetOutcome::kNotThis);
  t.version = 43;  // block freed and reused by a later write
  EXPECT_EQ(ProbeTarget(block.data(), t, "key", 1, &v), TargetOutcome::kChanged);
  t.version = 42;
  t.length -= 8;  // the sizes must fill exactly the ref's (rounded) length
  EXPECT_EQ(ProbeTarget(block.data(), t, "key", 1, &v), TargetOutcome::kChanged);
  t.length += 8;
  block[100] ^= 1;
  EXPECT_EQ(ProbeTarget(block.data(), t, "key", 1, &v), TargetOutcome::kChanged);
}
// A client chooses its key and value bytes; a reader that follows a stale pointer into the space
// of that client's block must not accept an image the client planted there. The bytes are stored
// XORed with a mask the server draws after the client sent them, so a planted image is noise.
TEST(Layout, PlantedBlockImageInsideAValueIsNotAccepted) {
  // The victim's entry: key "key", version 42, a 3000-byte value, at some offset A.
  const uint64_t seed = 9, version = 42;
  std::vector<uint8_t> image(BlockBytes(3, 3000));
  EncodeBlock(image.data(), seed, version, "key", std::string(3000, 'X'), 0);  // plain image
  // The attacker's value: 8 bytes of padding, then that image, so that with a 32-byte header
  // and an 8-byte key the image starts at block offset 48 (8-aligned, like every block start).
  std::string evil(8, 'p');
  evil.append(reinterpret_cast<const char*>(image.data()), image.size());
  std::vector<uint8_t> block(RoundBlock(BlockBytes(8, evil.size())) + 64);
  // What the victim's stale slot names: the planted image's place, version and sizes.
  Target t{};
  t.kind = Target::kSlotBlock;
  t.length = BlockBytes(3, 3000);
  t.version = version;
  t.key_size = 3;
  t.value_size = 3000;
  FoundValue v;
  for (uint64_t mask : {0x1ull, 0x8badf00ddeadbeefull, 0xffffffffffffffffull}) {
    EncodeBlock(block.data(), seed, 1000, "attacker", evil, mask);
    EXPECT_EQ(ProbeTarget(block.data() + 48, t, "key", seed, &v), TargetOutcome::kChanged) << mask;
  }
  // Unmasked (mask 0 is never drawn), the planted image would pass: the test plants it right.
  EncodeBlock(block.data(), seed, 1000, "attacker", evil, 0);
  EXPECT_EQ(ProbeTarget(block.data() + 48, t, "key", seed, &v), TargetOutcome::kFound);
}
TEST(Layout, MaskRoundTripsEveryLengthAndPhase) {
  for (size_t ks : {1, 3, 8, 13}) {
    for (size_t vs : {0, 1, 7, 8, 9, 100}) {
      std::string key(ks, 'k'), value;
      for (size_t i = 0; i < vs; ++i) value.push_back(char(i * 37));
      std::vector<uint8_t> block(BlockBytes(ks, vs));
      EncodeBlock(block.data(), 5, 7, key, value, 0xa1b2c3d4e5f60718ull);
      BlockView b;
      ASSERT_TRUE(DecodeBlock(block.data(), block.size(), 5, 7, ks, vs, &b));
      EXPECT_TRUE(b.KeyIs(key));
      EXPECT_EQ(Plain(b.Value()), value) << ks << " " << vs;
    }
  }
}
}  // namespace rkv::layout
