// SPDX-License-Identifier: Apache-2.0
// SendTracker: the sends a worker has posted on one connection's QP and not yet seen complete,
// in posting order, so that replies can go unsignalled (docs/design.md, "Selective signalling").
//
// Each send gets a 16-bit sequence number, carried in its work request id. A send queue
// completes in order: a completion (of a signalled send, or of any send in error: a QP in ERR
// flushes every send, signalled or not) means every send posted before it has completed too.
// Completed(seq) retires the sends up to and including `seq`. Replies are signalled one in
// `signal_every`; keepalives, drain markers, window binds and any send whose completion the
// caller waits for are always signalled.
//
// The trailing run: the replies posted unsignalled after the last signalled send. No
// completion can report them before the next signalled send's (or an error), so the worker
// does not count them when it checks a client's credits (server/conn/worker.h, CreditLimit).
// Invariants: in_flight() <= capacity < 65536; unsignalled_run() < signal_every (the caller
// signals the send that would reach it); the ring holds exactly the sends posted and not yet
// retired, oldest first, with consecutive sequence numbers.
// Thread safety: none; owned by the connection's worker (Conn::WorkerState).
// Ownership: a plain value; Init allocates its ring once, at adoption (never on the datapath).
#ifndef RKV_SERVER_SEND_TRACKER_H_
#define RKV_SERVER_SEND_TRACKER_H_

#include <cstdint>
#include <vector>

namespace rkv {

class SendTracker {
 public:
  enum Kind : uint8_t { kReply = 0, kKeepalive = 1, kMarker = 2, kBind = 3 };
  // What one completion retired.
  struct Retired {
    int sends = 0;           // every kind
    int replies = 0;         // kReply among them
    bool keepalive = false;  // a keepalive among them
    bool marker = false;     // the drain marker among them
    bool consistent = true;  // false: the completion matched no posted send (a broken invariant)
  };
  static constexpr int kMaxCapacity = 65535;

  // capacity: the QP's send queue depth (at most kMaxCapacity); signal_every >= 1.
  void Init(int capacity, int signal_every);
  // Whether the next send of `kind` is to be signalled; `need_completion`: the caller acts on
  // its completion (e.g. closes once a refusal has gone out).
  bool WantSignal(Kind kind, bool need_completion) const {
    return kind != kReply || need_completion || run_ + 1 >= signal_every_;
  }
  // Room for one more send (the send queue is not full).
  bool HasRoom() const { return count_ < int(ring_.size()); }
  // The sequence number the next send gets (put it in its work request id).
  uint16_t next_seq() const { return uint16_t(head_seq_ + count_); }
  // A send with sequence number next_seq() was posted. The caller checked HasRoom().
  void Posted(Kind kind, bool signalled);
  // A completion of the send with sequence number `seq` was polled.
  Retired Completed(uint16_t seq);

  int in_flight() const { return count_; }
  int unsignalled_run() const { return run_; }
  int signal_every() const { return signal_every_; }

 private:
  static constexpr uint8_t kSignalledBit = 0x80;

  std::vector<uint8_t> ring_;  // kind | kSignalledBit, oldest at head_
  int head_ = 0;
  uint16_t head_seq_ = 0;  // sequence number of the oldest send in the ring
  int count_ = 0;
  int signalled_ = 0;  // signalled sends in the ring
  int run_ = 0;        // unsignalled replies after the last signalled send in the ring
  int signal_every_ = 1;
};

}  // namespace rkv

#endif  // RKV_SERVER_SEND_TRACKER_H_
