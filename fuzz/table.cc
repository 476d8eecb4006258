// SPDX-License-Identifier: Apache-2.0
// Harness: the GET path's decoders of the table bytes a client READs from the server's region
// (common/table/lookup.h, layout.h): ProbeBuckets on a key's two candidate buckets, then
// ProbeTarget on what each target names (a heap block behind an indirect slot, an overflow slot
// or a block behind a ref). The bytes may be torn by concurrent writers, or come from a hostile
// server; checksums gate most of it, so the seeds hold valid entries for the harness's key.
// Input: two buckets (2 x 1 KiB, zero-padded), then the bytes every target READ returns
// (zero-padded to the target's length).
// Invariants: at most kMaxTargets targets; ref targets are 8-byte aligned with lengths the ref
// format can express; an inline hit's value lies inside the buckets; a target hit's value lies
// inside the target's bytes and unmasks to a value of the same size.
#include <algorithm>
#include <cstring>
#include <string>
#include <vector>

#include "common/table/layout.h"
#include "common/table/lookup.h"
#include "fuzz/fuzz_util.h"

namespace {
using namespace rkv;
using namespace rkv::layout;

constexpr uint64_t kSeed = 0x5eed5eed5eed5eedull;
constexpr uint32_t kNumBuckets = 64;
constexpr std::string_view kKey = "fuzz:key";
constexpr size_t kPair = 2 * kBucketSize;

bool Inside(std::string_view v, const uint8_t* begin, size_t size) {
  const char* b = reinterpret_cast<const char*>(begin);
  return v.empty() || (v.data() >= b && v.data() + v.size() <= b + size);
}

void Seeds(const fuzz::SeedWriter& w) {
  const KeyHash kh = HashKey(kKey, kSeed, kNumBuckets);
  auto slot = [](std::string* s, int bucket, int i) {
    return reinterpret_cast<uint8_t*>(&(*s)[size_t(bucket) * kBucketSize + size_t(i) * kSlotSize]);
  };
  auto ref = [](std::string* s, int bucket, int r, const Ref& ref) {
    uint64_t w0 = RefWord0(ref), w1 = RefWord1(ref);
    std::memcpy(&(*s)[size_t(bucket) * kBucketSize + size_t(r) * kRefSize], &w0, 8);
    std::memcpy(&(*s)[size_t(bucket) * kBucketSize + size_t(r) * kRefSize + 8], &w1, 8);
  };
  // An inline entry in the second bucket, and another key's in the first.
  std::string in(kPair, '\0');
  EncodeInlineSlot(slot(&in, 0, 3), kSeed, 5, "other", "x");
  EncodeInlineSlot(slot(&in, 1, 2), kSeed, 9, kKey, "inline value");
  w.Write("inline", in);
  // An indirect slot and the block it names.
  const std::string value(300, 'v');
  const uint32_t block_bytes = BlockBytes(kKey.size(), value.size());
  std::string ind(kPair, '\0');
  EncodeIndirectSlot(slot(&ind, 0, 1), kSeed, 11, kh.hash, kKey.size(), value.size(), 4096,
                     RoundBlock(block_bytes));
  std::string block(RoundBlock(block_bytes), '\0');
  EncodeBlock(reinterpret_cast<uint8_t*>(block.data()), kSeed, 11, kKey, value,
              0x0123456789abcdefull);
  w.Write("indirect", ind + block);
  // Overflow refs: one to a slot, one to a block.
  std::string ovf(kPair, '\0');
  Ref to_slot;
  to_slot.type = Ref::kSlot;
  to_slot.tag = kh.tag;
  to_slot.length = kSlotSize;
  to_slot.offset = 8192;
  to_slot.version = 13;
  ref(&ovf, 0, 2, to_slot);
  std::string oslot(kSlotSize, '\0');
  EncodeInlineSlot(reinterpret_cast<uint8_t*>(oslot.data()), kSeed, 13, kKey, "overflow");
  w.Write("ref-slot", ovf + oslot);
  std::string ovb(kPair, '\0');
  Ref to_block = to_slot;
  to_block.type = Ref::kBlock;
  to_block.length = RoundBlock(block_bytes);
  to_block.version = 11;
  ref(&ovb, 1, 7, to_block);
  w.Write("ref-block", ovb + block);
}
}  // namespace

RKV_FUZZ_SEEDS(Seeds)

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::vector<uint8_t> buckets(kPair, 0);
  std::memcpy(buckets.data(), data, std::min(size, kPair));
  const uint8_t* pool = data + std::min(size, kPair);
  const size_t pool_size = size - std::min(size, kPair);

  const KeyHash kh = HashKey(kKey, kSeed, kNumBuckets);
  const Probe p = ProbeBuckets(buckets.data(), buckets.data() + kBucketSize, kKey, kh, kSeed);
  FUZZ_CHECK(p.target_count >= 0 && p.target_count <= kMaxTargets);
  FUZZ_CHECK(p.slots_verified <= int(2 * (kSlotsPerBucket - 1)));
  if (p.outcome == Probe::kFound) {
    FUZZ_CHECK(Inside(p.value, buckets.data(), buckets.size()));
    FUZZ_CHECK(p.value.size() + kKey.size() <= kInlineCapacity);
    return 0;
  }
  FUZZ_CHECK((p.outcome == Probe::kFollow) == (p.target_count > 0));
  for (int i = 0; i < p.target_count; ++i) {
    const Target& t = p.targets[i];
    if (t.kind != Target::kSlotBlock) {
      FUZZ_CHECK(t.offset % kRefUnit == 0 && t.offset < kMaxRegionSize);
      FUZZ_CHECK(t.length % kRefUnit == 0 && t.length <= kMaxRefLength);
    }
    // The client refuses to READ more than its block area (client/read_plan.cc); the bytes it
    // hands ProbeTarget are exactly t.length long.
    if (t.length == 0 || t.length > kMaxRefLength) continue;
    std::vector<uint8_t> bytes(t.length, 0);
    std::memcpy(bytes.data(), pool, std::min<size_t>(pool_size, t.length));
    FoundValue v;
    if (ProbeTarget(bytes.data(), t, kKey, kSeed, &v) != TargetOutcome::kFound) continue;
    FUZZ_CHECK(Inside(v.bytes, bytes.data(), bytes.size()));
    std::string plain;
    v.AssignTo(&plain);
    FUZZ_CHECK(plain.size() == v.size());
  }
  return 0;
}
