// SPDX-License-Identifier: Apache-2.0
#include "common/table/cached_lookup.h"

namespace rkv::layout {

namespace {
// A verified slot that holds `key`: inline (found), or indirect with the key's hash and size.
CachedOutcome FromSlot(const EntryLocation& loc, const uint8_t* slot_bytes, const uint8_t* block,
                       std::string_view key, const KeyHash& kh, uint64_t seed, FoundValue* value,
                       Target* follow, EntryLocation* now) {
  SlotView v;
  if (DecodeSlot(slot_bytes, seed, &v) != SlotState::kValid) return CachedOutcome::kMiss;
  if (v.kind == kInline) {
    if (v.key != key) return CachedOutcome::kMiss;  // emptied and reused by another key
    *value = FoundValue{v.value, 0, 0};
    *now = EntryLocation{loc.anchor, 0, 0, EntryLocation::kSlotInline};
    return CachedOutcome::kFound;
  }
  if (v.kind != kIndirect || v.key_hash != kh.hash || v.key_size != key.size())
    return CachedOutcome::kMiss;
  const uint32_t len = BlockBytes(v.key_size, v.value_size);
  *now = EntryLocation{loc.anchor, v.block_offset, len, EntryLocation::kSlotIndirect};
  if (loc.kind == EntryLocation::kSlotIndirect && v.block_offset == loc.block &&
      len == loc.block_len) {
    // The slot, read in this round trip, names this block: accept it only with the slot's
    // exact version and sizes (a block freed and reused, or torn, fails the checksum or version).
    BlockView b;
    if (!DecodeBlock(block, len, seed, v.version, v.key_size, v.value_size, &b))
      return CachedOutcome::kMiss;
    if (!b.KeyIs(key)) return CachedOutcome::kMiss;  // a 64-bit hash twin
    *value = b.Value();
    return CachedOutcome::kFound;
  }
  // The key's slot names another block (rewritten or moved since it was cached): follow it.
  follow->kind = Target::kSlotBlock;
  follow->offset = v.block_offset;
  follow->length = len;
  follow->version = v.version;
  follow->key_size = v.key_size;
  follow->value_size = v.value_size;
  follow->source = -1;
  return CachedOutcome::kFollow;
}

CachedOutcome FromHeader(const EntryLocation& loc, const uint8_t* header, const uint8_t* target,
                         std::string_view key, const KeyHash& kh, uint64_t seed, FoundValue* value,
                         EntryLocation* now) {
  const uint8_t type = loc.kind == EntryLocation::kOverflowSlot ? Ref::kSlot : Ref::kBlock;
  for (uint32_t r = 0; r < kRefsPerBucket; ++r) {
    Ref ref = DecodeRef(header + kRefSize * r);
    if (ref.type != type || ref.tag != kh.tag || ref.offset != loc.block ||
        ref.length != loc.block_len)
      continue;
    // The ref, read in this round trip, names this target: accept it only with the ref's
    // exact version (ProbeTarget's rule for a target a bucket-pair READ found).
    Target t{};
    t.kind = type == Ref::kSlot ? Target::kRefSlot : Target::kRefBlock;
    t.offset = ref.offset;
    t.length = ref.length;
    t.version = ref.version;
    if (ProbeTarget(target, t, key, seed, value) != TargetOutcome::kFound) continue;
    *now = loc;
    return CachedOutcome::kFound;
  }
  return CachedOutcome::kMiss;
}
}  // namespace

CachedOutcome ProbeCached(const EntryLocation& loc, const uint8_t* anchor, const uint8_t* block,
                          std::string_view key, const KeyHash& kh, uint64_t seed, FoundValue* value,
                          Target* follow, EntryLocation* now) {
  switch (loc.kind) {
    case EntryLocation::kSlotInline:
    case EntryLocation::kSlotIndirect:
      return FromSlot(loc, anchor, block, key, kh, seed, value, follow, now);
    case EntryLocation::kOverflowSlot:
    case EntryLocation::kRefBlock:
      return FromHeader(loc, anchor, block, key, kh, seed, value, now);
    case EntryLocation::kNone:
      break;
  }
  return CachedOutcome::kMiss;
}

EntryLocation LocationOfFound(const Probe& probe, int target, uint64_t pair_offset) {
  auto slot_offset = [&](int source) {
    // source = bucket * (kSlotsPerBucket - 1) + entry slot index
    const int b = source / int(kSlotsPerBucket - 1), i = source % int(kSlotsPerBucket - 1);
    return pair_offset + uint64_t(b) * kBucketSize + uint64_t(i + 1) * kSlotSize;
  };
  if (target < 0) {
    if (probe.found_at < 0) return {};
    return EntryLocation{slot_offset(probe.found_at), 0, 0, EntryLocation::kSlotInline};
  }
  const Target& t = probe.targets[target];
  if (t.source < 0) return {};
  switch (t.kind) {
    case Target::kSlotBlock:
      return EntryLocation{slot_offset(t.source), t.offset, t.length, EntryLocation::kSlotIndirect};
    case Target::kRefSlot:
    case Target::kRefBlock:
      return EntryLocation{
          pair_offset + uint64_t(t.source) * kBucketSize, t.offset, t.length,
          t.kind == Target::kRefSlot ? EntryLocation::kOverflowSlot : EntryLocation::kRefBlock};
  }
  return {};
}

}  // namespace rkv::layout
