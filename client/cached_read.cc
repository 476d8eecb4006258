// SPDX-License-Identifier: Apache-2.0
// The GET path through the location cache: READ what the key's cached location names (its slot,
// or a bucket header, plus a block) in one round trip and verify it (common/table/
// cached_lookup.h). A slot that holds the key but names another block (the value was rewritten
// or the heap moved it) costs one more round trip for that block. Anything that does not verify
// erases the entry and falls back to the bucket pair (get_path.cc), which refills it.
// No allocation, no locks, no system calls beyond posting and polling.
#include "client/client_impl.h"

namespace rkv {

using layout::CachedOutcome;
using layout::EntryLocation;

ClientImpl::Step ClientImpl::ReadCached(std::string_view key, const layout::KeyHash& kh,
                                        std::string* value, Status* result) {
  EntryLocation loc;
  if (!cache_.Lookup(kh.hash, &loc)) {
    ++counters_.cache_misses;
    return Step::kRetry;
  }
  const uint64_t seed = conn_->hello().hash_seed;
  const uint8_t* anchor = conn_->buf() + Connection::kOverflowArea;
  const uint8_t* block = conn_->buf() + Connection::kBlockArea;
  // Cached locations were bounds-checked when inserted (EntryLocationFits).
  Connection::ReadOp ops[2] = {{Connection::kOverflowArea, loc.anchor, layout::kSlotSize},
                               {Connection::kBlockArea, loc.block, loc.block_len}};
  *result = RoundTrip(ops, loc.has_block() ? 2 : 1);
  if (!result->ok()) return Step::kDone;
  layout::FoundValue v;
  layout::Target follow;
  EntryLocation now;
  switch (layout::ProbeCached(loc, anchor, block, key, kh, seed, &v, &follow, &now)) {
    case CachedOutcome::kFound:
      v.AssignTo(value);
      *result = Status::Ok();
      ++counters_.cache_hits;
      if (now.kind != loc.kind) cache_.Insert(kh.hash, now);
      return Step::kDone;
    case CachedOutcome::kFollow: {
      if (!layout::EntryLocationFits(now, conn_->geometry(), Connection::kBlockAreaSize)) break;
      const Connection::ReadOp op{Connection::kBlockArea, follow.offset, follow.length};
      *result = RoundTrip(&op, 1);
      if (!result->ok()) return Step::kDone;
      if (layout::ProbeTarget(block, follow, key, seed, &v) != layout::TargetOutcome::kFound) break;
      v.AssignTo(value);
      *result = Status::Ok();
      ++counters_.cache_hits;
      cache_.Insert(kh.hash, now);
      return Step::kDone;
    }
    case CachedOutcome::kMiss:
      break;
  }
  cache_.Erase(kh.hash);
  ++counters_.cache_misses;
  return Step::kRetry;
}

}  // namespace rkv
