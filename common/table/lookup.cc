// SPDX-License-Identifier: Apache-2.0
#include "common/table/lookup.h"

namespace rkv::layout {

namespace {
// Scans `count` entry slots: the inline entry of the key (returns true), or adds the heap block
// of every indirect slot with the key's hash and size to p's targets.
bool ScanSlots(const uint8_t* slots, int count, int first_source, std::string_view key,
               const KeyHash& kh, uint64_t seed, Probe* p) {
  for (int i = 0; i < count; ++i) {
    const uint8_t* slot = slots + size_t(i) * kSlotSize;
    uint16_t key_size;
    std::memcpy(&key_size, slot + 18, 2);
    // Empty, or cannot hold this key (layout.h, KeyTag): skip without the checksum.
    if (slot[16] == kEmpty || slot[17] != kh.tag || key_size != key.size()) continue;
    ++p->slots_verified;
    SlotView v;
    SlotState s = DecodeSlot(slot, seed, &v);
    if (s == SlotState::kTorn) {
      p->torn = true;
      continue;
    }
    if (s != SlotState::kValid) continue;
    if (v.kind == kInline && v.key == key) {
      p->outcome = Probe::kFound;
      p->value = v.value;
      p->found_at = first_source + i;
      return true;
    }
    if (v.kind == kIndirect && v.key_hash == kh.hash && v.key_size == key.size()) {
      Target& t = p->targets[p->target_count++];
      t.kind = Target::kSlotBlock;
      t.offset = v.block_offset;
      t.length = BlockBytes(v.key_size, v.value_size);
      t.version = v.version;
      t.key_size = v.key_size;
      t.value_size = v.value_size;
      t.source = static_cast<int8_t>(first_source + i);
    }
  }
  return false;
}
}  // namespace

Probe ProbeBuckets(const uint8_t* bucket0, const uint8_t* bucket1, std::string_view key,
                   const KeyHash& kh, uint64_t seed) {
  Probe p;
  const uint8_t* buckets[2] = {bucket0, bucket1};
  constexpr int kEntrySlots = kSlotsPerBucket - 1;
  for (int i = 0; i < 2; ++i)
    if (ScanSlots(buckets[i] + kSlotSize, kEntrySlots, i * kEntrySlots, key, kh, seed, &p))
      return p;
  for (int i = 0; i < 2; ++i) {
    const uint8_t* b = buckets[i];
    for (uint32_t r = 0; r < kRefsPerBucket; ++r) {
      Ref ref = DecodeRef(b + kRefSize * r);
      if (ref.type == Ref::kUnused || ref.tag != kh.tag) continue;
      Target& t = p.targets[p.target_count++];
      t.kind = ref.type == Ref::kSlot ? Target::kRefSlot : Target::kRefBlock;
      t.offset = ref.offset;
      t.length = ref.length;
      t.version = ref.version;
      t.source = static_cast<int8_t>(i);
    }
  }
  if (p.target_count > 0) {
    p.outcome = Probe::kFollow;
  } else {
    p.outcome = p.torn ? Probe::kTorn : Probe::kAbsent;
  }
  return p;
}

TargetOutcome ProbeTarget(const uint8_t* bytes, const Target& target, std::string_view key,
                          uint64_t seed, FoundValue* value) {
  BlockView b;
  switch (target.kind) {
    case Target::kSlotBlock:
      // The slot named this exact version: a block that verifies is the entry the slot
      // published (or a moved copy of it). Another key there is a 64-bit hash twin.
      if (!DecodeBlock(bytes, target.length, seed, target.version, target.key_size,
                       target.value_size, &b))
        return TargetOutcome::kChanged;
      break;
    case Target::kRefBlock:
      if (!DecodeRefBlock(bytes, target.length, seed, target.version, &b))
        return TargetOutcome::kChanged;
      break;
    case Target::kRefSlot: {
      SlotView s;
      if (target.length != kSlotSize || DecodeSlot(bytes, seed, &s) != SlotState::kValid ||
          s.version != target.version)
        return TargetOutcome::kChanged;  // emptied, rewritten or torn since the ref was read
      // Overflow slots hold inline entries only (server/store/table.h).
      if (s.kind != kInline || s.key != key) return TargetOutcome::kNotThis;
      *value = FoundValue{s.value, 0, 0};
      return TargetOutcome::kFound;
    }
  }
  if (!b.KeyIs(key)) return TargetOutcome::kNotThis;
  *value = b.Value();
  return TargetOutcome::kFound;
}

}  // namespace rkv::layout
