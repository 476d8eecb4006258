// SPDX-License-Identifier: Apache-2.0
#include "server/worker.h"

#include <glog/logging.h>
#include <poll.h>

#include <chrono>
#include <cstring>

#include "common/auth.h"
#include "common/secure_random.h"
#include "common/wire.h"

namespace rkv {
namespace {
// After moving a QP to ERR, how long to wait for IBV_EVENT_QP_LAST_WQE_REACHED (not every
// device raises it) before posting the drain marker.
constexpr auto kLastWqeGrace = std::chrono::milliseconds(300);
// A QP whose marker has not completed by then is leaked (kept, never reused), not destroyed.
constexpr auto kDrainDeadline = std::chrono::seconds(10);
constexpr auto kTickPeriod = std::chrono::milliseconds(50);
constexpr int kMaxBatches = 4;  // CQ batches of 32 per loop round

uint64_t SendId(uint64_t serial, uint64_t kind) { return (serial << 3) | (kind << 1); }
uint64_t SerialOf(uint64_t wr_id) { return wr_id >> 3; }
uint64_t KindOf(uint64_t wr_id) { return (wr_id >> 1) & 3; }
int64_t Ms(Conn::Clock::duration d) {
  return std::chrono::duration_cast<std::chrono::milliseconds>(d).count();
}
}  // namespace

Worker::~Worker() { Join(); }

Status Worker::Init(ibv_context* ctx, int cqe) {
  Status s = queue_.status();
  if (!s.ok()) return s;
  channel_.reset(ibv_create_comp_channel(ctx));
  if (!channel_) return ErrnoStatus("ibv_create_comp_channel", errno);
  cq_.reset(ibv_create_cq(ctx, cqe, nullptr, channel_.get(), 0));
  if (!cq_) return ErrnoStatus("ibv_create_cq(" + std::to_string(cqe) + ")", errno);
  if (int rc = ibv_req_notify_cq(cq_.get(), 0); rc != 0)
    return ErrnoStatus("ibv_req_notify_cq", rc);
  return Status::Ok();
}

void Worker::Start() {
  thread_ = std::thread([this] { Loop(); });
}

void Worker::Join() {
  if (thread_.joinable()) thread_.join();
  // The Conns are destroyed by their owners (or at shutdown by the Server), not here.
  conns_.clear();
  closing_.clear();
  queue_.TakeAll();
}

void Worker::Loop() {
  ibv_wc wc[32];
  bool busy = false;
  // Spinning (--poll_spin_us): for spin_ after the last completion the loop polls the CQ and
  // the command queue's flag without a system call; then it re-arms nothing new (the CQ stays
  // armed) and sleeps in poll() on the channel and the eventfd, as with spinning off.
  const auto spin = std::chrono::microseconds(std::max(0, env_.opt->poll_spin_us));
  Clock::time_point last_work{};
  while (!env_.stop->load()) {
    const bool spinning = spin.count() > 0 && Clock::now() - last_work < spin;
    int r = 0;
    pollfd pfd[2] = {{channel_->fd, POLLIN, 0}, {queue_.fd(), POLLIN, 0}};
    if (!spinning) {
      r = poll(pfd, 2, busy ? 0 : int(kTickPeriod.count()));
      if (r < 0 && errno != EINTR) {
        PLOG_EVERY_N(ERROR, 100) << "poll(worker " << index_ << ")";
        continue;
      }
      if (!busy) env_.counters->worker_sleeps.fetch_add(1, std::memory_order_relaxed);
    }
    if (!spinning || queue_.MaybeNonEmpty()) DrainCommands();
    if (r > 0 && (pfd[0].revents & POLLIN)) {
      ibv_cq* cq = nullptr;
      void* ctx = nullptr;
      if (ibv_get_cq_event(channel_.get(), &cq, &ctx) == 0) {
        ibv_ack_cq_events(cq, 1);
        if (int rc = ibv_req_notify_cq(cq, 0); rc != 0) {
          LOG_EVERY_N(ERROR, 100) << "ibv_req_notify_cq failed: " << std::strerror(rc);
        }
      }
    }
    // Poll even without an event: cheap, and nothing is missed if an event was lost. At most
    // kMaxBatches batches per round, so that commands, keepalives and Stop() are served even
    // while clients keep the CQ busy (what is left wakes poll() again at once: the CQ was
    // re-armed before polling).
    int n = 0, handled = 0;
    for (int batch = 0; batch < kMaxBatches; ++batch) {
      n = ibv_poll_cq(cq_.get(), 32, wc);
      if (n <= 0) break;
      handled += n;
      for (int i = 0; i < n; ++i) HandleCompletion(wc[i]);
    }
    if (n < 0) {
      LOG_EVERY_N(ERROR, 100) << "ibv_poll_cq(worker " << index_ << ") failed";
    }
    busy = n == 32;  // more may be waiting: come back without sleeping
    const Clock::time_point now = Clock::now();
    if (handled > 0) last_work = now;
    if (now - last_tick_ >= kTickPeriod) Tick();
  }
}

void Worker::DrainCommands() {
  for (Command& command : queue_.TakeAll()) {
    const Cmd cmd = command.cmd;
    const std::shared_ptr<Conn>& c = command.conn;
    if (!c->w.adopted) {  // a Close may arrive before the Adopt it raced with
      c->w.adopted = true;
      c->w.last_heard = Clock::now();
      conns_[c->qpn] = c;
    }
    switch (cmd) {
      case Cmd::kAdopt:
        break;
      case Cmd::kClose:
        if (!c->w.error_state) {
          if (c->closed_established())
            env_.counters->connections_established.fetch_sub(1, std::memory_order_relaxed);
          MoveQpToError(c->qp());
          c->w.error_state = true;
          c->w.close_started = Clock::now();
          closing_.push_back(c);
        }
        AdvanceClose(c);
        break;
      case Cmd::kLastWqe:
        c->w.last_wqe = true;
        if (c->state() == Conn::State::kClosing) AdvanceClose(c);
        break;
      case Cmd::kReply:
        --c->w.in_pool;
        SendReply(c, command.reply);
        SubmitNextWrite(c);
        break;
    }
  }
}

std::shared_ptr<Conn> Worker::Find(uint32_t qpn) {
  auto it = conns_.find(qpn);
  if (it != conns_.end()) return it->second;
  DrainCommands();  // the Adopt may still be queued
  it = conns_.find(qpn);
  return it == conns_.end() ? nullptr : it->second;
}

void Worker::HandleCompletion(const ibv_wc& wc) {
  if (SrqPool::IsRecv(wc.wr_id)) {
    const uint32_t buf = SrqPool::Index(wc.wr_id);
    if (env_.srq == nullptr) {
      HandlePrivateReceive(wc, buf);
      return;
    }
    env_.srq->Consumed();
    std::shared_ptr<Conn> c = Find(wc.qp_num);
    if (c) HandleReceive(c, wc, env_.srq->Buffer(buf));
    env_.srq->Return(buf);
    return;
  }
  std::shared_ptr<Conn> c = Find(wc.qp_num);
  if (!c || c->serial != SerialOf(wc.wr_id)) {
    VLOG(1) << "stale send completion for qp " << wc.qp_num;
    return;
  }
  Conn::WorkerState& w = c->w;
  --w.sends_in_flight;
  uint64_t kind = KindOf(wc.wr_id);
  if (kind == kReply) --w.unacked;
  if (kind == kReply && w.close_after_reply && w.unacked <= 0 && c->state() < Conn::State::kClosing)
    c->RequestClose(w.close_after_reply_reason);  // the UNAUTHENTICATED answer went out
  if (kind == kKeepalive) w.keepalive_in_flight = false;
  if (kind == kMarker) w.marker_done = true;
  if (kind == kBind && wc.status != IBV_WC_SUCCESS && wc.status != IBV_WC_WR_FLUSH_ERR &&
      c->state() < Conn::State::kClosing) {
    c->RequestClose(std::string("memory window bind failed: ") + ibv_wc_status_str(wc.status));
    return;
  }
  if (wc.status == IBV_WC_SUCCESS) {
    w.last_heard = Clock::now();
  } else if (wc.status != IBV_WC_WR_FLUSH_ERR && c->state() < Conn::State::kClosing) {
    if (kind == kKeepalive && wc.status == IBV_WC_RETRY_EXC_ERR)
      env_.counters->peers_dead.fetch_add(1, std::memory_order_relaxed);
    c->RequestClose(std::string(kind == kKeepalive ? "keepalive" : "reply send") +
                    " failed: " + ibv_wc_status_str(wc.status) +
                    (wc.status == IBV_WC_RETRY_EXC_ERR ? " (peer unreachable)" : ""));
  }
  if (c->state() == Conn::State::kClosing && w.error_state) AdvanceClose(c);
}

void Worker::HandleReceive(const std::shared_ptr<Conn>& c, const ibv_wc& wc, const uint8_t* msg) {
  if (wc.status == IBV_WC_SUCCESS && c->state() < Conn::State::kClosing) {
    HandleRequest(c, msg, wc.byte_len);
  } else if (wc.status != IBV_WC_SUCCESS && wc.status != IBV_WC_WR_FLUSH_ERR) {
    c->RequestClose(std::string("receive completed with error: ") + ibv_wc_status_str(wc.status));
  }
}

void Worker::HandlePrivateReceive(const ibv_wc& wc, uint32_t buf) {
  std::shared_ptr<Conn> c = Find(wc.qp_num);
  // Gone: a QP leaked after its drain deadline (its domain is leaked with it); nothing to do.
  if (!c) return;
  PrivateDomain* d = c->domain();
  if (d == nullptr) {  // broken invariant: registration mode gives every QP its own domain
    LOG(ERROR) << "qp " << c->qpn << ": receive completion without a receive queue of its own";
    c->RequestClose("internal: receive completion without a private domain");
    return;
  }
  d->Consumed();
  size_t size = 0;
  const uint8_t* msg = d->Buffer(buf, &size);
  if (msg == nullptr || (wc.status == IBV_WC_SUCCESS && wc.byte_len > size)) {  // broken invariant
    LOG(ERROR) << "qp " << c->qpn << ": receive completion for buffer " << buf << " ("
               << wc.byte_len << " bytes) that is not one of its own";
    c->RequestClose("internal: receive completion for an unknown buffer");
    return;
  }
  HandleReceive(c, wc, msg);
  // The request's bytes are used (executed, or copied for the write pool): post the buffer
  // again, unless the QP is going (a receive posted in ERR would only be flushed).
  // A refused connection gets no receive again: whatever it sends meanwhile meets RNR.
  if (c->state() < Conn::State::kClosing && !c->w.error_state && !c->w.close_after_reply) {
    Status s = d->Repost(c->qp(), buf);
    if (!s.ok() && c->state() < Conn::State::kClosing) c->RequestClose(s.message());
  } else if (c->state() == Conn::State::kClosing && c->w.error_state) {
    AdvanceClose(c);  // the last flushed receive may be what the drain waits for
  }
}

bool Worker::PostSend(Conn& c, SendKind kind, const void* data, uint32_t len) {
  const uint32_t lkey = c.domain() != nullptr ? c.domain()->send_lkey() : env_.send_lkey;
  ibv_sge sge{reinterpret_cast<uint64_t>(data), len, lkey};
  ibv_send_wr wr{}, *bad = nullptr;
  wr.wr_id = SendId(c.serial, kind);
  wr.sg_list = len > 0 ? &sge : nullptr;
  wr.num_sge = len > 0 ? 1 : 0;
  wr.send_flags = IBV_SEND_SIGNALED;
  if (kind == kReply) {
    wr.opcode = IBV_WR_SEND;
    if (len <= env_.max_inline) wr.send_flags |= IBV_SEND_INLINE;
  } else {
    // Zero-length RDMA WRITE: needs no memory at the peer (its rkey is not checked), only an
    // answer from its HCA.
    wr.opcode = IBV_WR_RDMA_WRITE;
    wr.wr.rdma.remote_addr = 0;
    wr.wr.rdma.rkey = 0;
  }
  int rc = ibv_post_send(c.qp(), &wr, &bad);
  if (rc != 0) {
    if (c.state() < Conn::State::kClosing)
      c.RequestClose(std::string("ibv_post_send failed: ") + std::strerror(rc));
    return false;
  }
  ++c.w.sends_in_flight;
  return true;
}

void Worker::HandleRequest(const std::shared_ptr<Conn>& c, const uint8_t* msg, uint32_t len) {
  const ServerOptions& o = *env_.opt;
  Conn::WorkerState& w = c->w;
  const Clock::time_point received = Clock::now();
  w.last_heard = received;
  const int slots = SendSlots(o);
  if (w.unacked + w.in_pool + int(w.waiting_writes.size()) >= slots) {
    env_.counters->credit_drops.fetch_add(1, std::memory_order_relaxed);
    c->RequestClose("sent more than " + std::to_string(slots) +
                    " requests without waiting for replies (request credits: " +
                    std::to_string(o.credits) + ")");
    return;
  }
  if (c->state() != Conn::State::kOpen) {
    HandleUnopened(c, msg, len);
    return;
  }
  if (Offload(c, msg, len, received)) return;
  uint8_t* out = env_.send_base +
                 (size_t(c->slot) * size_t(slots) + w.next_send % uint32_t(slots)) * kSendSlotSize;
  bool malformed = false;
  size_t n = env_.exec->Execute(c->qp(), c->qpn, c->w.granted_rkey, msg, len, out, kSendSlotSize,
                                &malformed);
  if (malformed && ++w.bad_requests > o.max_bad_requests) {
    env_.counters->clients_dropped.fetch_add(1, std::memory_order_relaxed);
    c->RequestClose("more than " + std::to_string(o.max_bad_requests) + " malformed requests");
    return;
  }
  if (n == 0) {
    LOG(ERROR) << "reply does not fit a send slot";
    return;
  }
  if (PostSend(*c, kReply, out, uint32_t(n))) {
    ++w.next_send;
    ++w.unacked;
    CountReply(out, n, received);
  }
}

void Worker::CountReply(const void* reply, size_t n, Clock::time_point received) {
  if (n < sizeof(wire::ReplyHeader)) return;
  wire::ReplyHeader h;
  std::memcpy(&h, reply, sizeof h);
  int64_t ns =
      std::chrono::duration_cast<std::chrono::nanoseconds>(Clock::now() - received).count();
  env_.counters->rpcs.Record(h.op, h.status, ns > 0 ? uint64_t(ns) : 0);
}

void Worker::PostReply(const std::shared_ptr<Conn>& c, wire::Op op, uint64_t request_id, Code code,
                       std::string_view payload) {
  Conn::WorkerState& w = c->w;
  const int slots = SendSlots(*env_.opt);
  uint8_t* out = env_.send_base +
                 (size_t(c->slot) * size_t(slots) + w.next_send % uint32_t(slots)) * kSendSlotSize;
  size_t n = wire::EncodeReply(op, request_id, code, payload, out, kSendSlotSize);
  if (n > 0 && PostSend(*c, kReply, out, uint32_t(n))) {
    ++w.next_send;
    ++w.unacked;
    CountReply(out, n, w.last_heard);  // only called while handling a request: its receive time
  }
}

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
  ibv_send_wr wr{}, *bad = nullptr;
  wr.wr_id = SendId(c->serial, kBind);
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
  ++c->w.sends_in_flight;
  c->SetWindow(mw);  // owned by the Conn from here on, bound or not
  reply->rkey = rkey;
  c->w.granted_rkey = rkey;
  return Status::Ok();
}

bool Worker::Offload(const std::shared_ptr<Conn>& c, const uint8_t* msg, uint32_t len,
                     Clock::time_point received) {
  if (env_.writes == nullptr) return false;
  wire::Request req;
  if (!wire::DecodeRequest(msg, len, &req).ok()) return false;  // answered here: BAD_REQUEST
  if (req.op != wire::Op::kPut && req.op != wire::Op::kDelete) return false;
  // One write of a connection in the pool at a time, in the order it sent them: a client cannot
  // take more than one pool thread per connection, and "PUT k=1; PUT k=2" ends as 2.
  if (env_.write_received != nullptr) {
    const uint32_t slots = uint32_t(SendSlots(*env_.opt));
    const uint32_t at =
        (env_.write_ring_head[c->slot] + uint32_t(c->w.waiting_writes.size())) % slots;
    env_.write_received[size_t(c->slot) * (slots + 1) + at] = received;
  }
  c->w.waiting_writes.emplace_back(reinterpret_cast<const char*>(msg), len);
  SubmitNextWrite(c);
  return true;
}

void Worker::SubmitNextWrite(const std::shared_ptr<Conn>& c) {
  Conn::WorkerState& w = c->w;
  if (w.in_pool > 0 || w.waiting_writes.empty()) return;
  if (c->state() >= Conn::State::kClosing) {  // nobody will read the replies
    w.waiting_writes.clear();
    return;
  }
  WritePool::Job job;
  job.conn = c;
  job.worker = this;
  job.request = std::move(w.waiting_writes.front());
  w.waiting_writes.pop_front();
  Clock::time_point received = Clock::now();
  if (env_.write_received != nullptr) {
    const uint32_t slots = uint32_t(SendSlots(*env_.opt));
    Clock::time_point* times = env_.write_received + size_t(c->slot) * (slots + 1);
    uint32_t& head = env_.write_ring_head[c->slot];
    received = times[head];
    head = (head + 1) % slots;
    times[slots] = received;  // the write in the pool
  }
  ++w.in_pool;
  if (!env_.writes->Submit(std::move(job))) {
    // The pool is stopping (shutdown) or full beyond the credit bound: answer here instead.
    --w.in_pool;
    const std::string& r = job.request;
    const int slots = SendSlots(*env_.opt);
    uint8_t* out =
        env_.send_base +
        (size_t(c->slot) * size_t(slots) + w.next_send % uint32_t(slots)) * kSendSlotSize;
    bool malformed = false;
    size_t n = env_.exec->Execute(c->qp(), c->qpn, c->w.granted_rkey,
                                  reinterpret_cast<const uint8_t*>(r.data()), r.size(), out,
                                  kSendSlotSize, &malformed);
    if (n > 0 && PostSend(*c, kReply, out, uint32_t(n))) {
      ++w.next_send;
      ++w.unacked;
      CountReply(out, n, received);
    }
    SubmitNextWrite(c);
  }
}

void Worker::SendReply(const std::shared_ptr<Conn>& c, const std::string& reply) {
  Conn::WorkerState& w = c->w;
  if (c->state() >= Conn::State::kClosing || w.error_state || reply.empty()) return;
  const int slots = SendSlots(*env_.opt);
  uint8_t* out = env_.send_base +
                 (size_t(c->slot) * size_t(slots) + w.next_send % uint32_t(slots)) * kSendSlotSize;
  std::memcpy(out, reply.data(), reply.size());
  if (PostSend(*c, kReply, out, uint32_t(reply.size()))) {
    ++w.next_send;
    ++w.unacked;
    if (env_.write_received != nullptr) {
      const size_t slots = size_t(SendSlots(*env_.opt));
      CountReply(out, reply.size(), env_.write_received[size_t(c->slot) * (slots + 1) + slots]);
    }
  }
}

void Worker::Tick() {
  const ServerOptions& o = *env_.opt;
  auto now = Clock::now();
  last_tick_ = now;
  const auto timeout = std::chrono::milliseconds(o.peer_timeout_ms);
  const auto interval = timeout / 3;
  const auto open_limit = 2 * std::chrono::milliseconds(o.accept_timeout_ms);
  for (auto& [qpn, c] : conns_) {
    Conn::State st = c->state();
    Conn::WorkerState& w = c->w;
    if ((st == Conn::State::kSetup || st == Conn::State::kEstablished) &&
        now - c->created > open_limit) {  // bounded: no unopened connection lingers
      if (!w.close_after_reply)
        env_.counters->open_timeouts.fetch_add(1, std::memory_order_relaxed);
      c->RequestClose(w.close_after_reply ? w.close_after_reply_reason
                                          : "not opened within 2 x --accept_timeout (" +
                                                std::to_string(2 * o.accept_timeout_ms) + " ms)");
      continue;
    }
    if (st != Conn::State::kOpen) continue;
    if (!w.seen_established) {  // setup time is not silence
      w.seen_established = true;
      w.last_heard = now;
    }
    if (now - w.last_heard > timeout) {
      env_.counters->peers_dead.fetch_add(1, std::memory_order_relaxed);
      c->RequestClose("no sign of life for " + std::to_string(Ms(now - w.last_heard)) +
                      " ms (--peer_timeout " + std::to_string(o.peer_timeout_ms / 1000.0) + " s)");
      continue;
    }
    if (!w.keepalive_in_flight && now - w.last_heard >= interval &&
        w.sends_in_flight < SendQueueDepth(o) - 2) {
      if (PostSend(*c, kKeepalive, nullptr, 0)) {
        w.keepalive_in_flight = true;
        w.keepalive_posted = now;
        env_.counters->keepalives_sent.fetch_add(1, std::memory_order_relaxed);
      }
    }
  }
  std::vector<std::shared_ptr<Conn>> closing = closing_;  // AdvanceClose edits closing_
  for (auto& c : closing) AdvanceClose(c);
}

void Worker::AdvanceClose(const std::shared_ptr<Conn>& c) {
  Conn::WorkerState& w = c->w;
  if (c->state() != Conn::State::kClosing || !w.error_state) return;
  auto now = Clock::now();
  // A receive queue of its own has no Last WQE event: ERR flushes every receive it holds, and
  // the drain waits for those completions instead (below). Every repost happens on this thread
  // while !error_state, i.e. before this worker's own MoveQpToError, so that transition flushes
  // it even when rdma_cm had already put the QP in ERR (an ERR -> ERR modify flushes again; a
  // MoveQpToError that skipped QPs already in ERR would leave such a receive to the deadline).
  const PrivateDomain* d = c->domain();
  if (!w.marker_posted && (w.last_wqe || d != nullptr || now - w.close_started >= kLastWqeGrace)) {
    w.marker_posted = true;
    // Flushed behind every earlier WR of the QP: once it completes, the CQ holds nothing more
    // of this QP. A device that refuses posts in ERR leaves only the grace period to rely on.
    if (!PostSend(*c, kMarker, nullptr, 0)) w.marker_done = true;
  }
  if (w.marker_done && w.sends_in_flight <= 0 && (d == nullptr || d->posted() <= 0))
    FinishDrain(c, false);
  else if (now - w.close_started > kDrainDeadline)
    FinishDrain(c, true);
}

void Worker::FinishDrain(const std::shared_ptr<Conn>& c, bool leak) {
  std::shared_ptr<Conn> keep = c;  // c may refer to an element of closing_
  for (size_t i = 0; i < closing_.size(); ++i) {
    if (closing_[i] == keep) {
      closing_.erase(closing_.begin() + long(i));
      break;
    }
  }
  conns_.erase(keep->qpn);
  env_.registry->Remove(*keep);
  if (leak) env_.counters->qps_leaked.fetch_add(1, std::memory_order_relaxed);
  keep->w.leak_qp = leak;  // read by the owner after OnDrained
  keep->MarkDrained();
  LOG(INFO) << "connection qp " << keep->qpn << " closed: " << keep->close_reason();
  keep->owner()->OnDrained(std::move(keep));
}

}  // namespace rkv
