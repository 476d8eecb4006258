// SPDX-License-Identifier: Apache-2.0
#include "client/rpc_window.h"

#include <algorithm>

namespace rkv {

RpcWindow::RpcWindow(uint64_t ring_size, int max_outstanding)
    : ring_size_(ring_size),
      max_(max_outstanding),
      depth_(max_outstanding),
      entries_(size_t(max_outstanding)) {}

void RpcWindow::SetDepth(int depth) { depth_ = std::clamp(depth, 1, max_); }

void RpcWindow::Reset() {
  posted_ = released_ = sends_done_ = replies_ = 0;
  outstanding_ = 0;
  head_ = tail_ = 0;
  for (Entry& e : entries_) e = Entry{};
}

bool RpcWindow::Reserve(uint32_t len, uint64_t rid, Slot* slot) {
  Release();
  if (outstanding_ >= depth_ || posted_ - released_ >= uint64_t(max_)) return false;
  const uint64_t need = (uint64_t{len} + 7) & ~uint64_t{7};
  if (need == 0 || need > ring_size_) return false;
  uint64_t at;
  if (released_ == posted_) {  // nothing live: start over at 0
    head_ = tail_ = 0;
    at = 0;
  } else if (tail_ >= head_) {  // live bytes [head, tail): room after tail, or before head
    if (tail_ + need <= ring_size_) {
      at = tail_;
    } else if (need < head_) {
      at = 0;
    } else {
      return false;
    }
  } else {  // wrapped: live bytes [head, end) and [0, tail)
    if (tail_ + need < head_) {
      at = tail_;
    } else {
      return false;
    }
  }
  Entry& e = entries_[posted_ % uint64_t(max_)];
  e = Entry{rid, at, at + need, false};
  tail_ = at + need;
  slot->ring_offset = at;
  slot->recv_slot =
      int(posted_ % uint64_t(max_));  // the posted_-th receive gets the posted_-th reply
  ++posted_;
  ++outstanding_;
  return true;
}

void RpcWindow::SendDone() {
  if (sends_done_ < posted_) ++sends_done_;
  Release();
}

bool RpcWindow::ReplyTaken(uint64_t rid) {
  for (uint64_t seq = released_; seq < posted_; ++seq) {
    Entry& e = entries_[seq % uint64_t(max_)];
    if (e.rid != rid || e.replied) continue;
    e.replied = true;
    ++replies_;
    --outstanding_;
    Release();
    return true;
  }
  return false;
}

void RpcWindow::Release() {
  while (released_ < posted_ && released_ < sends_done_) {
    const Entry& e = entries_[released_ % uint64_t(max_)];
    if (!e.replied) break;
    ++released_;
    head_ = released_ == posted_ ? tail_ : entries_[released_ % uint64_t(max_)].offset;
  }
}

}  // namespace rkv
