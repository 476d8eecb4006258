#include "common/lookup.h"

namespace rkv::layout {

Probe ProbeSlots(const uint8_t* slots, int count, std::string_view key, const KeyHash& kh,
                 uint64_t seed) {
  Probe p;
  bool torn = false;
  for (int i = 0; i < count; ++i) {
    SlotView v;
    SlotState s = DecodeSlot(slots + size_t(i) * kSlotSize, seed, &v);
    if (s == SlotState::kTorn) {
      torn = true;
      continue;
    }
    if (s != SlotState::kValid) continue;
    if (v.kind == kInline && v.key == key) {
      p.outcome = Probe::kFoundInline;
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
    if (p.outcome == Probe::kFoundInline || p.outcome == Probe::kIndirect) return p;
    torn |= p.outcome == Probe::kTorn;
  }
  Probe p;
  for (const uint8_t* b : buckets) {
    for (uint32_t r = 0; r < kRefsPerBucket; ++r) {
      uint64_t ref = LoadU64(b + 8 * r);
      if (ref == 0 || RefFingerprint(ref) != kh.fingerprint) continue;
      if (p.overflow_count < kMaxOverflowCandidates) p.overflow[p.overflow_count++] = RefIndex(ref);
    }
  }
  if (p.overflow_count > 0) {
    p.outcome = Probe::kOverflow;
  } else {
    p.outcome = torn ? Probe::kTorn : Probe::kAbsent;
  }
  return p;
}

}  // namespace rkv::layout
