// SPDX-License-Identifier: Apache-2.0
#include "server/conn/cm_acceptor.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <glog/logging.h>
#include <netdb.h>
#include <poll.h>

#include <algorithm>
#include <cstring>

namespace rkv {
Status CmAcceptor::Listen(const std::string& host, uint16_t port, ibv_context** ctx) {
  channel_.reset(rdma_create_event_channel());
  if (!channel_) return ErrnoStatus("rdma_create_event_channel", errno);
  // Non-blocking: rdma_get_cm_event may retry internally (a connect request it could not
  // process) and must never block this thread, which also runs deadlines and destruction.
  int flags = fcntl(channel_->fd, F_GETFL);
  if (flags < 0 || fcntl(channel_->fd, F_SETFL, flags | O_NONBLOCK) != 0)
    return ErrnoStatus("fcntl(rdma_cm channel, O_NONBLOCK)", errno);
  rdma_cm_id* id = nullptr;
  if (rdma_create_id(channel_.get(), &id, nullptr, RDMA_PS_TCP) != 0)
    return ErrnoStatus("rdma_create_id", errno);
  listen_id_.reset(id);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(port);
  if (inet_pton(AF_INET, host.c_str(), &addr.sin_addr) != 1) {
    addrinfo hints{}, *res = nullptr;
    hints.ai_family = AF_INET;
    if (getaddrinfo(host.c_str(), nullptr, &hints, &res) != 0)
      return Status(Code::kInvalidArgument, "cannot resolve --listen host '" + host + "'");
    addr.sin_addr = reinterpret_cast<sockaddr_in*>(res->ai_addr)->sin_addr;
    freeaddrinfo(res);
  }
  if (rdma_bind_addr(id, reinterpret_cast<sockaddr*>(&addr)) != 0)
    return ErrnoStatus("rdma_bind_addr(" + host + ":" + std::to_string(port) +
                           ") (is the address on an RDMA-capable interface?)",
                       errno);
  if (rdma_listen(id, 128) != 0) return ErrnoStatus("rdma_listen", errno);
  bound_port_ = ntohs(rdma_get_src_port(id));
  *ctx = id->verbs;
  return Status::Ok();
}

void CmAcceptor::Shutdown() {
  drained_.TakeAll();
  pending_.clear();
  by_id_.clear();  // the last references: Conn destructors destroy QPs and ids
}

Status CmAcceptor::Run() {
  auto last_check = Conn::Clock::now();
  while (!env_.stop->load()) {
    pollfd pfd[2] = {{channel_->fd, POLLIN, 0}, {drained_.fd(), POLLIN, 0}};
    int r = poll(pfd, 2, 100);
    if (r < 0 && errno != EINTR) return ErrnoStatus("poll(rdma_cm channel)", errno);
    for (auto& c : drained_.TakeAll()) Destroy(c);
    if (Conn::Clock::now() - last_check >= std::chrono::milliseconds(100)) {
      last_check = Conn::Clock::now();
      CheckDeadlines();
    }
    if (r <= 0 || !(pfd[0].revents & POLLIN)) continue;
    rdma_cm_event* ev = nullptr;
    if (rdma_get_cm_event(channel_.get(), &ev) != 0) {
      if (errno == EAGAIN || errno == EINTR) continue;  // non-blocking channel
      return ErrnoStatus("rdma_get_cm_event", errno);
    }
    rdma_cm_id* eid = ev->id;
    rdma_cm_event_type type = ev->event;
    if (type == RDMA_CM_EVENT_CONNECT_REQUEST) {
      HandleConnectRequest(ev);  // acks
      continue;
    }
    rdma_ack_cm_event(ev);
    auto it = by_id_.find(eid);
    if (it == by_id_.end()) continue;
    std::shared_ptr<Conn> c = it->second;
    switch (type) {
      case RDMA_CM_EVENT_ESTABLISHED:
        if (MarkEstablished(env_, c.get())) {
          NoLongerPending(c.get());
          LOG(INFO) << "connection established via rdma_cm: " << QpParamsLine(c->qp());
        }
        break;
      case RDMA_CM_EVENT_DISCONNECTED:
      case RDMA_CM_EVENT_REJECTED:
      case RDMA_CM_EVENT_CONNECT_ERROR:
      case RDMA_CM_EVENT_UNREACHABLE:
      case RDMA_CM_EVENT_DEVICE_REMOVAL:
      case RDMA_CM_EVENT_ADDR_CHANGE:
        c->RequestClose(std::string("rdma_cm ") + rdma_event_str(type));
        break;
      default:
        VLOG(1) << "rdma_cm event " << rdma_event_str(type) << " for qp " << c->qpn;
        break;
    }
  }
  return Status::Ok();
}

void CmAcceptor::HandleConnectRequest(rdma_cm_event* ev) {
  rdma_cm_id* id = ev->id;
  const ServerOptions& o = *env_.opt;
  auto reject = [&](const std::string& why) {
    uint64_t held_back = 0;  // at most kRefusalLinesPerSecond lines a second: no log flood
    if (refusal_log_.Admit(LogThrottle::Clock::now(), &held_back))
      LOG(WARNING) << "rejecting connection: " << why << HeldBackNote(held_back);
    env_.counters->connections_rejected.fetch_add(1, std::memory_order_relaxed);
    rdma_reject(id, why.c_str(), static_cast<uint8_t>(std::min<size_t>(why.size() + 1, 140)));
    rdma_ack_cm_event(ev);
    rdma_destroy_id(id);
  };
  wire::ClientHello hello;
  Status s =
      wire::DecodeClientHello(ev->param.conn.private_data, ev->param.conn.private_data_len, &hello);
  if (!s.ok()) return reject(s.message());
  if (id->verbs != env_.ctx)
    return reject("connection arrived on another RDMA device than the table's");
  // Per address first (its share of the setup slots, --max_pending_per_source), so that one
  // address cannot fill --max_pending for everyone.
  SourceLimiter::Lease lease;
  s = AdmitSource(env_, rdma_get_peer_addr(id), &lease);
  if (!s.ok()) return reject(s.message());
  if (int(pending_.size()) >= o.max_pending)
    return reject("server has " + std::to_string(pending_.size()) +
                  " connections in setup (--max_pending); try again");
  uint8_t nonce[wire::kNonceSize];
  s = NewServerNonce(nonce);
  if (!s.ok()) return reject(s.message());
  int slot = 0;
  if (!env_.registry->TakeSlot(&slot))
    return reject("server is at --max_connections=" + std::to_string(o.max_connections));
  ibv_qp* qp = nullptr;
  std::unique_ptr<PrivateDomain> domain;
  s = CreateClientQp(env_, slot, id, nullptr, &qp, &domain);
  if (!s.ok()) {
    env_.registry->ReleaseSlot(slot);
    return reject(s.message());
  }
  std::shared_ptr<Conn> c = NewConn(env_, Conn::Kind::kRdmaCm, slot, this, id, qp, nonce,
                                    ev->param.conn.qp_num, std::move(domain), std::move(lease));
  by_id_[id] = c;
  pending_.push_back(c);
  uint8_t ack_timeout = static_cast<uint8_t>(o.qp.timeout);
  if (rdma_set_option(id, RDMA_OPTION_ID, RDMA_OPTION_ID_ACK_TIMEOUT, &ack_timeout,
                      sizeof ack_timeout) != 0)
    LOG(WARNING) << "rdma_set_option(ACK_TIMEOUT) failed: " << std::strerror(errno);
  wire::ServerHello h = env_.HelloFor(*c);  // no address, rkey or geometry: those need an OPEN
  ibv_device_attr dev{};
  ibv_query_device(env_.ctx, &dev);
  rdma_conn_param cp{};
  cp.private_data = &h;
  cp.private_data_len = sizeof(h);
  // Outstanding READs a client may have at once on this QP (its max_dest_rd_atomic): what the
  // client asks for, at least 16, within the device's limit; or --max_dest_rd_atomic.
  int requested = std::max<int>(ev->param.conn.initiator_depth, ev->param.conn.responder_resources);
  int responder = o.qp.max_dest_rd_atomic >= 0 ? o.qp.max_dest_rd_atomic : std::max(requested, 16);
  cp.responder_resources =
      static_cast<uint8_t>(std::max(1, std::min<int>(responder, dev.max_qp_rd_atom)));
  cp.initiator_depth = static_cast<uint8_t>(std::max(0, o.qp.max_rd_atomic));
  cp.retry_count = static_cast<uint8_t>(o.qp.retry_cnt);
  cp.rnr_retry_count = static_cast<uint8_t>(o.qp.rnr_retry);
  if (rdma_accept(id, &cp) != 0) {
    int err = errno;
    rdma_ack_cm_event(ev);
    c->RequestClose(std::string("rdma_accept failed: ") + std::strerror(err));
    return;
  }
  VLOG(1) << "accepted qp " << c->qpn << " responder_resources " << int(cp.responder_resources);
  rdma_ack_cm_event(ev);
}

void CmAcceptor::NoLongerPending(Conn* c) {
  if (!c->owner_pending) return;
  c->owner_pending = false;
  env_.counters->connections_pending.fetch_sub(1, std::memory_order_relaxed);
  pending_.erase(std::remove_if(pending_.begin(), pending_.end(),
                                [c](const std::shared_ptr<Conn>& p) { return p.get() == c; }),
                 pending_.end());
}

void CmAcceptor::CheckDeadlines() {
  auto now = Conn::Clock::now();
  auto limit = std::chrono::milliseconds(env_.opt->accept_timeout_ms);
  for (auto& c : pending_) {
    if (c->state() != Conn::State::kSetup || now - c->created < limit) continue;  // kOpen: worker
    if (c->RequestClose("not established within --accept_timeout (" +
                        std::to_string(env_.opt->accept_timeout_ms) + " ms)"))
      env_.counters->setup_timeouts.fetch_add(1, std::memory_order_relaxed);
  }
}

void CmAcceptor::Destroy(const std::shared_ptr<Conn>& c) {
  // Only pending_ entries of closing Conns stay until here, so the limit counts them too.
  pending_.erase(std::remove(pending_.begin(), pending_.end(), c), pending_.end());
  by_id_.erase(c->id());
  DestroyDrained(env_, c.get());
}

}  // namespace rkv
