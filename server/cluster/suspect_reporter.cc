// SPDX-License-Identifier: Apache-2.0
#include "server/cluster/suspect_reporter.h"

#include <glog/logging.h>

#include <algorithm>
#include <vector>

#include "client/client_impl.h"
#include "common/cluster/suspect_record.h"

namespace rkv::cluster {

namespace {
using SteadyClock = std::chrono::steady_clock;
constexpr int kPassMs = 200;
// A streak with no failure for this long ended without a reply (the replicator stopped asking:
// the backup left the map): forgotten.
constexpr int kStaleMs = 10 * SuspectReporter::kGapMs;
}  // namespace

SuspectReporter::SuspectReporter(SuspectReporterOptions o) : o_(std::move(o)) {
  thread_ = std::thread([this] { Loop(); });
}

SuspectReporter::~SuspectReporter() {
  {
    std::lock_guard<std::mutex> l(mu_);
    stop_ = true;
  }
  cv_.notify_all();
  thread_.join();
}

std::string SuspectReporter::Key(uint32_t backup, uint32_t me) const {
  SuspectRecord r;
  r.reporter = me;
  r.backup = backup;
  return o_.cluster.Prefix() + r.KeySuffix();
}

void SuspectReporter::Failed(uint32_t id, const std::string& host, uint16_t port,
                             SteadyClock::time_point started) {
  const auto now = SteadyClock::now();
  bool report = false;
  {
    std::lock_guard<std::mutex> l(mu_);
    auto it = entries_.find(id);
    if (it == entries_.end()) {
      if (entries_.size() >= kMaxTracked) return;
      Entry fresh;
      fresh.since = started;
      fresh.last = now;
      it = entries_.emplace(id, std::move(fresh)).first;
      tracked_.store(entries_.size());
    }
    Entry& e = it->second;
    if (e.state != State::kFailing) return;
    if (started - e.last > std::chrono::milliseconds(kGapMs)) {
      e.since = started;
      e.failures = 0;
    }
    ++e.failures;
    e.last = now;
    e.host = host;
    e.port = port;
    if (o_.suspect_after_ms > 0 && e.failures >= 2 &&
        now - e.since >= std::chrono::milliseconds(o_.suspect_after_ms)) {
      e.state = State::kReport;
      wake_ = true;
      report = true;
    }
  }
  if (report) cv_.notify_all();
}

void SuspectReporter::Diverged(uint32_t id, const std::string& host, uint16_t port) {
  {
    std::lock_guard<std::mutex> l(mu_);
    auto it = entries_.find(id);
    if (it == entries_.end()) {
      if (entries_.size() >= kMaxTracked) return;
      it = entries_.emplace(id, Entry{}).first;
      tracked_.store(entries_.size());
    }
    Entry& e = it->second;
    e.host = host;
    e.port = port;
    e.hold_until = SteadyClock::now() + std::chrono::milliseconds(kHoldMs);
    e.next_check = std::max(e.next_check, e.hold_until);  // no healing connect before either
    if (e.state == State::kFailing || e.state == State::kHealed) e.state = State::kReport;
    wake_ = true;
  }
  cv_.notify_all();
}

void SuspectReporter::Reached(uint32_t id) {
  if (tracked_.load(std::memory_order_relaxed) == 0) return;  // nothing to end (the usual case)
  std::lock_guard<std::mutex> l(mu_);
  auto it = entries_.find(id);
  if (it == entries_.end()) return;
  if (SteadyClock::now() < it->second.hold_until) return;  // Diverged: answers prove nothing
  if (it->second.state == State::kFailing) {
    entries_.erase(it);
    tracked_.store(entries_.size());
  } else {
    it->second.state = State::kHealed;  // the thread deletes the record (if it was put)
  }
}

uint64_t SuspectReporter::suspected() const {
  std::lock_guard<std::mutex> l(mu_);
  uint64_t n = 0;
  for (const auto& [id, e] : entries_) n += e.state == State::kReported;
  return n;
}

void SuspectReporter::Loop() {
  for (;;) {
    {
      std::unique_lock<std::mutex> l(mu_);
      cv_.wait_for(l, std::chrono::milliseconds(kPassMs), [this] { return stop_ || wake_; });
      if (stop_) return;
      wake_ = false;  // a put that fails waits for the next pass
    }
    Pass();
  }
}

void SuspectReporter::Pass() {
  const uint32_t me = o_.my_id();
  const int64_t lease = o_.lease();
  if (me == 0) return;
  enum class Do { kPut, kCheck, kDelete };
  struct Work {
    uint32_t id;
    Do what;
    std::string host;
    uint16_t port;
  };
  std::vector<Work> work;
  const auto now = SteadyClock::now();
  {
    std::lock_guard<std::mutex> l(mu_);
    for (auto it = entries_.begin(); it != entries_.end();) {
      Entry& e = it->second;
      if (e.state == State::kFailing && now - e.last > std::chrono::milliseconds(kStaleMs)) {
        it = entries_.erase(it);
        tracked_.store(entries_.size());
        continue;
      }
      if (e.state == State::kReport || (e.state == State::kReported && e.lease != lease))
        work.push_back({it->first, Do::kPut, e.host, e.port});
      else if (e.state == State::kReported && now >= e.next_check && now >= e.hold_until)
        work.push_back({it->first, Do::kCheck, e.host, e.port});
      else if (e.state == State::kHealed)
        work.push_back({it->first, Do::kDelete, e.host, e.port});
      ++it;
    }
  }
  for (const Work& w : work) {
    {
      std::lock_guard<std::mutex> l(mu_);
      if (stop_) return;
    }
    const std::string key = Key(w.id, me);
    if (w.what == Do::kPut) {
      if (lease == 0) continue;  // registered again soon: put then
      SuspectRecord r;
      r.reporter = me;
      r.backup = w.id;
      r.map_epoch = o_.map_epoch();
      std::string value;
      if (!r.Encode(&value).ok()) continue;
      Status s = o_.etcd->Put(key, value, lease);
      if (!s.ok()) {
        LOG_EVERY_N(WARNING, 20) << "cluster: reporting server " << w.id
                                 << " unreachable: etcd put " << key << ": " << s.ToString();
        continue;
      }
      std::lock_guard<std::mutex> l(mu_);
      auto it = entries_.find(w.id);
      if (it == entries_.end()) continue;  // cannot happen: only this thread erases reported ones
      if (it->second.state == State::kReport) {
        reported_.fetch_add(1);
        LOG(WARNING) << "cluster: server " << w.id << " (" << w.host << ":" << w.port
                     << ") has not been reachable from this primary for " << o_.suspect_after_ms
                     << " ms although registered (a partial partition?): "
                     << "reported at " << key << "; the coordinator drops it from our slots";
        it->second.state = State::kReported;
      }
      if (it->second.lease == 0) {  // the first put: the report lives kHoldMs at least
        it->second.check_ms = o_.heal_check_ms;
        it->second.next_check =
            now + std::chrono::milliseconds(std::max(o_.heal_check_ms, kHoldMs));
      }
      it->second.lease = lease;  // kHealed stays: deleted next pass
      continue;
    }
    if (w.what == Do::kCheck) {
      Options co = o_.client;
      co.connect_timeout_ms = 1000;
      co.rpc_timeout_ms = 1000;  // the OPEN handshake
      co.location_cache_entries = 0;
      ClientImpl probe(w.host, w.port, co);
      const Status s = probe.Open();
      std::lock_guard<std::mutex> l(mu_);
      auto it = entries_.find(w.id);
      if (it == entries_.end() || it->second.state != State::kReported) continue;
      if (s.ok()) {
        it->second.state = State::kHealed;
      } else {  // unreachable still (or gone: a dead server's report is harmless, checked rarely)
        Entry& e = it->second;
        e.next_check = SteadyClock::now() + std::chrono::milliseconds(e.check_ms);
        e.check_ms = std::min(std::max(e.check_ms, 1) * 2, std::max(kMaxCheckMs, o_.heal_check_ms));
        continue;
      }
    }
    // kDelete, or a check that connected: the record goes (deleting a record never put, or
    // gone with an old lease, is harmless).
    Status s = o_.etcd->Delete(key);
    if (!s.ok()) {
      LOG_EVERY_N(WARNING, 20) << "cluster: etcd delete " << key << ": " << s.ToString();
      continue;
    }
    std::lock_guard<std::mutex> l(mu_);
    auto it = entries_.find(w.id);
    if (it != entries_.end() && it->second.state == State::kHealed) {
      const bool was_put = it->second.lease != 0;  // else an answer came before the put
      entries_.erase(it);
      tracked_.store(entries_.size());
      if (was_put) {
        healed_.fetch_add(1);
        LOG(INFO) << "cluster: server " << w.id << " (" << w.host << ":" << w.port
                  << ") is reachable again: " << key << " deleted";
      }
    }
  }
}

}  // namespace rkv::cluster
