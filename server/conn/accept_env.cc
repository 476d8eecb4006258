// SPDX-License-Identifier: Apache-2.0
#include "server/conn/accept_env.h"

#include <arpa/inet.h>
#include <glog/logging.h>

#include <cstring>

#include "common/secure_random.h"
#include "common/verbs/conn_params.h"
#include "common/verbs/qp_setup.h"

namespace rkv {

std::string QpParamsLine(ibv_qp* qp) {
  ConnParams l, r;
  Status s = ReadBackParams(qp, &l, &r);
  if (!s.ok()) return "qp " + std::to_string(qp->qp_num) + " (" + s.message() + ")";
  return FormatParamsLine(l, r);
}

ibv_qp_init_attr AcceptEnv::QpAttr(int w) const {
  ibv_qp_init_attr qa{};
  qa.send_cq = workers[size_t(w)]->cq();
  qa.recv_cq = workers[size_t(w)]->cq();
  qa.qp_type = IBV_QPT_RC;
  if (srq != nullptr) {
    qa.srq = srq->srq();
  } else {  // registration mode: a receive queue of its own (server/conn/private_domain.h)
    qa.cap.max_recv_wr = uint32_t(Worker::PrivateReceiveBuffers(*opt));
    qa.cap.max_recv_sge = 1;
  }
  qa.cap.max_send_wr = uint32_t(Worker::SendQueueDepth(*opt));
  qa.cap.max_send_sge = 1;
  qa.cap.max_inline_data = max_inline;
  qa.sq_sig_all = 0;
  return qa;
}

wire::ServerHello AcceptEnv::HelloFor(const Conn& c) const {
  wire::ServerHello h = hello;
  std::memcpy(h.server_nonce, c.server_nonce, sizeof h.server_nonce);
  return h;
}

Status CreateClientQp(const AcceptEnv& env, int slot, rdma_cm_id* id, const ConnParams* init,
                      ibv_qp** qp, std::unique_ptr<PrivateDomain>* domain) {
  *qp = nullptr;
  domain->reset();
  std::unique_ptr<PrivateDomain> d;
  if (env.srq == nullptr) {
    const int slots = Worker::ReplySlots(*env.opt);
    const size_t bytes = size_t(slots) * Worker::kSendSlotSize;
    Status s = PrivateDomain::Create(env.ctx, env.send_base + size_t(slot) * bytes, bytes,
                                     Worker::PrivateReceiveBuffers(*env.opt), &d);
    if (!s.ok()) return s;
  }
  ibv_pd* pd = d ? d->pd() : env.pd;
  ibv_qp_init_attr qa = env.QpAttr(env.WorkerFor(slot));
  ibv_qp* created = nullptr;
  if (id != nullptr) {
    if (rdma_create_qp(id, pd, &qa) != 0) return ErrnoStatus("rdma_create_qp", errno);
    created = id->qp;
  } else {
    created = ibv_create_qp(pd, &qa);
    if (created == nullptr) return ErrnoStatus("ibv_create_qp", errno);
  }
  Status s;
  if (init != nullptr) s = ModifyQpToInit(created, *init, IBV_ACCESS_REMOTE_READ);
  if (s.ok() && d) s = d->PostSetup(created);
  if (!s.ok()) {
    if (id != nullptr) {
      rdma_destroy_qp(id);
    } else if (int rc = ibv_destroy_qp(created); rc != 0) {
      LOG(ERROR) << "ibv_destroy_qp(qp " << created->qp_num << ") failed: " << std::strerror(rc)
                 << "; leaking it and its PD";
      (void)d.release();  // its buffers may still be the QP's
    }
    return s;  // d goes after its QP
  }
  *qp = created;
  *domain = std::move(d);
  return Status::Ok();
}

Status NewServerNonce(uint8_t* nonce) {
  Status s = SecureRandom::Fill(nonce, wire::kNonceSize);
  if (!s.ok()) return Status(s.code(), "server nonce: " + s.message());
  return s;
}

std::shared_ptr<Conn> NewConn(const AcceptEnv& env, Conn::Kind kind, int slot, ConnOwner* owner,
                              rdma_cm_id* id, ibv_qp* qp, const uint8_t* nonce, uint32_t peer_qpn,
                              std::unique_ptr<PrivateDomain> domain, SourceLimiter::Lease lease) {
  int w = env.WorkerFor(slot);
  auto c = std::make_shared<Conn>(kind, env.next_serial->fetch_add(1) + 1, slot, w,
                                  env.workers[size_t(w)], owner, id, qp, nonce, peer_qpn,
                                  std::move(domain));
  c->source_lease = std::move(lease);
  env.workers[size_t(w)]->Adopt(c);  // first: a Close that follows must find it adopted
  env.registry->Add(c);
  env.counters->connections_total.fetch_add(1, std::memory_order_relaxed);
  env.counters->connections_active.fetch_add(1, std::memory_order_relaxed);
  env.counters->connections_pending.fetch_add(1, std::memory_order_relaxed);
  return c;
}

Status AdmitSource(const AcceptEnv& env, const sockaddr* addr, SourceLimiter::Lease* lease) {
  if (env.limiter == nullptr) return Status::Ok();
  // Fail closed: a connection whose source cannot be named is not let past the limits.
  if (addr == nullptr) return Status(Code::kProtocolError, "no source address for the connection");
  char text[INET6_ADDRSTRLEN] = {0};
  if (addr->sa_family == AF_INET) {
    inet_ntop(AF_INET, &reinterpret_cast<const sockaddr_in*>(addr)->sin_addr, text, sizeof text);
  } else if (addr->sa_family == AF_INET6) {
    inet_ntop(AF_INET6, &reinterpret_cast<const sockaddr_in6*>(addr)->sin6_addr, text, sizeof text);
  } else {
    return Status(Code::kProtocolError, "source address of family " +
                                            std::to_string(addr->sa_family) +
                                            " (not IPv4 or IPv6): refused");
  }
  Status s = env.limiter->Admit(text, SourceLimiter::Clock::now(), lease);
  if (s.ok()) return s;
  env.counters->source_limited.fetch_add(1, std::memory_order_relaxed);
  return Status(s.code(), "BUSY: " + s.message());
}

bool MarkEstablished(const AcceptEnv& env, Conn* c) {
  env.counters->connections_established.fetch_add(1, std::memory_order_relaxed);
  bool counted = false;
  bool ok = c->MarkEstablished(&counted);
  if (!counted) env.counters->connections_established.fetch_sub(1, std::memory_order_relaxed);
  return ok;
}

void DestroyDrained(const AcceptEnv& env, Conn* c) {
  c->DestroyVerbs(c->w.leak_qp);
  c->control.reset();
  // A leaked QP keeps its slot (its send buffers, its share of the CQ) and stays counted.
  if (!c->w.leak_qp) {
    env.registry->ReleaseSlot(c->slot);
    env.counters->connections_active.fetch_sub(1, std::memory_order_relaxed);
  }
  if (c->owner_pending) {
    c->owner_pending = false;
    env.counters->connections_pending.fetch_sub(1, std::memory_order_relaxed);
  }
}

}  // namespace rkv
