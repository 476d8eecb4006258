// SPDX-License-Identifier: Apache-2.0
// RingTail: the primary's side of one log ring (docs/replication-rings.md): where its next
// record goes, its index, and whether the ring has room for it, by what the backup's drainer
// last said it consumed (the ring's control block, common/cluster/ring_record.h, or a
// REPLICATE reply on the same link). It mirrors ReplicaRing's reading exactly: the same
// RingLayout decides each wrap, and both count the bytes a wrap skips as used.
// Thread safety: none (the link's worker owns it). A value type.
#ifndef RKV_COMMON_CLUSTER_RING_TAIL_H_
#define RKV_COMMON_CLUSTER_RING_TAIL_H_

#include <cstddef>
#include <cstdint>

#include "common/cluster/ring_record.h"

namespace rkv::cluster {

class RingTail {
 public:
  // Where a record goes: a wrap record first when `wrap_at` >= 0, then the record.
  struct Placement {
    long wrap_at = -1;  // the offset of a wrap record numbered wrap_index (-1: none)
    uint64_t wrap_index = 0;
    size_t skipped = 0;  // bytes from the tail to the ring's end skipped by a wrap (0: none)
    size_t at = 0;       // the record's offset
    uint64_t index = 0;
  };

  explicit RingTail(size_t ring_size) : layout_(ring_size) {}
  const RingLayout& layout() const { return layout_; }

  // Plans a record of `bytes` (RingRecordBytes): false when it is bigger than the ring takes
  // (max_record) or there is no room by what was last consumed; then nothing changes.
  bool Plan(size_t bytes, Placement* p) const;
  // The record planned was placed (its WRITE posted): the tail moves past it (and past the
  // ring's end when no header fits there any more: the reader skips that at once, too).
  void Commit(size_t bytes, const Placement& p);
  // The drainer consumed this many bytes since the grant (monotonic; older news is ignored;
  // more than was written is a broken peer: false, and nothing changes).
  bool SeeConsumed(uint64_t consumed);
  uint64_t written() const { return written_; }
  uint64_t consumed() const { return consumed_; }

 private:
  RingLayout layout_;
  size_t at_ = kRingControlBytes;
  uint64_t index_ = 1;
  uint64_t written_ = 0;   // bytes placed (wraps' skips included)
  uint64_t consumed_ = 0;  // bytes the drainer said it consumed
};

}  // namespace rkv::cluster

#endif  // RKV_COMMON_CLUSTER_RING_TAIL_H_
