// SPDX-License-Identifier: Apache-2.0
#include "server/cluster/replica_ring.h"

#include <glog/logging.h>

#include <atomic>
#include <cstdlib>
#include <cstring>

#include "common/verbs/dma_fence.h"

#if defined(__SANITIZE_ADDRESS__)
#include <sanitizer/lsan_interface.h>
#endif

namespace rkv::cluster {

void ReplicaRing::Free::operator()(uint8_t* p) const { std::free(p); }

ReplicaRing::ReplicaRing(uint32_t writer, uint64_t grant_epoch, size_t size)
    : writer_(writer), grant_epoch_(grant_epoch), layout_(size) {
  CHECK(size % 8 == 0 && size >= kRingControlBytes + 8 * kRingHeaderBytes)
      << "ring of " << size << " bytes";
  void* p = nullptr;
  CHECK_EQ(posix_memalign(&p, 4096, size), 0) << "ring of " << size << " bytes";
  std::memset(p, 0, size);
  mem_.reset(static_cast<uint8_t*>(p));
}

ReplicaRing::~ReplicaRing() {
  Revoke();
  if (leak_) {
    uint8_t* kept = mem_.release();  // on purpose: the NIC may still write there
#if defined(__SANITIZE_ADDRESS__)
    __lsan_ignore_object(kept);
#else
    (void)kept;
#endif
  }
}

void ReplicaRing::Revoke() {
  if (state_ == State::kRevoked) return;
  if (revoker_ && !revoker_()) {
    // Still registered: the NIC could write into the memory once reused. It stays this
    // ring's until the ring goes, and is then leaked, never freed.
    LOG(ERROR) << "log ring of server " << writer_ << ": revocation failed; its " << layout_.size()
               << " bytes stay registered and are never freed";
    leak_ = true;
  }
  state_ = State::kRevoked;
}

bool ReplicaRing::Peek(RingRecordView* out) {
  if (peeked_ > 0) {
    *out = view_;
    return true;
  }
  // At most two wraps per call: a writer that only ever places wrap records cannot keep the
  // drainer here.
  for (int wraps = 0; wraps <= 2; ++wraps) {
    if (layout_.ImplicitWrap(at_)) {
      Skip(layout_.size() - at_);
      continue;
    }
    const size_t room = layout_.size() - at_;
    // The length first, then the record: bytes the NIC may still write are copied, never read
    // twice (what is checked is what is applied). The fence between them (rule 10): the
    // bytes are read no earlier than the length that says how many there are.
    uint8_t head[8];
    std::memcpy(head, mem_.get() + at_, sizeof head);
    size_t length = PeekRingLength(std::string_view(reinterpret_cast<char*>(head), sizeof head));
    if (length < kRingHeaderBytes || length > room) length = kRingHeaderBytes;  // refused below
    DmaLoadFence();
    copy_.assign(reinterpret_cast<const char*>(mem_.get() + at_), length);
    RingRecordView v;
    const Status st = DecodeRingRecord(copy_, index_, &v);
    malformed_ = st.code() == Code::kBadRequest;
    // A head incomplete since when it was first seen so at this place (another place or
    // index is another record: its own time).
    const bool incomplete = st.code() == Code::kProtocolError;
    if (incomplete && (!incomplete_ || incomplete_at_ != at_ || incomplete_index_ != index_)) {
      incomplete_since_ = std::chrono::steady_clock::now();
      incomplete_at_ = at_;
      incomplete_index_ = index_;
    }
    incomplete_ = incomplete;
    if (!st.ok()) return false;
    if (v.wrap) {
      peeked_ = 0;
      ++index_;
      Skip(layout_.size() - at_);  // the wrap record included
      continue;
    }
    peeked_ = v.length;
    view_ = v;
    *out = v;
    return true;
  }
  return false;
}

void ReplicaRing::Consume() {
  CHECK_GT(peeked_, 0u) << "ReplicaRing::Consume without a record";
  std::memset(mem_.get() + at_, 0, peeked_);
  at_ += peeked_;
  consumed_ += peeked_;
  ++index_;
  peeked_ = 0;
  waiting_ = false;
  Publish();
}

void ReplicaRing::Skip(size_t bytes) {
  std::memset(mem_.get() + at_, 0, bytes);
  consumed_ += bytes;
  at_ = kRingControlBytes;
  Publish();
}

void ReplicaRing::Publish() {
  // Whole u64 stores (8-byte aligned): the writer's RDMA READ sees each field whole. The
  // zeroing above is ordered before them as the NIC sees memory (rule 10), so room the
  // writer sees is zero.
  DmaStoreFence();
  auto* control = reinterpret_cast<RingControl*>(mem_.get());
  __atomic_store_n(&control->consumed_index, index_ - 1, __ATOMIC_RELEASE);
  __atomic_store_n(&control->consumed, consumed_, __ATOMIC_RELEASE);
}

void ReplicaRing::PublishEpoch(uint64_t epoch) {
  auto* control = reinterpret_cast<RingControl*>(mem_.get());
  __atomic_store_n(&control->applied_epoch, epoch, __ATOMIC_RELEASE);
}

bool ReplicaRing::Drained() {
  // A revocation that failed may leave the NIC placing (a WRITE in mid-message): an incomplete
  // head is then no end, and the ring is kept and read for as long as the server runs (its
  // writer's promotions wait: unavailable, never without a record the NIC acknowledged).
  if (state_ != State::kRevoked || leak_) return false;
  RingRecordView v;
  return !Peek(&v);
}

}  // namespace rkv::cluster
