#include "common/lookup.h"

namespace rkv::layout {

Probe ProbeSlots(const uint8_t* slots, int count, std::string_view key, const KeyHash& kh,
                 uint64_t seed) {
  Probe p;
  bool torn = false;
  const uint8_t tag = KeyTag(kh.hash);
  for (int i = 0; i < count; ++i) {
    const uint8_t* slot = slots + size_t(i) * kSlotSize;
    uint16_t key_size;
    std::memcpy(&key_size, slot + 18, 2);
    // Empty, or cannot hold this key (layout.h, KeyTag): skip without the checksum.
    if (slot[16] == kEmpty || slot[17] != tag || key_size != key.size()) continue;
    SlotView v;
    SlotState s = DecodeSlot(slot, seed, &v);
    if (s == SlotState::kTorn) {
      torn = true;
      continue;
    }
    if (s != SlotState::kValid) continue;
    if (v.kind == kInline && v.key == key) {
      p.outcome = Probe::kFound;
      p.value = v.value;
      p.slot = v;
      return p;
    }
    if (v.kind == kIndirect && v.key_hash == kh.hash && v.key_size == key.size()) {
      p.outcome = Probe::kIndirect;
      p.slot = v;
      return p;
    }
  }
  p.outcome = torn ? Probe::kTorn : Probe::kAbsent;
  return p;
}

Probe ProbeBuckets(const uint8_t* bucket0, const uint8_t* bucket1, std::string_view key,
                   const KeyHash& kh, uint64_t seed) {
  const uint8_t* buckets[2] = {bucket0, bucket1};
  bool torn = false;
  for (const uint8_t* b : buckets) {
    Probe p = ProbeSlots(b + kSlotSize, kSlotsPerBucket - 1, key, kh, seed);
    if (p.outcome == Probe::kFound || p.outcome == Probe::kIndirect) return p;
    torn |= p.outcome == Probe::kTorn;
  }
  Probe p;
  for (const uint8_t* b : buckets) {
    for (uint32_t r = 0; r < kRefsPerBucket; ++r) {
      Ref ref = DecodeRef(b + kRefSize * r);
      if (ref.type == Ref::kUnused || ref.fingerprint != kh.fingerprint) continue;
      if (p.ref_count < kMaxOverflowCandidates) p.refs[p.ref_count++] = ref;
    }
  }
  if (p.ref_count > 0) {
    p.outcome = Probe::kOverflow;
  } else {
    p.outcome = torn ? Probe::kTorn : Probe::kAbsent;
  }
  return p;
}

Probe ProbeRef(const uint8_t* bytes, const Ref& ref, std::string_view key, const KeyHash& kh,
               uint64_t seed) {
  Probe p;
  p.outcome = Probe::kTorn;
  if (ref.type == Ref::kBlock) {
    std::string_view k, v;
    if (!DecodeRefBlock(bytes, ref.length, seed, ref.version, &k, &v)) return p;
    // The block is exactly the entry the ref published: another key means a fingerprint twin.
    p.outcome = k == key ? Probe::kFound : Probe::kAbsent;
    p.value = v;
    return p;
  }
  if (ref.type != Ref::kSlot || ref.length != kSlotSize) return p;
  SlotView v;
  if (DecodeSlot(bytes, seed, &v) != SlotState::kValid ||
      static_cast<uint32_t>(v.version) != ref.version)
    return p;  // emptied, rewritten or torn since the ref was read
  p = ProbeSlots(bytes, 1, key, kh, seed);
  return p;
}

}  // namespace rkv::layout
