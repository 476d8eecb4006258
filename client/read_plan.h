// SPDX-License-Identifier: Apache-2.0
// ReadPlan: packs the READs of one round trip into the client buffer: bucket pairs in the bucket
// area (MultiGet), lookup targets up to a slot in the overflow area and larger ones (heap blocks)
// in the block area. It only computes offsets; the caller posts ops() with
// Connection::PostReads and reads each result at op(i).local_offset.
// Thread safety: none (a value type on the GET path's stack; no allocation).
// Invariant: every op lies inside its area and inside the server's region.
#ifndef RKV_CLIENT_READ_PLAN_H_
#define RKV_CLIENT_READ_PLAN_H_

#include <cstdint>

#include "client/connection.h"
#include "common/table/entry_location.h"
#include "common/table/lookup.h"

namespace rkv {

class ReadPlan {
 public:
  explicit ReadPlan(uint64_t region_size) : region_size_(region_size) {}

  enum class Result {
    kAdded,
    kNoRoom,   // the area or the batch is full: read it in a later round trip
    kInvalid,  // outside the region or larger than any area: the server broke the format
  };
  // The READ of a lookup target.
  [[nodiscard]] Result AddTarget(const layout::Target& t);
  // The READs of a cached location (entry_location.h): its anchor, then its target if it has one
  // (two ops, or one). Not all-or-nothing: use mark()/Rewind().
  [[nodiscard]] Result AddCached(const layout::EntryLocation& loc);
  // The READ of the two candidate buckets starting at `remote` into bucket pair `index`.
  [[nodiscard]] Result AddBuckets(int index, uint64_t remote);

  // All-or-nothing additions (MultiGet plans every target of a key or none).
  struct Mark {
    int n;
    uint64_t block_used, overflow_used;
  };
  Mark mark() const { return {n_, block_used_, overflow_used_}; }
  void Rewind(const Mark& m) {
    n_ = m.n;
    block_used_ = m.block_used;
    overflow_used_ = m.overflow_used;
  }
  void Clear() { Rewind({0, 0, 0}); }

  int size() const { return n_; }
  const Connection::ReadOp* ops() const { return ops_; }
  const Connection::ReadOp& op(int i) const { return ops_[i]; }

 private:
  Result Add(uint64_t area, uint64_t area_size, uint64_t* used, uint64_t remote, uint32_t len);

  const uint64_t region_size_;
  int n_ = 0;
  uint64_t block_used_ = 0, overflow_used_ = 0;
  Connection::ReadOp ops_[Connection::kMaxReads];
};

}  // namespace rkv

#endif  // RKV_CLIENT_READ_PLAN_H_
