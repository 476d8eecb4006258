// SPDX-License-Identifier: Apache-2.0
// LocationCache: key hash -> where the key's entry was last seen in the server's region
// (common/table/entry_location.h), so that a GET of a key the client has met reads one slot
// (128 B, plus its block for a value in the heap) instead of a 2 KiB bucket pair.
//
// A hint only: every hit is verified against the bytes it leads to (cached_lookup.h), so a
// stale, colliding or evicted entry costs a fallback read, never a wrong answer.
// Shape: 4-way set associative, `entries` rounded up to a power of two (at least 4), 32 bytes per
// entry, allocated once at construction; Lookup, Insert and Erase never allocate. Replacement:
// an empty way, else round robin within the set.
// Thread safety: none (owned by one ClientImpl, used by one thread at a time).
#ifndef RKV_CLIENT_LOCATION_CACHE_H_
#define RKV_CLIENT_LOCATION_CACHE_H_

#include <cstdint>
#include <memory>

#include "common/table/entry_location.h"

namespace rkv {

class LocationCache {
 public:
  static constexpr int kWays = 4;
  static constexpr size_t kBytesPerEntry = 32;
  // entries == 0: a cache that holds nothing (every Lookup misses).
  explicit LocationCache(size_t entries);

  // True and *loc if `key_hash` has an entry.
  bool Lookup(uint64_t key_hash, layout::EntryLocation* loc) const;
  // Adds or replaces the entry of `key_hash`.
  void Insert(uint64_t key_hash, const layout::EntryLocation& loc);
  void Erase(uint64_t key_hash);
  // Forgets everything (a new connection: maybe a new server instance with another table).
  void Clear();
  size_t capacity() const { return sets_ * kWays; }

 private:
  struct Entry {
    uint64_t key_hash;
    uint64_t anchor;
    uint64_t block;
    uint32_t block_len;
    uint8_t kind;  // layout::EntryLocation::Kind; kNone marks an empty way
    uint8_t pad[3];
  };
  static_assert(sizeof(Entry) == kBytesPerEntry);
  Entry* Set(uint64_t key_hash) const {
    // Bits 16.. of the hash: the bucket uses the high bits and the tag the low byte.
    return &entries_[((key_hash >> 16) & (sets_ - 1)) * kWays];
  }

  size_t sets_ = 0;
  std::unique_ptr<Entry[]> entries_;
  uint32_t next_victim_ = 0;
};

}  // namespace rkv

#endif  // RKV_CLIENT_LOCATION_CACHE_H_
