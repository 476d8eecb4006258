// SPDX-License-Identifier: Apache-2.0
#include "common/cluster/ring_tail.h"

namespace rkv::cluster {

bool RingTail::Plan(size_t bytes, Placement* p) const {
  if (bytes > layout_.max_record() || bytes % 8 != 0 || bytes < kRingHeaderBytes) return false;
  Placement q;
  size_t need = bytes, skipped = 0;
  bool wrap_record = false;
  size_t at = at_;
  uint64_t index = index_;
  if (layout_.MustWrap(at, bytes, &wrap_record, &skipped)) {
    need += skipped;
    if (wrap_record) {
      q.wrap_at = long(at);
      q.wrap_index = index++;
    }
    q.skipped = skipped;
    at = kRingControlBytes;
  }
  if (written_ - consumed_ + need > layout_.capacity()) return false;
  q.at = at;
  q.index = index;
  *p = q;
  return true;
}

void RingTail::Commit(size_t bytes, const Placement& p) {
  written_ += p.skipped;
  at_ = p.at + bytes;
  index_ = p.index + 1;
  written_ += bytes;
  if (layout_.ImplicitWrap(at_)) {  // the reader skips this tail as soon as it gets here
    written_ += layout_.size() - at_;
    at_ = kRingControlBytes;
  }
}

bool RingTail::SeeConsumed(uint64_t consumed) {
  if (consumed > written_) return false;
  if (consumed > consumed_) consumed_ = consumed;
  return true;
}

}  // namespace rkv::cluster
