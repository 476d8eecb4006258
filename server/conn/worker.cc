// SPDX-License-Identifier: Apache-2.0
// Worker: the loop (poll or spin), commands, completions and sends (server/conn/worker.h).
#include "server/conn/worker.h"

#include <glog/logging.h>
#include <poll.h>

#include <chrono>
#include <cstring>

#include "common/wire.h"
#include "server/conn/worker_internal.h"

namespace rkv {

using namespace worker_internal;  // NOLINT(build/namespaces): this class's own helpers

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
  if (env_.replica_links != nullptr)
    fast_ = std::make_unique<ReplicaFastPath>(
        env_.exec, *env_.replica_links, env_.owner_slots, kSendSlotSize, env_.log,
        [this](std::shared_ptr<Conn> c, std::string reply) {
          Reply(std::move(c), std::move(reply));
        },
        env_.opt->replication_rings);
  return Status::Ok();
}

void Worker::Start() {
  thread_ = std::thread([this] { Loop(); });
}

void Worker::Join() {
  if (thread_.joinable()) thread_.join();
  fast_.reset();  // fails writes not ended, joins its threads (a late reply is queued, unread)
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
    pfds_.clear();
    pfds_.push_back({channel_->fd, POLLIN, 0});
    pfds_.push_back({queue_.fd(), POLLIN, 0});
    if (!spinning) {
      // Replicated writes in flight: their links' completion channels wake this loop too.
      if (fast_ && fast_->in_flight() > 0) fast_->AppendFds(&pfds_);
      r = poll(pfds_.data(), nfds_t(pfds_.size()), busy ? 0 : int(kTickPeriod.count()));
      if (r > 0 && pfds_.size() > 2) fast_->Rearm(pfds_, 2);
      if (r < 0 && errno != EINTR) {
        PLOG_EVERY_N(ERROR, 100) << "poll(worker " << index_ << ")";
        continue;
      }
      if (!busy) env_.counters->worker_sleeps.fetch_add(1, std::memory_order_relaxed);
    }
    if (!spinning || queue_.MaybeNonEmpty()) DrainCommands();
    const pollfd* pfd = pfds_.data();
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
      FlushReposts();
    }
    if (n < 0) {
      LOG_EVERY_N(ERROR, 100) << "ibv_poll_cq(worker " << index_ << ") failed";
    }
    if (fast_ && fast_->in_flight() > 0) FinishFast();
    busy = n == 32;  // more may be waiting: come back without sleeping
    const Clock::time_point now = Clock::now();
    if (handled > 0) last_work = now;
    if (now - last_tick_ >= kTickPeriod) Tick();
  }
}

void Worker::FinishFast() {
  fast_done_.clear();
  fast_->Poll(&fast_done_);
  for (ReplicaFastPath::Done& d : fast_done_) {
    --d.conn->w.in_pool;
    SendReply(d.conn, d.reply);
    SubmitNextWrite(d.conn);
  }
  fast_done_.clear();
}

void Worker::DrainCommands() {
  for (Command& command : queue_.TakeAll()) {
    const Cmd cmd = command.cmd;
    const std::shared_ptr<Conn>& c = command.conn;
    if (!c->w.adopted) {  // a Close may arrive before the Adopt it raced with
      c->w.adopted = true;
      c->w.last_heard = Clock::now();
      c->w.sends.Init(SendQueueDepth(*env_.opt), SignalEvery(*env_.opt));
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
    QueueRepost(nullptr, buf);
    return;
  }
  std::shared_ptr<Conn> c = Find(wc.qp_num);
  if (!c || (c->serial & ((uint64_t{1} << 44) - 1)) != SerialOf(wc.wr_id)) {
    VLOG(1) << "stale send completion for qp " << wc.qp_num;
    return;
  }
  Conn::WorkerState& w = c->w;
  const uint64_t kind = KindOf(wc.wr_id);
  // This completion and every unsignalled send posted before it (server/conn/send_tracker.h).
  const SendTracker::Retired r = w.sends.Completed(SeqOf(wc.wr_id));
  if (!r.consistent) {
    LOG_EVERY_N(ERROR, 100) << "qp " << c->qpn << ": a send completion with no send posted for it";
  }
  env_.counters->send_completions.fetch_add(1, std::memory_order_relaxed);
  w.unacked -= r.replies;
  if (r.replies > 0 && w.close_after_reply && w.unacked <= 0 && c->state() < Conn::State::kClosing)
    c->RequestClose(w.close_after_reply_reason);  // the UNAUTHENTICATED answer went out
  if (r.keepalive) w.keepalive_in_flight = false;
  if (r.marker) w.marker_done = true;
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
  QueueRepost(c, buf);
}

void Worker::QueueRepost(const std::shared_ptr<Conn>& c, uint32_t buf) {
  if (env_.srq != nullptr) {
    if (reposts_ == kRepostBatch) FlushReposts();  // not reached: one CQ batch holds 32
    repost_buf_[reposts_++] = buf;
    return;
  }
  // Registration mode: the connection's own receive queue holds only a few more buffers than
  // its credits, and its reply is already posted, so its buffer goes back at once (a client
  // turning replies around within the batch would otherwise meet RNR). The request's bytes are
  // used (executed, or copied for the write pool); not on a QP that is going (a receive posted
  // in ERR would only be flushed), nor to a refused connection (whatever it sends meanwhile
  // meets RNR).
  if (c->state() < Conn::State::kClosing && !c->w.error_state && !c->w.close_after_reply) {
    Status s = c->domain()->Repost(c->qp(), buf);
    if (!s.ok() && c->state() < Conn::State::kClosing) c->RequestClose(s.message());
  } else if (c->state() == Conn::State::kClosing && c->w.error_state) {
    AdvanceClose(c);  // the last flushed receive may be what the drain waits for
  }
}

void Worker::FlushReposts() {
  // Window mode: the SRQ's buffers of one CQ batch, posted as one chain.
  if (reposts_ == 0) return;
  env_.srq->ReturnMany(repost_buf_, reposts_);
  reposts_ = 0;
}

bool Worker::PostSend(Conn& c, SendKind kind, const void* data, uint32_t len) {
  const uint32_t lkey = c.domain() != nullptr ? c.domain()->send_lkey() : env_.send_lkey;
  ibv_sge sge{reinterpret_cast<uint64_t>(data), len, lkey};
  Conn::WorkerState& w = c.w;
  if (!w.sends.HasRoom()) {  // broken invariant: SendQueueDepth covers every send it may hold
    if (c.state() < Conn::State::kClosing) c.RequestClose("internal: send queue full");
    return false;
  }
  // A refusal's reply is signalled: the connection closes once it has gone out.
  const bool signalled = w.sends.WantSignal(kind, kind == kReply && w.close_after_reply);
  ibv_send_wr wr{}, *bad = nullptr;
  wr.wr_id = SendId(c.serial, w.sends.next_seq(), kind);
  wr.sg_list = len > 0 ? &sge : nullptr;
  wr.num_sge = len > 0 ? 1 : 0;
  wr.send_flags = signalled ? IBV_SEND_SIGNALED : 0;
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
  w.sends.Posted(kind, signalled);
  return true;
}

uint8_t* Worker::NextReplyBuffer(const Conn& c) const {
  const uint32_t slots = uint32_t(ReplySlots(*env_.opt));
  return env_.send_base + (size_t(c.slot) * slots + c.w.next_send % slots) * kSendSlotSize;
}

bool Worker::PostReplyBuffer(Conn& c, const uint8_t* out, size_t n,
                             const Clock::time_point* received) {
  if (!PostSend(c, kReply, out, uint32_t(n))) return false;
  ++c.w.next_send;
  ++c.w.unacked;
  if (received != nullptr) CountReply(out, n, *received);
  return true;
}

}  // namespace rkv
