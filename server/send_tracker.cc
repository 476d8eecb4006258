// SPDX-License-Identifier: Apache-2.0
#include "server/send_tracker.h"

#include <algorithm>

namespace rkv {

void SendTracker::Init(int capacity, int signal_every) {
  ring_.assign(size_t(std::max(1, capacity)), 0);
  head_ = count_ = signalled_ = run_ = 0;
  signal_every_ = std::max(1, signal_every);
}

void SendTracker::Posted(Kind kind, bool signalled) {
  if (!HasRoom()) return;  // the caller checks; a post past the queue's depth fails anyway
  ring_[size_t((head_ + count_) % int(ring_.size()))] =
      uint8_t(kind) | (signalled ? kSignalledBit : 0);
  ++count_;
  if (signalled) {
    ++signalled_;
    run_ = 0;
  } else {
    ++run_;
  }
}

uint8_t SendTracker::Pop(Retired* r) {
  const uint8_t e = ring_[size_t(head_)];
  head_ = (head_ + 1) % int(ring_.size());
  --count_;
  ++r->sends;
  if (e & kSignalledBit) {
    --signalled_;
  } else if (signalled_ == 0) {
    --run_;  // it was part of the trailing run
  }
  switch (Kind(e & ~kSignalledBit)) {
    case kReply:
      ++r->replies;
      break;
    case kKeepalive:
      r->keepalive = true;
      break;
    case kMarker:
      r->marker = true;
      break;
    case kBind:
      break;
  }
  return e;
}

SendTracker::Retired SendTracker::Completed(bool signalled) {
  Retired r;
  if (!signalled) {
    // An unsignalled send reported in error: the oldest send, itself unsignalled.
    if (count_ == 0 || (ring_[size_t(head_)] & kSignalledBit)) {
      r.consistent = false;
      return r;
    }
    Pop(&r);
    return r;
  }
  if (signalled_ == 0) {
    r.consistent = false;
    return r;
  }
  while (count_ > 0 && !(Pop(&r) & kSignalledBit)) {
  }
  return r;
}

}  // namespace rkv
