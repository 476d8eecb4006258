// SPDX-License-Identifier: Apache-2.0
// Worker: ticks (keepalives, silence, open deadlines) and the close and drain of connections.
#include <glog/logging.h>

#include <algorithm>
#include <chrono>
#include <cstring>

#include "server/conn/worker.h"
#include "server/conn/worker_internal.h"

namespace rkv {

using namespace worker_internal;  // NOLINT(build/namespaces): this class's own helpers

void Worker::Tick() {
  if (fast_) fast_->Tick();  // links made, idle ones closed
  const ServerOptions& o = *env_.opt;
  auto now = Clock::now();
  // This thread may itself have been held (a write it logged inline met a stalled disk, or the
  // machine did not run it): its connections were not heard because it was not listening.
  // Forgive them the gap beyond two tick periods (a first tick has no gap to forgive).
  const auto gap = now - last_tick_;
  if (last_tick_ != Clock::time_point{} && gap > 2 * kTickPeriod) {
    const auto forgive = gap - kTickPeriod;
    for (auto& [qpn, c] : conns_) c->w.last_heard = std::min(now, c->w.last_heard + forgive);
    // Drains too: their deadline is for the device, not for this thread's absence.
    for (auto& c : closing_) c->w.close_started = std::min(now, c->w.close_started + forgive);
    env_.counters->worker_stalls.fetch_add(1, std::memory_order_relaxed);
  }
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
        w.sends.in_flight() < SendQueueDepth(o) - 2) {
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
  if (w.marker_done && w.sends.in_flight() <= 0 && (d == nullptr || d->posted() <= 0))
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
  // Its log ring: the QP places nothing more (drained); what it placed is applied, then the
  // ring's registration goes, before the owner destroys the connection's PD.
  if (keep->w.ring_id != 0 && env_.rings != nullptr) env_.rings->RevokeRing(keep->w.ring_id);
  keep->w.ring_id = 0;
  if (leak) env_.counters->qps_leaked.fetch_add(1, std::memory_order_relaxed);
  keep->w.leak_qp = leak;  // read by the owner after OnDrained
  keep->MarkDrained();
  LOG(INFO) << "connection qp " << keep->qpn << " closed: " << keep->close_reason();
  keep->owner()->OnDrained(std::move(keep));
}

}  // namespace rkv
