// SPDX-License-Identifier: Apache-2.0
// RpcWindow: the bookkeeping of pipelined requests on one connection (Connection::PostRpc and
// NextReply): which requests are outstanding, where each one's bytes sit in the send ring, and
// which receive buffer the next reply lands in. Pure logic, no verbs (tests/rpc_window_test.cc).
//
// Send ring: requests are packed one after another (8-byte aligned) and wrap to the start when
// the end has no room; a request's bytes are released once its reply has been taken AND its
// send has completed (the HCA may read the bytes again to retransmit until then), in posting
// order. Receive slots: one receive is posted per request, and the HCA fills receives in posting
// order, so the k-th reply to arrive is in slot k % max_outstanding; a slot is reused only after
// the reply in it was taken (outstanding < max_outstanding).
// Invariants: outstanding() <= depth() <= max_outstanding; a reserved range never overlaps
// another unreleased one.
// Thread safety: none (owned by one Connection).
#ifndef RKV_CLIENT_RPC_WINDOW_H_
#define RKV_CLIENT_RPC_WINDOW_H_

#include <cstdint>
#include <vector>

namespace rkv {

class RpcWindow {
 public:
  RpcWindow(uint64_t ring_size, int max_outstanding);

  // Requests allowed in flight (the server's credits, at most max_outstanding).
  void SetDepth(int depth);
  int depth() const { return depth_; }
  int outstanding() const { return outstanding_; }
  // True when nothing is outstanding and every send has completed.
  bool idle() const { return outstanding_ == 0 && sends_done_ == posted_; }
  bool sends_pending() const { return sends_done_ < posted_; }

  struct Slot {
    uint64_t ring_offset;  // where to write the request
    int recv_slot;         // the receive buffer to post for its reply
  };
  // Reserves room for a request of `len` bytes (<= ring size) with id `rid`. False when the
  // window is full or the ring has no room until earlier requests are released.
  bool Reserve(uint32_t len, uint64_t rid, Slot* slot);
  // A send completion (they come in posting order).
  void SendDone();
  // The receive slot of the next reply to arrive.
  int NextRecvSlot() const { return int(replies_ % uint64_t(max_)); }
  uint64_t replies_taken() const { return replies_; }
  // Takes the reply to request `rid`; false if no outstanding request has that id.
  bool ReplyTaken(uint64_t rid);
  // Forgets everything (the connection broke).
  void Reset();

 private:
  struct Entry {
    uint64_t rid = 0;
    uint64_t offset = 0, end = 0;
    bool replied = false;
  };
  void Release();  // frees the ring space of the oldest requests that are done

  const uint64_t ring_size_;
  const int max_;
  int depth_;
  std::vector<Entry> entries_;  // by posting sequence % max_
  uint64_t posted_ = 0;         // requests reserved so far
  uint64_t released_ = 0;       // of those, ring space given back (a prefix)
  uint64_t sends_done_ = 0;
  uint64_t replies_ = 0;          // replies taken
  int outstanding_ = 0;           // reserved, reply not taken
  uint64_t head_ = 0, tail_ = 0;  // ring: live bytes are [head, tail) (wrapped when tail < head)
};

}  // namespace rkv

#endif  // RKV_CLIENT_RPC_WINDOW_H_
