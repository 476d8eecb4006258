// SPDX-License-Identifier: Apache-2.0
// SendTracker: the sends a worker has posted on one connection's QP and not yet seen complete,
// in posting order, so that replies can go unsignalled (docs/design.md, "Selective signalling").
//
// A send queue completes in order: the completion of a signalled send means every send posted
// before it has completed as well, signalled or not. Replies are signalled one in
// `signal_every`; keepalives, drain markers, window binds and any send whose completion the
// caller waits for are always signalled. Completed() retires, on each completion polled, the
// sends that completion stands for: up to and including the first signalled one for a
// signalled completion; only the oldest for an unsignalled one (a device reports an
// unsignalled send only when it completes in error, flushes included, and then in order).
//
// The trailing run: the replies posted unsignalled after the last signalled send. Their
// completions will be reported only with a later signalled send, so the worker does not count
// them when it checks a client's credits (server/worker.h, SendSlots): it may hold up to
// signal_every - 1 more reply buffers than the credit bound (ReplySlots).
// Invariants: in_flight() <= capacity; unsignalled_run() < signal_every (the caller signals the
// send that would reach it); every entry in the ring is a send posted and not yet retired.
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

  // capacity: the QP's send queue depth; signal_every >= 1 (1: every send signalled).
  void Init(int capacity, int signal_every);
  // Whether the next send of `kind` is to be signalled; `need_completion`: the caller acts on
  // its completion (e.g. closes once a refusal has gone out).
  bool WantSignal(Kind kind, bool need_completion) const {
    return kind != kReply || need_completion || run_ + 1 >= signal_every_;
  }
  // Room for one more send (the send queue is not full).
  bool HasRoom() const { return count_ < int(ring_.size()); }
  // A send was posted. The caller checked HasRoom().
  void Posted(Kind kind, bool signalled);
  // A completion was polled; `signalled`: the signalled bit of its work request id.
  Retired Completed(bool signalled);

  int in_flight() const { return count_; }
  int unsignalled_run() const { return run_; }
  int signal_every() const { return signal_every_; }

 private:
  static constexpr uint8_t kSignalledBit = 0x80;
  uint8_t Pop(Retired* r);

  std::vector<uint8_t> ring_;  // kind | kSignalledBit
  int head_ = 0;
  int count_ = 0;
  int signalled_ = 0;  // signalled sends in the ring
  int run_ = 0;        // unsignalled replies after the last signalled send in the ring
  int signal_every_ = 1;
};

}  // namespace rkv

#endif  // RKV_SERVER_SEND_TRACKER_H_
