// SPDX-License-Identifier: Apache-2.0
#include "server/conn/send_tracker.h"

#include <algorithm>

namespace rkv {

void SendTracker::Init(int capacity, int signal_every) {
  ring_.assign(size_t(std::clamp(capacity, 1, kMaxCapacity)), 0);
  head_ = count_ = signalled_ = run_ = 0;
  head_seq_ = 0;
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

SendTracker::Retired SendTracker::Completed(uint16_t seq) {
  Retired r;
  const int upto = uint16_t(seq - head_seq_);  // sends to retire, minus one
  if (upto >= count_) {
    r.consistent = false;  // not a send in the ring (already retired, or never posted)
    return r;
  }
  for (int i = 0; i <= upto; ++i) {
    const uint8_t e = ring_[size_t(head_)];
    head_ = (head_ + 1) % int(ring_.size());
    ++head_seq_;
    --count_;
    ++r.sends;
    if (e & kSignalledBit) {
      --signalled_;
    } else if (signalled_ == 0) {
      --run_;  // it was part of the trailing run
    }
    switch (Kind(e & ~kSignalledBit)) {
      case kReply:
        ++r.replies;
        break;
      case kKeepalive:
        r.keepalive = true;
        break;
      case kMarker:
        r.marker = true;
        break;
      case kBind:
        break;
    }
  }
  return r;
}

}  // namespace rkv
