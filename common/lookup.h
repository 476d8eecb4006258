// Lookup: the pure decision step of a GET, given the bytes of a key's two candidate buckets.
// Shared by the client's GET path (buckets fetched with RDMA READs) and the server/tests
// (buckets read from local memory), so that both follow one rule.
// Thread safety: pure function over the bytes given.
#ifndef RKV_COMMON_LOOKUP_H_
#define RKV_COMMON_LOOKUP_H_

#include <cstdint>
#include <string_view>

#include "common/layout.h"

namespace rkv::layout {

inline constexpr int kMaxOverflowCandidates = 4;

struct Probe {
  enum Outcome {
    kFound,     // value is in `value` (points into the bytes probed)
    kIndirect,  // read the block described by `slot`, then check it
    kOverflow,  // READ what the refs in `refs` point at, then decide each with ProbeRef
    kAbsent,    // no entry for the key
    kTorn,      // an inconsistent slot might hold the key: re-read
  } outcome = kAbsent;
  std::string_view value;
  SlotView slot;
  int ref_count = 0;
  Ref refs[kMaxOverflowCandidates];
};

// Scans `count` slots starting at `slots` for the key.
Probe ProbeSlots(const uint8_t* slots, int count, std::string_view key, const KeyHash& kh,
                 uint64_t seed);
// Scans both candidate buckets (entry slots, then header refs).
Probe ProbeBuckets(const uint8_t* bucket0, const uint8_t* bucket1, std::string_view key,
                   const KeyHash& kh, uint64_t seed);
// Decides one ref from `ref.length` bytes read at `ref.offset`: kFound, kIndirect (an overflow
// slot holding a heap entry), kAbsent (the ref is another key's with the same fingerprint) or
// kTorn (the target changed since the ref was read: re-read the buckets).
Probe ProbeRef(const uint8_t* bytes, const Ref& ref, std::string_view key, const KeyHash& kh,
               uint64_t seed);

}  // namespace rkv::layout

#endif  // RKV_COMMON_LOOKUP_H_
