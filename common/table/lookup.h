// SPDX-License-Identifier: Apache-2.0
// Lookup: the pure decision steps of a GET, given the bytes of a key's two candidate buckets and
// then of what they point at. Shared by the client's GET paths (bytes fetched with RDMA READs)
// and the server's table (bytes in local memory), so that both follow one rule.
//
// Step 1, ProbeBuckets: the key's inline entry (found), or the targets that may hold it (the heap
// block of every indirect slot whose 64-bit hash and key size match, the target of every overflow
// ref whose tag matches), or absent, each with a flag saying whether a slot that may hold the key
// was seen torn. Every candidate is kept: a 64-bit hash collision (the hash seed is public, so
// colliding keys can be made on purpose) or a tag shared by several refs costs extra READs,
// never a wrong answer.
// Step 2, ProbeTarget per target READ: found, not this key (the target is exactly the entry that
// its slot or ref published, and it holds another key), or changed (re-read the buckets).
// Outcome of a GET: found if any target holds the key; otherwise absent if nothing was torn or
// changed, else re-read (a key being rewritten is never reported absent).
// Thread safety: pure functions over the bytes given.
#ifndef RKV_COMMON_TABLE_LOOKUP_H_
#define RKV_COMMON_TABLE_LOOKUP_H_

#include <cstdint>
#include <string_view>

#include "common/table/layout.h"

namespace rkv::layout {

// Every entry slot of both buckets plus every ref of both headers.
inline constexpr int kMaxTargets = 2 * (kSlotsPerBucket - 1) + 2 * kRefsPerBucket;

// Something to READ (length bytes at offset) and decide with ProbeTarget. No member
// initializers: a Probe's array of them is not zeroed on every GET (target_count bounds it).
struct Target {
  enum Kind : uint8_t {
    kSlotBlock,  // the heap block of an indirect slot: exactly version, key_size, value_size
    kRefSlot,    // an overflow slot a ref points at: version must match
    kRefBlock,   // a heap block a ref points at: version must match, length is exact
  };
  Kind kind;
  uint32_t length;
  uint64_t offset;
  uint64_t version;
  uint32_t key_size, value_size;  // kSlotBlock only
  // Where the bucket pair names it (for the client's location cache): kSlotBlock, the entry slot
  // bucket * (kSlotsPerBucket - 1) + slot - 1; refs, the bucket (0 or 1) whose header holds the
  // ref; -1 when not named by a bucket pair.
  int8_t source;
};

struct Probe {
  enum Outcome {
    kFound,   // inline entry: the value is in `value` (points into the bytes probed)
    kFollow,  // READ every target, decide each with ProbeTarget
    kAbsent,  // no entry for the key
    kTorn,    // an inconsistent slot might hold the key and nothing else can: re-read
  } outcome = kAbsent;
  std::string_view value;
  // kFound: the entry slot that held it, numbered as Target::source.
  int found_at = -1;
  // A slot that might hold the key failed its checksum: if no target holds the key, re-read.
  bool torn = false;
  int target_count = 0;
  Target targets[kMaxTargets];
  // Slots whose checksum was computed (the rest were skipped by the tag/size filter).
  int slots_verified = 0;
};

// Scans both candidate buckets (entry slots, then header refs).
Probe ProbeBuckets(const uint8_t* bucket0, const uint8_t* bucket1, std::string_view key,
                   const KeyHash& kh, uint64_t seed);

enum class TargetOutcome {
  kFound,    // `*value` refers to `bytes` (a block's value is masked: FoundValue::AssignTo)
  kNotThis,  // the entry its slot or ref published, holding another key: skip it
  kChanged,  // rewritten, freed or reused since the buckets were read: re-read them
};
// Decides one target from `target.length` bytes read at `target.offset`.
TargetOutcome ProbeTarget(const uint8_t* bytes, const Target& target, std::string_view key,
                          uint64_t seed, FoundValue* value);

}  // namespace rkv::layout

#endif  // RKV_COMMON_TABLE_LOOKUP_H_
