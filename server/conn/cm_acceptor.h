// SPDX-License-Identifier: Apache-2.0
// CmAcceptor: the rdma_cm side of kvserver. Owns the event channel and the listening id, and
// runs the rdma_cm thread (Run): connect requests (hello check, setup limit, slot, QP, accept
// with the ServerHello), ESTABLISHED, disconnects and errors, the setup deadline, and the
// destruction of drained rdma_cm connections (their ids belong to this thread).
// Threads: Run() on the thread that calls Server::Run; OnDrained from workers (queues only).
// Ownership: owns channel and listen id, and one reference to every rdma_cm Conn until it is
// destroyed. Destruction: Shutdown() (after every thread is joined) drops the connections
// before the channel goes.
#ifndef RKV_SERVER_CM_ACCEPTOR_H_
#define RKV_SERVER_CM_ACCEPTOR_H_

#include <map>
#include <memory>
#include <string>
#include <vector>

#include "common/verbs/rdma.h"
#include "server/conn/accept_env.h"
#include "server/conn/log_throttle.h"
#include "server/conn/wake_queue.h"

namespace rkv {

class CmAcceptor : public ConnOwner {
 public:
  CmAcceptor() = default;
  ~CmAcceptor() override { Shutdown(); }

  // Creates the channel and id, binds host:port and listens. *ctx: the device of the address
  // (null when bound to a wildcard address).
  [[nodiscard]] Status Listen(const std::string& host, uint16_t port, ibv_context** ctx);
  uint16_t bound_port() const { return bound_port_; }
  // The rest of the server exists now.
  void SetEnv(AcceptEnv env) { env_ = std::move(env); }
  // Serves until *env.stop; returns the first fatal error, or OK.
  [[nodiscard]] Status Run();
  void Shutdown();

  void OnDrained(std::shared_ptr<Conn> c) override { drained_.Push(std::move(c)); }

 private:
  void HandleConnectRequest(rdma_cm_event* ev);
  void CheckDeadlines();
  void Destroy(const std::shared_ptr<Conn>& c);
  void NoLongerPending(Conn* c);

  AcceptEnv env_;
  uint16_t bound_port_ = 0;
  EventChannelPtr channel_;
  CmIdPtr listen_id_;  // declared after channel_: destroyed first
  WakeQueue<std::shared_ptr<Conn>> drained_;
  // rdma_cm thread only.
  std::map<rdma_cm_id*, std::shared_ptr<Conn>> by_id_;
  std::vector<std::shared_ptr<Conn>> pending_;       // not yet established
  LogThrottle refusal_log_{kRefusalLinesPerSecond};  // the "rejecting connection" warnings
  static constexpr int kRefusalLinesPerSecond = 10;
};

}  // namespace rkv

#endif  // RKV_SERVER_CM_ACCEPTOR_H_
