// SPDX-License-Identifier: Apache-2.0
// EntryLocation: where one key's entry lives in the server's region, as a client caches it
// (client/location_cache.h) and as a PUT reply reports it (docs/wire-format.md, "PUT reply").
// A location is a hint, never trusted: every use re-reads what it names and verifies it with the
// table's own checks (common/table/cached_lookup.h). A wrong, stale or hostile location costs a
// fallback to the bucket-pair READ, never a wrong answer.
//
// Kinds and what a cached GET reads (one round trip each):
//   kSlotInline    the 128 B bucket slot at `anchor` (key and value in it)
//   kSlotIndirect  the bucket slot at `anchor` and the heap block at `block` (block_len bytes),
//                  posted together; the block counts only if the slot still names it
//   kOverflowSlot  the 128 B bucket header at `anchor` and the overflow slot at `block`
//   kRefBlock      the 128 B bucket header at `anchor` and the heap block at `block`
//                  (for both: the target counts only if a ref in that header, read in the same
//                  round trip, still names it with the target's version; an overflow slot is
//                  written before its ref and before the log has the write)
// Wire form (24 bytes, little-endian): u64 anchor, u64 block, u32 block_len, u8 kind,
// u8[3] zero. Thread safety: value type; pure functions.
#ifndef RKV_COMMON_TABLE_ENTRY_LOCATION_H_
#define RKV_COMMON_TABLE_ENTRY_LOCATION_H_

#include <cstdint>
#include <string_view>

#include "common/table/layout.h"

namespace rkv::layout {

struct EntryLocation {
  enum Kind : uint8_t {
    kNone = 0,
    kSlotInline = 1,
    kSlotIndirect = 2,
    kOverflowSlot = 3,
    kRefBlock = 4,
  };
  uint64_t anchor = 0;     // region offset of the bucket slot, or of the bucket header
  uint64_t block = 0;      // region offset of the heap block or overflow slot
  uint32_t block_len = 0;  // bytes to READ at `block`
  Kind kind = kNone;

  bool has_block() const { return kind != kNone && kind != kSlotInline; }
  bool via_ref() const { return kind == kOverflowSlot || kind == kRefBlock; }
};

inline constexpr size_t kEntryLocationWireSize = 24;
void EncodeEntryLocation(const EntryLocation& loc, uint8_t out[kEntryLocationWireSize]);
// False unless `bytes` is exactly one wire record whose kind is known, whose reserved bytes are
// zero and that names what its kind says within the table's geometry `g` (the geometry fields
// the OPEN reply gives: region_size, num_buckets, overflow_offset, overflow_slots): kinds 1 and 2
// an entry slot of a bucket (not its header), kinds 3 and 4 a bucket header; kind 3's target an
// overflow slot; a heap block 8-byte aligned, after the overflow area, inside the region and at
// most `max_block_len` bytes. A location that names anything else (a buggy or hostile server)
// would let a reader accept, say, an overflow slot written before the log has it.
bool DecodeEntryLocation(std::string_view bytes, const Geometry& g, uint32_t max_block_len,
                         EntryLocation* out);
// The same rules for a location built in memory.
bool EntryLocationFits(const EntryLocation& loc, const Geometry& g, uint32_t max_block_len);

}  // namespace rkv::layout

#endif  // RKV_COMMON_TABLE_ENTRY_LOCATION_H_
