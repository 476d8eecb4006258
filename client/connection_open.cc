// SPDX-License-Identifier: Apache-2.0
// Connection's opening: buffer, verbs resources and QP, rdma_cm or manual-mode connect, OPEN
// (authentication) and the read-back of every connection parameter.
#include <fcntl.h>
#include <glog/logging.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

#include "client/connection.h"
#include "common/auth.h"
#include "common/printable.h"
#include "common/secure_random.h"
#include "common/verbs/conn_params.h"
#include "common/verbs/qp_setup.h"

namespace rkv {
namespace {
constexpr int kKeepaliveAccess = IBV_ACCESS_REMOTE_WRITE;
}  // namespace

Status Connection::Open(const std::string& host, uint16_t port, const Options& options,
                        std::unique_ptr<Connection>* out, const std::function<bool()>* abandon) {
  std::unique_ptr<Connection> c(new Connection());
  c->options_ = options;
  c->abandon_ = abandon;
  void* mem = nullptr;
  if (posix_memalign(&mem, 4096, kBufferSize) != 0)
    return Status(Code::kIoError, "posix_memalign of the client buffer failed");
  std::memset(mem, 0, kBufferSize);
  c->buf_.reset(static_cast<uint8_t*>(mem));
  Status s = options.exchange.method == Exchange::kRdmaCm ? c->OpenCm(host, port)
                                                          : c->OpenManual(host, port);
  if (!s.ok()) return s;
  s = c->FinishOpen(host, port);
  if (!s.ok()) return s;
  c->window_.SetDepth(int(std::min<uint32_t>(c->hello_.credits, kMaxPipeline)));
  *out = std::move(c);
  return Status::Ok();
}

Status Connection::CreateResources(ibv_context* ctx) {
  pd_.reset(ibv_alloc_pd(ctx));
  if (!pd_) return ErrnoStatus("ibv_alloc_pd", errno);
  if (options_.reply_spin_us >= 0) {  // replies may be waited for asleep (WaitForEvent)
    comp_.reset(ibv_create_comp_channel(ctx));
    if (!comp_) return ErrnoStatus("ibv_create_comp_channel", errno);
    // Non-blocking: a wake-up with no event ready never blocks in ibv_get_cq_event.
    const int flags = fcntl(comp_->fd, F_GETFL);
    if (flags < 0 || fcntl(comp_->fd, F_SETFL, flags | O_NONBLOCK) < 0)
      return ErrnoStatus("fcntl(completion channel, O_NONBLOCK)", errno);
  }
  cq_.reset(ibv_create_cq(ctx, 256, nullptr, comp_.get(), 0));
  if (!cq_) return ErrnoStatus("ibv_create_cq", errno);
  mr_.reset(ibv_reg_mr(pd_.get(), buf_.get(), kBufferSize, IBV_ACCESS_LOCAL_WRITE));
  if (!mr_) return ErrnoStatus("ibv_reg_mr(client buffer)", errno);
  return Status::Ok();
}

ibv_qp_init_attr Connection::QpInitAttr() {
  ibv_qp_init_attr qpa{};
  qpa.send_cq = cq_.get();
  qpa.recv_cq = cq_.get();
  qpa.qp_type = IBV_QPT_RC;
  qpa.cap.max_send_wr = 128;
  qpa.cap.max_recv_wr = kMaxPipeline + 4;
  qpa.cap.max_send_sge = 1;
  qpa.cap.max_recv_sge = 1;
  // Requests up to this size go inline (a PUT of a small value: no DMA read of the buffer);
  // CreateQp falls back to none if the device refuses.
  qpa.cap.max_inline_data = kWantInline;
  // Only what is waited for is signalled: each SEND, and the last READ of each chain (an RC send
  // queue completes in order, so the last READ's completion means the chain is done, and an
  // error in any of them flushes it with an error).
  qpa.sq_sig_all = 0;
  return qpa;
}

Status Connection::CreateQp(rdma_cm_id* id, ibv_qp** qp) {
  for (uint32_t want : {kWantInline, 0u}) {
    ibv_qp_init_attr qpa = QpInitAttr();
    qpa.cap.max_inline_data = want;
    if (id != nullptr) {
      if (rdma_create_qp(id, pd_.get(), &qpa) == 0) {
        *qp = id->qp;
        max_inline_ = std::min(qpa.cap.max_inline_data, want);
        return Status::Ok();
      }
    } else if ((*qp = ibv_create_qp(pd_.get(), &qpa)) != nullptr) {
      max_inline_ = std::min(qpa.cap.max_inline_data, want);
      return Status::Ok();
    }
    if (errno != EINVAL || want == 0)
      return ErrnoStatus(id != nullptr ? "rdma_create_qp" : "ibv_create_qp", errno);
  }
  return Status(Code::kIoError, "unreachable");
}

Status Connection::OpenCm(const std::string& host, uint16_t port) {
  const QpSettings& qs = options_.qp;
  const int timeout_ms = options_.connect_timeout_ms;
  channel_.reset(rdma_create_event_channel());
  if (!channel_) return ErrnoStatus("rdma_create_event_channel", errno);
  rdma_cm_id* id = nullptr;
  if (rdma_create_id(channel_.get(), &id, nullptr, RDMA_PS_TCP) != 0)
    return ErrnoStatus("rdma_create_id", errno);
  id_.reset(id);

  Status s = ResolveRoute(channel_.get(), id, host, port, timeout_ms,
                          static_cast<uint8_t>(qs.traffic_class), abandon_, options_.local_address);
  if (!s.ok()) return s;
  uint8_t ack_timeout = static_cast<uint8_t>(qs.timeout);
  if (rdma_set_option(id, RDMA_OPTION_ID, RDMA_OPTION_ID_ACK_TIMEOUT, &ack_timeout,
                      sizeof ack_timeout) != 0)
    return ErrnoStatus("rdma_set_option(ACK_TIMEOUT)", errno);

  s = CreateResources(id->verbs);
  if (!s.ok()) return s;
  ibv_qp* created = nullptr;
  s = CreateQp(id, &created);
  if (!s.ok()) return s;
  qp_ = QpOwner(id, cq_.get());

  ibv_device_attr dev{};
  if (ibv_query_device(id->verbs, &dev) != 0) return ErrnoStatus("ibv_query_device", errno);
  wire::ClientHello hello{wire::kHelloMagic, wire::kProtocolVersion, 0, 0};
  rdma_conn_param cp{};
  cp.private_data = &hello;
  cp.private_data_len = sizeof(hello);
  // initiator_depth = this QP's max_rd_atomic; responder_resources = its max_dest_rd_atomic
  // (0 by default: the server never reads from a client).
  s = CheckRdAtomicLimits(dev, qs);
  if (!s.ok()) return s;
  cp.initiator_depth = RdAtomicDepth(qs.max_rd_atomic, dev.max_qp_init_rd_atom);
  cp.responder_resources = static_cast<uint8_t>(std::max(0, qs.max_dest_rd_atomic));
  cp.retry_count = static_cast<uint8_t>(qs.retry_cnt);
  cp.rnr_retry_count = static_cast<uint8_t>(qs.rnr_retry);
  if (rdma_connect(id, &cp) != 0) return ErrnoStatus("rdma_connect", errno);
  rdma_cm_event* ev = nullptr;
  s = WaitCmEvent(channel_.get(), RDMA_CM_EVENT_ESTABLISHED, timeout_ms, &ev, abandon_);
  if (!s.ok())
    return Status(s.code(),
                  "connecting to " + host + ":" + std::to_string(port) + ": " + s.message());
  s = wire::DecodeServerHello(ev->param.conn.private_data, ev->param.conn.private_data_len,
                              &server_hello_);
  server_qpn_ = ev->param.conn.qp_num;
  rdma_ack_cm_event(ev);
  return s;
}

Status Connection::OpenManual(const std::string& host, uint16_t port) {
  const ExchangeOptions& xo = options_.exchange;
  const std::string where =
      std::string(ExchangeName(xo.method)) + " exchange with " + host + ":" + std::to_string(port);
  Status s = ConnectExchange(xo, host, port, &exchange_);
  if (!s.ok()) return s;
  QpSettings qs = options_.qp;
  s = OpenDeviceFor(exchange_->LocalIpv4(), &qs, &ctx_);
  if (!s.ok()) return s;
  s = CreateResources(ctx_.get());
  if (!s.ok()) return s;
  ibv_qp* qp = nullptr;
  s = CreateQp(nullptr, &qp);
  if (!s.ok()) return s;
  qp_ = QpOwner(qp, cq_.get());
  ConnParams self;
  s = FillLocalParams(ctx_.get(), qs, &self);
  if (!s.ok()) return s;
  self.qp_num = qp->qp_num;
  // Remote write is granted only so that the server's zero-length keepalive WRITEs are
  // answered (docs/design.md); no MR of the client allows remote access, so no byte can be
  // written.
  s = ModifyQpToInit(qp, self, kKeepaliveAccess);
  if (!s.ok()) return s;

  ExchangeMsg m;
  m.type = MsgType::kParams;
  m.params = self;
  s = exchange_->Send(m);
  if (!s.ok()) return s;
  ExchangeMsg reply;
  s = exchange_->Receive(&reply, xo.timeout_ms);
  if (!s.ok()) return Status(s.code(), where + ": " + s.message());
  if (reply.type == MsgType::kError)
    return Status(reply.code == Code::kOk ? Code::kProtocolError : reply.code,
                  "server refused the connection (" + where + "): " + Printable(reply.text, 2048));
  if (reply.type != MsgType::kParams || !reply.has_hello)
    return Status(Code::kProtocolError, where + ": expected the server's parameters");
  const ConnParams& peer = reply.params;
  s = ConnectQp(qp, self, peer, qs, kKeepaliveAccess, &info_.mtu_note);
  if (!s.ok()) {
    ExchangeMsg e;
    e.type = MsgType::kError;
    e.code = s.code();
    e.text = "client: " + s.message();
    (void)exchange_->Send(e);
    return Status(s.code(), where + ": " + s.message());
  }
  server_hello_ = reply.hello;
  server_qpn_ = peer.qp_num;
  ExchangeMsg ready;
  ready.type = MsgType::kReady;
  return exchange_->Send(ready);
}

Status Connection::SendOpen() {
  const std::string& token = options_.auth_token;
  const bool required = (server_hello_.flags & wire::kHelloAuthRequired) != 0;
  if (required && token.empty())
    return Status(Code::kUnauthenticated,
                  "server requires authentication (set Options::auth_token / --auth_token_file)");
  if (!required && !token.empty())
    return Status(Code::kUnauthenticated,
                  "server does not require authentication but a token is configured: refusing "
                  "a server that cannot prove the token");
  wire::OpenRequest req{};
  Status s = SecureRandom::Fill(req.client_nonce, sizeof req.client_nonce);
  if (!s.ok()) return s;
  auth::Transcript t{};
  std::memcpy(t.server_nonce, server_hello_.server_nonce, sizeof t.server_nonce);
  std::memcpy(t.client_nonce, req.client_nonce, sizeof t.client_nonce);
  t.server_qpn = server_qpn_;
  t.client_qpn = qp_.qp()->qp_num;
  if (required) {
    s = auth::ComputeMac(token, auth::Prover::kClient, t, req.mac);
    if (!s.ok()) return s;
  }
  Code code;
  std::string payload;
  s = Rpc(wire::Op::kOpen, {}, std::string_view(reinterpret_cast<const char*>(&req), sizeof req),
          &code, &payload);
  if (!s.ok()) return s;
  if (code == Code::kUnauthenticated)
    return Status(code, "server refused OPEN: " + Printable(payload, 2048));
  if (code != Code::kOk) return Status(code, "OPEN: " + Printable(payload, 2048));
  // The proof covers the whole reply: checked before any field of it is decoded or used.
  if (required && !auth::VerifyOpenProof(token, t, payload))
    return Status(Code::kUnauthenticated,
                  "authentication failed: the server did not prove the token (or its OPEN reply "
                  "was altered)");
  return wire::DecodeOpenReply(payload, &hello_);
}

Status Connection::FinishOpen(const std::string& host, uint16_t port) {
  Status open = SendOpen();
  if (!open.ok()) {
    state_ = State::kBroken;
    return open;
  }
  geometry_.region_size = hello_.region_size;
  geometry_.num_buckets = hello_.num_buckets;
  geometry_.overflow_offset = hello_.overflow_offset;
  geometry_.overflow_slots = hello_.overflow_slots;
  geometry_.seed = hello_.hash_seed;
  const wire::OpenReply& h = hello_;
  ServerInfo& i = info_;
  i.instance_id = h.instance_id;
  i.region_addr = h.region_addr;
  i.rkey = h.rkey;
  i.region_size = h.region_size;
  i.num_buckets = h.num_buckets;
  i.overflow_slots = h.overflow_slots;
  i.hash_seed = h.hash_seed;
  i.max_key_size = h.max_key_size;
  i.max_value_size = h.max_value_size;
  i.request_credits = h.credits;
  i.protocol_version = h.version;
  i.exchange = options_.exchange.method;
  ibv_qp* qp = qp_.qp();
  i.device = ibv_get_device_name(qp->context->device);
  ConnParams peer_seen;
  Status s = ReadBackParams(qp, &i.local, &peer_seen);
  if (!s.ok()) return s;
  // The memory parameters this client's READs use, as OPEN granted them (a QP holds none).
  i.local.remote_addr = h.region_addr;
  i.local.rkey = h.rkey;
  i.local.region_size = h.region_size;
  i.port = i.local.port_num;
  i.qp_num = qp->qp_num;
  i.path_mtu = MtuEnumToBytes(i.local.path_mtu);
  ibv_qp_attr qattr{};
  ibv_qp_init_attr qinit{};
  if (ibv_query_qp(qp, &qattr, IBV_QP_AV, &qinit) == 0)
    i.gid_index = (qattr.ah_attr.is_global != 0) ? qattr.ah_attr.grh.sgid_index : -1;
  i.link_layer = i.local.link_layer == kLinkEthernet ? "Ethernet" : "InfiniBand";
  // The server's side, as its QP really uses it.
  Code code;
  std::string payload;
  s = Rpc(wire::Op::kParams, {}, {}, &code, &payload);
  if (!s.ok()) return s;
  if (code != Code::kOk)
    return Status(code, "reading the server's parameters: " + Printable(payload, 2048));
  s = DecodeConnParams(reinterpret_cast<const uint8_t*>(payload.data()), payload.size(), &i.peer);
  if (!s.ok()) return s;
  if (i.peer.qp_num != peer_seen.qp_num)
    return Status(Code::kProtocolError, "connected to " + host + ":" + std::to_string(port) +
                                            " but the server reports QP " +
                                            std::to_string(i.peer.qp_num) + ", ours points at " +
                                            std::to_string(peer_seen.qp_num));
  // Verbose only (glog --v=1, kvctl -v): a library does not write to a program's stderr when
  // all goes well.
  VLOG(1) << "rkv: connected to " << host << ":" << port << " via "
          << ExchangeName(options_.exchange.method) << " on " << i.device << ": "
          << FormatParamsLine(i.local, peer_seen);
  return Status::Ok();
}

}  // namespace rkv
