// SPDX-License-Identifier: Apache-2.0
#include "server/cluster/ring_drainer.h"

#include <glog/logging.h>

#include <algorithm>
#include <chrono>

namespace rkv::cluster {

RingDrainer::RingDrainer(ApplyFn apply, HeadroomFn headroom)
    : apply_(std::move(apply)), headroom_(std::move(headroom)) {}

RingDrainer::~RingDrainer() { Close(); }

void RingDrainer::Close() {
  Stop();
  // Revoked, not drained: the apply function's owner may be going too (the server stops).
  std::map<uint64_t, std::unique_ptr<ReplicaRing>> rings;
  {
    std::lock_guard<std::mutex> l(mu_);
    rings.swap(rings_);
  }
  rings.clear();  // each ring's destructor revokes it
}

Status RingDrainer::Add(std::unique_ptr<ReplicaRing> ring, uint64_t* id, uint64_t* epoch,
                        const std::function<Status()>& before) {
  {
    std::lock_guard<std::mutex> l(mu_);
    if (stop_) return Status(Code::kUnavailable, "this server is stopping");
    if (in_map_ || !grants_)
      return Status(Code::kUnavailable, in_map_ ? "this backup is applying a map: no log ring now"
                                                : "this backup takes no log ring now");
    if (rings_.size() >= kMaxRings)
      return Status(Code::kBusy,
                    "this backup holds " + std::to_string(kMaxRings) + " log rings already");
    const size_t of_writer = size_t(std::count_if(rings_.begin(), rings_.end(), [&](const auto& r) {
      return r.second->writer() == ring->writer();
    }));
    if (of_writer >= kMaxRingsPerWriter)
      return Status(Code::kBusy, "server " + std::to_string(ring->writer()) + " holds " +
                                     std::to_string(kMaxRingsPerWriter) +
                                     " log rings here already");
    if (headroom_ && !headroom_(true, RingBytesLocked() + ring->size()))
      return Status(Code::kUnavailable,
                    "this backup's table is too full for a log ring (its writes go two-sided)");
    if (before) {
      Status s = before();
      if (!s.ok()) return s;
    }
    *id = next_id_++;
    ring->PublishEpoch(epoch_);
    if (epoch != nullptr) *epoch = epoch_;
    rings_.emplace(*id, std::move(ring));
    kick_ = true;
  }
  cv_.notify_all();
  return Status::Ok();
}

void RingDrainer::RevokeRing(uint64_t id) {
  std::lock_guard<std::mutex> l(mu_);
  auto it = rings_.find(id);
  if (it == rings_.end()) return;
  it->second->Revoke();
  // Bounded (this runs on a worker): at most what one ring can hold.
  DrainLocked(it->second->writer(), it->second->size() / kRingHeaderBytes);
}

void RingDrainer::RevokeWriters(const std::vector<uint32_t>& writers) {
  std::lock_guard<std::mutex> l(mu_);
  for (uint32_t w : writers) RevokeWriterLocked(w);
  for (uint32_t w : writers) DrainLocked(w);  // revoked: bounded by what was placed
}

void RingDrainer::RevokeAll() {
  std::lock_guard<std::mutex> l(mu_);
  for (auto& [id, ring] : rings_) ring->Revoke();
  DrainLocked();
}

void RingDrainer::RevokeWriterLocked(uint32_t writer) {
  for (auto& [id, ring] : rings_)
    if (ring->writer() == writer) ring->Revoke();
}

size_t RingDrainer::Drain() {
  std::lock_guard<std::mutex> l(mu_);
  return DrainLocked();
}

size_t RingDrainer::DrainWriter(uint32_t writer) {
  std::lock_guard<std::mutex> l(mu_);
  size_t max = 0;
  for (auto& [id, ring] : rings_)
    if (ring->writer() == writer) max += ring->size() / kRingHeaderBytes;
  return max == 0 ? 0 : DrainLocked(writer, max);
}

size_t RingDrainer::DrainLocked(uint32_t writer, size_t max) {
  size_t consumed = 0;
  std::vector<std::pair<uint64_t, ReplicaRing*>> heads;
  for (bool moved = true; moved && consumed < max;) {
    moved = false;
    // Every ring's complete head, smallest order first: a record its writer posted after
    // another's WRITE completed is applied after it, whichever ring holds it. After each
    // record consumed the heads are looked at again (that ring's next may come first).
    // Twice: a ring found empty by the first look may have got a record since that precedes a
    // head the first look found (its WRITE completed before that head was posted); the second
    // look sees it, since such a record was placed before the first look found the later one.
    for (int look = 0; look < 2; ++look) {
      heads.clear();
      for (auto& [id, ring] : rings_) {
        if (writer != kAnyWriter && ring->writer() != writer) continue;
        RingRecordView v;
        if (ring->Peek(&v)) {
          heads.emplace_back(v.order, ring.get());
        } else if (ring->state() == ReplicaRing::State::kOpen &&
                   (ring->malformed_head() ||
                    ring->IncompleteFor(std::chrono::steady_clock::now(),
                                        std::chrono::milliseconds(stuck_head_ms_.load())))) {
          // A complete record that is malformed, or one that stays half placed: its writer is
          // out of step, broken or gone mid-WRITE. Nothing after it in this ring can be read;
          // its writer's writes go two-sided from now on.
          refused_.fetch_add(1, std::memory_order_relaxed);
          LOG_EVERY_N(WARNING, 20)
              << "log ring of server " << ring->writer() << ": "
              << (ring->malformed_head() ? "a malformed record" : "a record left half placed")
              << "; its rings are revoked";
          RevokeWriterLocked(ring->writer());
          moved = true;  // the writer's other rings are read to their ends
        }
      }
    }
    std::sort(heads.begin(), heads.end());
    for (auto& [order, ring] : heads) {
      RingRecordView v;
      if (!ring->Peek(&v)) continue;
      const auto now = std::chrono::steady_clock::now();
      const bool last_try = ring->WaitedFor(now, std::chrono::milliseconds(stuck_head_ms_.load()));
      Outcome o = apply_(*ring, v, last_try);
      if (o == Outcome::kWait && !last_try) {
        if (!ring->waiting()) waited_.fetch_add(1, std::memory_order_relaxed);
        ring->NoteWait(now);
        continue;
      }
      if (o == Outcome::kWait) o = Outcome::kRefused;  // see ApplyFn
      ring->EndWait();  // a head kept (tried again later) waits afresh
      if (o == Outcome::kKept) {
        if (ring->state() == ReplicaRing::State::kOpen) {
          kept_.fetch_add(1, std::memory_order_relaxed);
          LOG_EVERY_N(WARNING, 20) << "log ring of server " << ring->writer() << ": record "
                                   << v.index << " has no room here; kept, its rings revoked";
          RevokeWriterLocked(ring->writer());
        }
        continue;
      }
      ring->Consume();
      ++consumed;
      moved = true;
      if (o == Outcome::kApplied) {
        applied_.fetch_add(1, std::memory_order_relaxed);
      } else {
        refused_.fetch_add(1, std::memory_order_relaxed);
        LOG_EVERY_N(WARNING, 20) << "log ring of server " << ring->writer() << ": record "
                                 << v.index << " refused; its rings are revoked";
        RevokeWriterLocked(ring->writer());
      }
      break;
    }
  }
  for (auto it = rings_.begin(); it != rings_.end();) {
    if (it->second->Drained()) {
      it = rings_.erase(it);
    } else {
      ++it;
    }
  }
  return consumed;
}

bool RingDrainer::HasRecords(uint32_t writer) {
  std::lock_guard<std::mutex> l(mu_);
  for (auto& [id, ring] : rings_) {
    RingRecordView v;
    if (ring->writer() == writer && ring->Peek(&v)) return true;
  }
  return false;
}

bool RingDrainer::Accepting(uint32_t writer) {
  std::lock_guard<std::mutex> l(mu_);
  const auto of_writer = std::count_if(rings_.begin(), rings_.end(),
                                       [&](const auto& r) { return r.second->writer() == writer; });
  return !stop_ && !in_map_ && grants_ && rings_.size() < kMaxRings &&
         size_t(of_writer) < kMaxRingsPerWriter &&
         (!headroom_ || headroom_(true, RingBytesLocked()));
}

size_t RingDrainer::RingBytesLocked() const {
  size_t bytes = 0;
  for (const auto& [id, ring] : rings_) bytes += ring->size();
  return bytes;
}

void RingDrainer::CheckHeadroomLocked() {
  if (!headroom_ || rings_.empty()) return;
  const auto now = std::chrono::steady_clock::now();
  if (now < next_headroom_) return;
  next_headroom_ = now + std::chrono::milliseconds(kHeadroomEveryMs);
  if (headroom_(false, RingBytesLocked())) return;
  bool any = false;
  for (auto& [id, ring] : rings_) {
    if (ring->state() != ReplicaRing::State::kRevoked) any = true;
    ring->Revoke();
  }
  if (any) headroom_revocations_.fetch_add(1);
}

bool RingDrainer::HasRevoked(uint32_t writer) {
  std::lock_guard<std::mutex> l(mu_);
  for (auto& [id, ring] : rings_)
    if ((writer == kAnyWriter || ring->writer() == writer) &&
        ring->state() == ReplicaRing::State::kRevoked)
      return true;
  return false;
}

void RingDrainer::BeginMap(const std::vector<uint32_t>& writers) {
  std::lock_guard<std::mutex> l(mu_);
  in_map_ = true;
  for (uint32_t w : writers) RevokeWriterLocked(w);
  for (uint32_t w : writers) DrainLocked(w);  // revoked: bounded by what was placed
}

void RingDrainer::EndMap(uint64_t epoch, bool grants) {
  std::lock_guard<std::mutex> l(mu_);
  in_map_ = false;
  grants_ = grants;
  epoch_ = epoch;
  for (auto& [id, ring] : rings_) ring->PublishEpoch(epoch);
}

size_t RingDrainer::rings() {
  std::lock_guard<std::mutex> l(mu_);
  return rings_.size();
}

void RingDrainer::Start() {
  std::lock_guard<std::mutex> l(mu_);
  if (thread_.joinable() || stop_) return;
  thread_ = std::thread([this] { Loop(); });
}

void RingDrainer::Stop() {
  {
    std::lock_guard<std::mutex> l(mu_);
    stop_ = true;
  }
  cv_.notify_all();
  if (thread_.joinable()) thread_.join();
}

void RingDrainer::Loop() {
  int sleep_us = kMinSleepUs;
  std::unique_lock<std::mutex> l(mu_);
  while (!stop_) {
    CheckHeadroomLocked();
    // A batch per lock hold: a revocation, a two-sided REPLICATE's drain or a closing link
    // waits for one batch at most, however busy the rings are.
    if (DrainLocked(kAnyWriter, kBatch) > 0) {
      sleep_us = kMinSleepUs;
      // Let a synchronous Drain or a revocation in; then look again at once.
      l.unlock();
      std::this_thread::yield();
      l.lock();
      continue;
    }
    if (rings_.empty()) {
      cv_.wait(l, [this] { return stop_ || kick_; });
    } else {
      cv_.wait_for(l, std::chrono::microseconds(sleep_us), [this] { return stop_ || kick_; });
      sleep_us = std::min(sleep_us * 2, kMaxSleepUs);
    }
    kick_ = false;
  }
}

}  // namespace rkv::cluster
