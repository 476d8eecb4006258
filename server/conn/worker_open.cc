// SPDX-License-Identifier: Apache-2.0
// Worker: connections before OPEN, OPEN itself (authentication) and what it grants (rkeys).
#include <glog/logging.h>

#include <chrono>
#include <cstring>

#include "common/auth.h"
#include "common/secure_random.h"
#include "common/wire.h"
#include "server/conn/worker.h"
#include "server/conn/worker_internal.h"

namespace rkv {

using namespace worker_internal;  // NOLINT(build/namespaces): this class's own helpers

void Worker::HandleUnopened(const std::shared_ptr<Conn>& c, const uint8_t* msg, uint32_t len) {
  Conn::WorkerState& w = c->w;
  if (w.close_after_reply) return;  // refused already; closing once the refusal is out
  wire::Request req{};
  Status s = wire::DecodeRequest(msg, len, &req);
  if (!s.ok()) {
    wire::RequestHeader h{};
    if (len >= sizeof(h)) std::memcpy(&h, msg, sizeof(h));
    req.request_id = h.request_id;
    req.op = static_cast<wire::Op>(0);
  }
  std::string why;
  if (s.ok() && req.op == wire::Op::kOpen) {
    wire::OpenReply reply{};
    s = Open(c, req, &reply);
    if (s.ok()) {
      env_.counters->opens.fetch_add(1, std::memory_order_relaxed);
      PostReply(c, req.op, req.request_id, Code::kOk,
                std::string_view(reinterpret_cast<const char*>(&reply), sizeof reply));
      return;
    }
    if (s.code() == Code::kConnectionLost) return;  // closing meanwhile
    why = "OPEN refused: " + s.message();
  } else {
    why = "request before OPEN (" + (s.ok() ? "op " + std::to_string(int(req.op)) : s.message()) +
          ")";
    s = Status(Code::kUnauthenticated,
               "the connection is not open: its first request must be OPEN");
  }
  env_.counters->opens_refused.fetch_add(1, std::memory_order_relaxed);
  LOG_EVERY_N(WARNING, 20) << "qp " << c->qpn << ": " << why << "; dropping it";
  w.close_after_reply = true;
  w.close_after_reply_reason = why;
  const int before = w.unacked;
  PostReply(c, req.op, req.request_id, s.code(), s.message());
  if (w.unacked == before) c->RequestClose(why);  // nothing posted: close now
}

Status Worker::Open(const std::shared_ptr<Conn>& c, const wire::Request& req,
                    wire::OpenReply* reply) {
  wire::OpenRequest o;
  Status s = wire::DecodeOpenRequest(req.value, &o);
  if (!s.ok()) return Status(Code::kUnauthenticated, s.message());
  const std::string& token = env_.auth_token;
  auth::Transcript t{};
  std::memcpy(t.server_nonce, c->server_nonce, sizeof t.server_nonce);
  std::memcpy(t.client_nonce, o.client_nonce, sizeof t.client_nonce);
  t.server_qpn = c->qpn;
  t.client_qpn = c->peer_qpn;
  if (!token.empty() && !auth::VerifyMac(token, auth::Prover::kClient, t, o.mac))
    return Status(Code::kUnauthenticated, "authentication failed");
  *reply = env_.open_reply;
  s = Grant(c, reply);
  if (!s.ok()) {
    LOG(ERROR) << "qp " << c->qpn << ": " << s.message();
    // The server's own failure (e.g. pinned memory): IO_ERROR, not a verdict on the client.
    return Status(Code::kIoError, "server: cannot grant access: " + s.message());
  }
  if (!token.empty()) {
    s = auth::ComputeOpenProof(token, t, reply);  // last: over every other field
    if (!s.ok()) return Status(Code::kUnauthenticated, "server: " + s.message());
  }
  // Counted first, so the uncount at close never runs ahead of it.
  env_.counters->connections_established.fetch_add(1, std::memory_order_relaxed);
  bool from_setup = false;
  bool opened = c->MarkOpen(&from_setup);
  if (!from_setup) env_.counters->connections_established.fetch_sub(1, std::memory_order_relaxed);
  if (!opened) return Status(Code::kConnectionLost, "closing");
  return Status::Ok();
}

Status Worker::Grant(const std::shared_ptr<Conn>& c, wire::OpenReply* reply) {
  reply->region_addr = 0;  // zero-based: no server address leaves the server
  if (!env_.windows) {
    // In the connection's own PD: no other client's QP can use this rkey (private_domain.h).
    if (c->domain() == nullptr)
      return Status(Code::kProtocolError, "registration mode without the connection's own PD");
    ibv_mr* mr = ibv_reg_mr_iova(c->domain()->pd(), env_.region, env_.region_size, 0,
                                 IBV_ACCESS_REMOTE_READ);
    if (mr == nullptr) return ErrnoStatus("ibv_reg_mr_iova(region, iova 0, REMOTE_READ)", errno);
    c->SetClientMr(mr);
    // Its full receive queue, posted before the OPEN reply: the client's next request finds it.
    Status s = c->domain()->Open(c->qp());
    if (!s.ok()) return s;
    reply->rkey = mr->rkey;
    c->w.granted_rkey = mr->rkey;
    return Status::Ok();
  }
  ibv_mw* mw = ibv_alloc_mw(env_.pd, IBV_MW_TYPE_2);
  if (mw == nullptr) return ErrnoStatus("ibv_alloc_mw(IBV_MW_TYPE_2)", errno);
  uint8_t key = 0;
  Status s = SecureRandom::Fill(&key, 1);
  if (!s.ok()) {
    (void)ibv_dealloc_mw(mw);
    return s;
  }
  // Type 2: the consumer picks the key part (low 8 bits) of the window's rkey at each bind.
  const uint32_t rkey = (mw->rkey & 0xffffff00u) | key;
  if (!c->w.sends.HasRoom()) {  // the first send of the connection: a broken invariant
    (void)ibv_dealloc_mw(mw);
    return Status(Code::kIoError, "no room in the send queue for the window bind");
  }
  ibv_send_wr wr{}, *bad = nullptr;
  wr.wr_id = SendId(c->serial, c->w.sends.next_seq(), kBind);
  wr.opcode = IBV_WR_BIND_MW;
  wr.send_flags = IBV_SEND_SIGNALED;
  wr.bind_mw.mw = mw;
  wr.bind_mw.rkey = rkey;
  wr.bind_mw.bind_info.mr = env_.region_mr;
  wr.bind_mw.bind_info.addr = reinterpret_cast<uint64_t>(env_.region);
  wr.bind_mw.bind_info.length = env_.region_size;
  wr.bind_mw.bind_info.mw_access_flags = IBV_ACCESS_REMOTE_READ | IBV_ACCESS_ZERO_BASED;
  if (int rc = ibv_post_send(c->qp(), &wr, &bad); rc != 0) {
    (void)ibv_dealloc_mw(mw);
    return ErrnoStatus("ibv_post_send(IBV_WR_BIND_MW)", rc);
  }
  c->w.sends.Posted(kBind, true);
  c->SetWindow(mw);  // owned by the Conn from here on, bound or not
  reply->rkey = rkey;
  c->w.granted_rkey = rkey;
  return Status::Ok();
}

}  // namespace rkv
