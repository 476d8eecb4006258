// SPDX-License-Identifier: Apache-2.0
// CachedLookup: the decision step of a GET through a cached location (entry_location.h), given
// the bytes read at the location's anchor (always one 128 B slot or bucket header) and, for
// kinds with a block, the block_len bytes read at its block in the same round trip.
//
// The rule (docs/design.md, "The location cache", argues it): the server publishes a slot image
// or ref of a key only as part of a write of that key, and unpublishes it (zeroes the slot,
// rewrites it, or repoints the ref) before it acknowledges any later write or delete of the key.
// So a slot that verifies and holds the key holds a value that is current at the moment it was
// read, or is being written; and a heap block is accepted only if the slot or ref read in the
// same round trip names exactly that block and version. Everything else is kMiss (fall back to
// the bucket-pair READ) or kFollow (the slot verifies and holds the key, but now names another
// block: READ `follow` and decide it with ProbeTarget).
// Thread safety: pure functions over the bytes given.
#ifndef RKV_COMMON_TABLE_CACHED_LOOKUP_H_
#define RKV_COMMON_TABLE_CACHED_LOOKUP_H_

#include <cstdint>
#include <string_view>

#include "common/table/entry_location.h"
#include "common/table/layout.h"
#include "common/table/lookup.h"

namespace rkv::layout {

enum class CachedOutcome {
  kFound,   // *value is the key's value (refers into the bytes given)
  kFollow,  // *follow is the key's heap block, per a slot that verified: READ and ProbeTarget it
  kMiss,    // not here (any more), torn, or another key: read the bucket pair
};

// `anchor` is kSlotSize bytes read at loc.anchor; `block` is loc.block_len bytes read at
// loc.block (ignored unless loc.has_block()). On kFound or kFollow, *now is the location the
// bytes show (to refresh the cache): the same as `loc` unless the entry moved or changed kind.
CachedOutcome ProbeCached(const EntryLocation& loc, const uint8_t* anchor, const uint8_t* block,
                          std::string_view key, const KeyHash& kh, uint64_t seed, FoundValue* value,
                          Target* follow, EntryLocation* now);

// Where the entry a bucket-pair probe found lives, for the cache. `pair_offset` is the region
// offset of the pair's first bucket; `target` is the index of the target that held the key, or -1
// for an inline entry found in a slot (Probe::found_at).
EntryLocation LocationOfFound(const Probe& probe, int target, uint64_t pair_offset);

}  // namespace rkv::layout

#endif  // RKV_COMMON_TABLE_CACHED_LOOKUP_H_
