// SPDX-License-Identifier: Apache-2.0
#include "client/location_cache.h"

#include <cstring>

namespace rkv {

using layout::EntryLocation;

LocationCache::LocationCache(size_t entries) {
  if (entries == 0) return;
  size_t sets = 1;
  while (sets * kWays < entries) sets <<= 1;
  sets_ = sets;
  entries_.reset(new Entry[sets * kWays]);
  Clear();
}

void LocationCache::Clear() {
  if (sets_ != 0) std::memset(entries_.get(), 0, sets_ * kWays * sizeof(Entry));
}

bool LocationCache::Lookup(uint64_t key_hash, EntryLocation* loc) const {
  if (sets_ == 0) return false;
  const Entry* set = Set(key_hash);
  for (int w = 0; w < kWays; ++w) {
    const Entry& e = set[w];
    if (e.kind == EntryLocation::kNone || e.key_hash != key_hash) continue;
    *loc = EntryLocation{e.anchor, e.block, e.block_len, static_cast<EntryLocation::Kind>(e.kind)};
    return true;
  }
  return false;
}

void LocationCache::Insert(uint64_t key_hash, const EntryLocation& loc) {
  if (sets_ == 0 || loc.kind == EntryLocation::kNone) return;
  Entry* set = Set(key_hash);
  Entry* victim = nullptr;
  for (int w = 0; w < kWays && victim == nullptr; ++w)
    if (set[w].kind != EntryLocation::kNone && set[w].key_hash == key_hash) victim = &set[w];
  for (int w = 0; w < kWays && victim == nullptr; ++w)
    if (set[w].kind == EntryLocation::kNone) victim = &set[w];
  if (victim == nullptr) victim = &set[next_victim_++ % kWays];
  *victim = Entry{key_hash, loc.anchor, loc.block, loc.block_len, loc.kind, {0, 0, 0}};
}

void LocationCache::Erase(uint64_t key_hash) {
  if (sets_ == 0) return;
  Entry* set = Set(key_hash);
  for (int w = 0; w < kWays; ++w)
    if (set[w].kind != EntryLocation::kNone && set[w].key_hash == key_hash) set[w].kind = 0;
}

}  // namespace rkv
