// SPDX-License-Identifier: Apache-2.0
// ReplicaRing: one log ring a backup granted to a primary's replication link, as the backup's
// drainer reads it (docs/replication-rings.md; the record format in
// common/cluster/ring_record.h). The primary's NIC places records in `data()` with RDMA
// WRITEs; this object finds the complete ones in order, hands each out (Peek) until it is
// consumed (Consume: its bytes zeroed, the control block's counters advanced, so the writer
// sees the room with an RDMA READ), and skips wraps.
// Lifecycle (State): kOpen (granted: the NIC may place records) -> kRevoked (Revoke ran the
// registration's revoker: the NIC places nothing more, so a head that is not a complete record
// is the ring's end) -> freed by its owner once drained (Drained()).
// Thread safety: none; its owner (RingDrainer) serialises every call. The NIC writes data()
// concurrently: records are copied out before they are checked, so a record checked is the
// record applied.
// Ownership: owns the memory (page-aligned, zeroed) and the revoker, which must deregister
// every registration and window of the memory before it returns (so the NIC places nothing
// more, and the memory may be freed once drained, whoever still holds the link's connection);
// the destructor revokes an open ring.
#ifndef RKV_SERVER_CLUSTER_REPLICA_RING_H_
#define RKV_SERVER_CLUSTER_REPLICA_RING_H_

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>

#include "common/cluster/ring_record.h"

namespace rkv::cluster {

class ReplicaRing {
 public:
  enum class State { kOpen, kRevoked };
  // size: a multiple of 8, at least kRingControlBytes + 8 x kRingHeaderBytes. writer: the
  // primary's server id (records must name it). grant_epoch: the backup's map epoch when granted.
  ReplicaRing(uint32_t writer, uint64_t grant_epoch, size_t size);
  ~ReplicaRing();
  ReplicaRing(const ReplicaRing&) = delete;
  ReplicaRing& operator=(const ReplicaRing&) = delete;

  uint8_t* data() { return mem_.get(); }
  size_t size() const { return layout_.size(); }
  uint32_t writer() const { return writer_; }
  uint64_t grant_epoch() const { return grant_epoch_; }
  State state() const { return state_; }
  // Runs before the ring is Revoked (or destroyed open); see Ownership above. False: the NIC
  // may still place into the memory (a deregistration failed), which is then never freed.
  void set_revoker(std::function<bool()> revoker) { revoker_ = std::move(revoker); }

  // The next complete record (wraps consumed on the way), into *out (its key and value point
  // into this object's copy, valid until Consume); false: none complete now. Until Consume,
  // the same record again (copied once).
  bool Peek(RingRecordView* out);
  // The last Peek found a complete but malformed head (DecodeRingRecord's kBadRequest): the
  // ring cannot go on past it.
  bool malformed_head() const { return malformed_; }
  // The last Peek found the head incomplete (bytes of a record still being placed), and every
  // Peek since `limit` ago did too (a WRITE lasts far less: its writer died or stalled
  // mid-WRITE, so that record was never acknowledged).
  bool IncompleteFor(std::chrono::steady_clock::time_point now,
                     std::chrono::milliseconds limit) const {
    return incomplete_ && now - incomplete_since_ >= limit;
  }
  // The drainer's apply function told it to wait with the record the last Peek returned (its
  // slot's predecessor not applied yet): the first such call for a head starts its clock.
  // Consume stops it.
  void NoteWait(std::chrono::steady_clock::time_point now) {
    if (!waiting_) waiting_since_ = now;
    waiting_ = true;
  }
  // The current head has been waiting at least `limit` (NoteWait).
  bool WaitedFor(std::chrono::steady_clock::time_point now, std::chrono::milliseconds limit) const {
    return waiting_ && now - waiting_since_ >= limit;
  }
  bool waiting() const { return waiting_; }
  void EndWait() { waiting_ = false; }
  // Consumes the record the last Peek returned.
  void Consume();
  // Makes the NIC place nothing more (the revoker), then kRevoked. Idempotent.
  void Revoke();
  // Revoked (by a revoker that succeeded: after a failed one the NIC may still place, and the
  // ring is never drained), and no complete record left: nothing will ever be read from it.
  bool Drained();
  uint64_t consumed_index() const { return index_ - 1; }
  // Stores the backup's applied map epoch in the control block (RingControl::applied_epoch).
  void PublishEpoch(uint64_t epoch);

 private:
  struct Free {
    void operator()(uint8_t* p) const;
  };
  void Skip(size_t bytes);  // zeroes and consumes bytes at the read offset (a wrap)
  void Publish();           // the control block's counters

  const uint32_t writer_;
  const uint64_t grant_epoch_;
  const RingLayout layout_;
  std::unique_ptr<uint8_t[], Free> mem_;
  std::function<bool()> revoker_;
  State state_ = State::kOpen;
  bool leak_ = false;              // the revoker failed: the memory is never freed
  size_t at_ = kRingControlBytes;  // the read offset
  uint64_t index_ = 1;             // the next record's index
  uint64_t consumed_ = 0;          // bytes consumed (wraps' skips included)
  size_t peeked_ = 0;              // the length of the record Peek returned (0: none)
  RingRecordView view_;            // that record
  bool malformed_ = false;
  bool incomplete_ = false;  // the last Peek's head was incomplete, since incomplete_since_
  std::chrono::steady_clock::time_point incomplete_since_{};
  size_t incomplete_at_ = 0;  // where, and with which index, that head was
  uint64_t incomplete_index_ = 0;
  bool waiting_ = false;  // the head waits (NoteWait), since waiting_since_
  std::chrono::steady_clock::time_point waiting_since_{};
  std::string copy_;  // the record Peek returned, copied out of data()
};

}  // namespace rkv::cluster

#endif  // RKV_SERVER_CLUSTER_REPLICA_RING_H_
