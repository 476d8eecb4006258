// SPDX-License-Identifier: Apache-2.0
// ManualAcceptor: manual-mode connections (QPs moved RESET->INIT->RTR->RTS by hand from
// parameter records exchanged over tcp, file or etcd; common/exchange/exchange.h).
//
// Threads: the exchange thread (Loop) accepts channels and starts one handshake thread per
// client, at most --max_pending at once (more are refused with a "busy" error) and, before
// that, at most --max_pending_per_source per peer address not yet opened (AdmitSource; a tcp
// channel without an address is refused), so a slow or silent peer only ever holds its own
// handshake threads, until their deadline (--accept_timeout_ms for the whole handshake). A
// handshake thread creates the QP and the Conn (handed to its worker at once), runs the
// validator, answers, waits for READY, and hands the Conn and its channel back to the exchange
// thread, which owns them from then on: it watches each control channel (its closing means the
// client left), destroys drained connections, and keeps the channels of refused or failed
// exchanges open a while (lingering) so the client can read the last reply.
// Ownership: owns the listener, the handshake threads (joined by the exchange thread or in
// Join), the lingering channels, and one reference to each manual Conn it was handed.
// Thread safety: Start/Join/Shutdown from the server's thread; OnDrained from workers.
#ifndef RKV_SERVER_MANUAL_ACCEPTOR_H_
#define RKV_SERVER_MANUAL_ACCEPTOR_H_

#include <atomic>
#include <chrono>
#include <list>
#include <memory>
#include <set>
#include <thread>
#include <vector>

#include "common/exchange/exchange.h"
#include "server/conn/accept_env.h"
#include "server/conn/log_throttle.h"
#include "server/conn/wake_queue.h"

namespace rkv {

class ManualAcceptor : public ConnOwner {
 public:
  ManualAcceptor(AcceptEnv env, std::unique_ptr<ExchangeListener> listener)
      : env_(std::move(env)), listener_(std::move(listener)) {}
  ~ManualAcceptor() override;

  std::string Describe() const { return listener_->Describe(); }
  void Start();
  // Joins the exchange thread and every handshake thread (after *env.stop is set).
  void Join();
  // Drops every connection and channel (after every thread is joined).
  void Shutdown();

  void OnDrained(std::shared_ptr<Conn> c) override { events_.Push({std::move(c), nullptr, false}); }

 private:
  using Clock = std::chrono::steady_clock;
  // From handshake threads and workers to the exchange thread. conn set, handed_over false:
  // drained. handed_over: a handshake ended (conn may be null; ch: control channel if
  // established, else a channel to linger).
  struct Event {
    std::shared_ptr<Conn> conn;
    std::unique_ptr<ExchangeChannel> ch;
    bool handed_over;
  };
  struct Handshake {
    std::thread thread;
    std::atomic<bool> done{false};
  };

  void Loop();
  // Runs on a handshake thread; returns the Conn (null if none was created) and leaves in *ch
  // the channel (moved to the Conn's control channel when established).
  // lease: the connection's share of its source address's cap (moved into the Conn).
  std::shared_ptr<Conn> RunHandshake(ExchangeChannel* ch, SourceLimiter::Lease* lease,
                                     bool* established);
  void Refuse(ExchangeChannel* ch, Code code, const std::string& why);
  void Destroy(const std::shared_ptr<Conn>& c);
  void Tick();
  // Keeps a finished exchange's channel open a while (bounded: kMaxLingering, oldest dropped;
  // at most kLingerMs or until the peer closes it) so the client can read the last reply.
  void Linger(std::unique_ptr<ExchangeChannel> ch);
  static constexpr size_t kMaxLingering = 64;
  static constexpr int kLingerMs = 3000;

  const AcceptEnv env_;
  std::unique_ptr<ExchangeListener> listener_;  // exchange thread only
  WakeQueue<Event> events_;
  std::thread thread_;
  // Exchange thread only.
  std::list<Handshake> handshakes_;
  std::vector<std::shared_ptr<Conn>> owned_;
  std::set<std::shared_ptr<Conn>> drained_early_;  // drained before their handshake ended
  std::vector<std::pair<std::unique_ptr<ExchangeChannel>, Clock::time_point>> lingering_;
  // The "refusing manual connection" warnings, from any thread: at most this many a second.
  static constexpr int kRefusalLinesPerSecond = 10;
  LogThrottle refusal_log_{kRefusalLinesPerSecond};
};

}  // namespace rkv

#endif  // RKV_SERVER_MANUAL_ACCEPTOR_H_
