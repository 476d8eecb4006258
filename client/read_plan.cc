// SPDX-License-Identifier: Apache-2.0
#include "client/read_plan.h"

namespace rkv {

ReadPlan::Result ReadPlan::Add(uint64_t area, uint64_t area_size, uint64_t* used, uint64_t remote,
                               uint32_t len) {
  if (len == 0 || len > area_size || remote > region_size_ || len > region_size_ - remote)
    return Result::kInvalid;
  if (n_ == Connection::kMaxPlanReads || *used + len > area_size) return Result::kNoRoom;
  ops_[n_++] = {area + *used, remote, len};
  *used += (len + 7) & ~uint64_t{7};
  return Result::kAdded;
}

ReadPlan::Result ReadPlan::AddTarget(const layout::Target& t) {
  if (t.kind == layout::Target::kRefSlot && t.length != layout::kSlotSize) return Result::kInvalid;
  if (t.length <= layout::kSlotSize)
    return Add(Connection::kOverflowArea, Connection::kOverflowAreaSize, &overflow_used_, t.offset,
               t.length);
  return Add(Connection::kBlockArea, Connection::kBlockAreaSize, &block_used_, t.offset, t.length);
}

ReadPlan::Result ReadPlan::AddCached(const layout::EntryLocation& loc) {
  Result r = Add(Connection::kOverflowArea, Connection::kOverflowAreaSize, &overflow_used_,
                 loc.anchor, layout::kSlotSize);
  if (r != Result::kAdded || !loc.has_block()) return r;
  if (loc.block_len <= layout::kSlotSize)
    return Add(Connection::kOverflowArea, Connection::kOverflowAreaSize, &overflow_used_, loc.block,
               loc.block_len);
  return Add(Connection::kBlockArea, Connection::kBlockAreaSize, &block_used_, loc.block,
             loc.block_len);
}

ReadPlan::Result ReadPlan::AddBuckets(int index, uint64_t remote) {
  constexpr uint32_t kPair = 2 * layout::kBucketSize;
  if (index < 0 || uint32_t(index) >= Connection::kMaxBatch) return Result::kInvalid;
  uint64_t used = uint64_t(index) * kPair;
  return Add(Connection::kBucketArea, uint64_t{Connection::kMaxBatch} * kPair, &used, remote,
             kPair);
}

}  // namespace rkv
