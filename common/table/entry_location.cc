// SPDX-License-Identifier: Apache-2.0
#include "common/table/entry_location.h"

#include <cstring>

namespace rkv::layout {

namespace {
void PutU64(uint8_t* p, uint64_t v) {
  for (int i = 0; i < 8; ++i) p[i] = static_cast<uint8_t>(v >> (8 * i));
}
void PutU32(uint8_t* p, uint32_t v) {
  for (int i = 0; i < 4; ++i) p[i] = static_cast<uint8_t>(v >> (8 * i));
}
uint64_t GetU64(const uint8_t* p) {
  uint64_t v = 0;
  for (int i = 7; i >= 0; --i) v = (v << 8) | p[i];
  return v;
}
uint32_t GetU32(const uint8_t* p) {
  uint32_t v = 0;
  for (int i = 3; i >= 0; --i) v = (v << 8) | p[i];
  return v;
}
}  // namespace

void EncodeEntryLocation(const EntryLocation& loc, uint8_t out[kEntryLocationWireSize]) {
  std::memset(out, 0, kEntryLocationWireSize);
  PutU64(out, loc.anchor);
  PutU64(out + 8, loc.block);
  PutU32(out + 16, loc.block_len);
  out[20] = loc.kind;
}

bool EntryLocationFits(const EntryLocation& loc, const Geometry& g, uint32_t max_block_len) {
  if (loc.kind == EntryLocation::kNone || loc.kind > EntryLocation::kRefBlock) return false;
  // The anchor: a slot inside the index (the region's first index_bytes()).
  if (loc.anchor % kSlotSize != 0 || loc.anchor >= g.index_bytes() ||
      g.index_bytes() > g.region_size)
    return false;
  const bool header = loc.anchor % kBucketSize == 0;
  if (loc.via_ref() != header) return false;  // refs live in headers; entries in the other slots
  if (!loc.has_block()) return loc.block == 0 && loc.block_len == 0;
  const uint64_t overflow_end = g.overflow_offset + uint64_t{g.overflow_slots} * kSlotSize;
  if (loc.kind == EntryLocation::kOverflowSlot)
    return loc.block_len == kSlotSize && loc.block % kSlotSize == 0 &&
           loc.block >= g.overflow_offset && loc.block < overflow_end;
  return loc.block % kRefUnit == 0 && loc.block_len > kBlockHeaderSize &&
         loc.block_len <= max_block_len && loc.block >= overflow_end &&
         loc.block <= g.region_size && g.region_size - loc.block >= loc.block_len;
}

bool DecodeEntryLocation(std::string_view bytes, const Geometry& g, uint32_t max_block_len,
                         EntryLocation* out) {
  if (bytes.size() != kEntryLocationWireSize) return false;
  const auto* p = reinterpret_cast<const uint8_t*>(bytes.data());
  if (p[21] != 0 || p[22] != 0 || p[23] != 0) return false;
  EntryLocation loc;
  loc.anchor = GetU64(p);
  loc.block = GetU64(p + 8);
  loc.block_len = GetU32(p + 16);
  if (p[20] > EntryLocation::kRefBlock) return false;
  loc.kind = static_cast<EntryLocation::Kind>(p[20]);
  if (!EntryLocationFits(loc, g, max_block_len)) return false;
  *out = loc;
  return true;
}

}  // namespace rkv::layout
