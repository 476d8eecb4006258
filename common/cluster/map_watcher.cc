// SPDX-License-Identifier: Apache-2.0
#include "common/cluster/map_watcher.h"

#include <glog/logging.h>

#include <chrono>
#include <vector>

#include "common/cluster/map_lease.h"

namespace rkv::cluster {

namespace {
// One watch call (a new stream, so a stream that died silently, e.g. its etcd member cut off,
// is replaced within this); the destructor does not wait for it (the call is interrupted).
constexpr int kWatchMs = 1000;
constexpr int kRetryMs = 200;                    // pause after an etcd error
constexpr int64_t kWantedStepNs = 50 * 1000000;  // Confirmed() stores its time at most this often
}  // namespace

Status MapWatcher::Start(EtcdClient* etcd, const ClusterAddress& cluster, OnMap on_map,
                         std::unique_ptr<MapWatcher>* out, bool watch, bool keep_confirmed) {
  std::unique_ptr<MapWatcher> w(new MapWatcher(etcd, cluster.Prefix() + "map", std::move(on_map)));
  w->keep_confirmed_ = watch && keep_confirmed;
  bool found = false;
  EtcdKv kv;
  int64_t revision = 0;
  const int64_t asked = NowNs();
  w->reads_.fetch_add(1, std::memory_order_relaxed);
  Status s = etcd->Get(w->key_, &found, &kv, &revision);
  if (!s.ok()) return Status(s.code(), "reading cluster '" + cluster.name + "': " + s.message());
  if (!found)
    return Status(Code::kNotFound, "cluster '" + cluster.name + "' does not exist in etcd (no " +
                                       w->key_ + "; create it with kvctl cluster init)");
  SlotMap first;
  s = SlotMap::Decode(kv.value, &first);
  if (!s.ok())
    return Status(Code::kProtocolError,
                  "cluster '" + cluster.name + "': its slot map does not decode: " + s.message());
  if (!w->Offer(kv.value, kv.mod_revision))
    return Status(Code::kProtocolError, "cluster '" + cluster.name + "': its slot map was refused");
  w->confirmed_ns_.store(asked);
  if (watch) w->thread_ = std::thread([p = w.get()] { p->Loop(); });
  if (w->keep_confirmed_) w->confirmer_ = std::thread([p = w.get()] { p->ConfirmLoop(); });
  *out = std::move(w);
  return Status::Ok();
}

MapWatcher::~MapWatcher() {
  {
    std::lock_guard<std::mutex> l(stop_mu_);
    stop_ = true;
  }
  stop_cv_.notify_all();
  if (thread_.joinable()) thread_.join();
  if (confirmer_.joinable()) confirmer_.join();
}

std::shared_ptr<const SlotMap> MapWatcher::current() const {
  MutexLock l(&mu_);
  return map_;
}

bool MapWatcher::Offer(const std::string& value, int64_t mod_revision) {
  auto next = std::make_shared<SlotMap>();
  Status s = SlotMap::Decode(value, next.get());
  std::lock_guard<std::mutex> apply(apply_mu_);
  {
    MutexLock l(&mu_);
    // Seen already: current, unless the newest value seen was refused (ours is then not the
    // map etcd holds: not confirmed).
    if (mod_revision != 0 && mod_revision <= revision_) return !last_refused_;
    std::string why;
    if (!s.ok()) {
      why = s.message();
    } else if (map_ &&
               (next->num_slots() != map_->num_slots() || next->slot_seed() != map_->slot_seed())) {
      why = "its slot count or seed differs from the map this process started with (" +
            std::to_string(map_->num_slots()) + " slots)";
    } else if (map_ && next->epoch() <= map_->epoch()) {
      why = "its epoch " + std::to_string(next->epoch()) + " is not above the current " +
            std::to_string(map_->epoch());
    } else if (next->epoch() > (uint64_t{1} << 48) - 1) {
      why = "its epoch exceeds 2^48-1";
    }
    if (!why.empty()) {
      bad_maps_.fetch_add(1);
      LOG(ERROR) << "cluster map at " << key_ << " (revision " << mod_revision
                 << ") refused, keeping epoch " << (map_ ? map_->epoch() : 0) << ": " << why;
      revision_ = std::max(revision_, mod_revision);
      last_refused_ = true;
      return false;
    }
    last_refused_ = false;
    map_ = next;
    revision_ = mod_revision;
    epoch_.store(next->epoch(), std::memory_order_release);
  }
  if (on_map_) on_map_(*next);
  return true;
}

int64_t MapWatcher::NowNs() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

bool MapWatcher::Confirmed() const {
  const int64_t now = NowNs();
  if (keep_confirmed_) {
    const int64_t was = wanted_ns_.load(std::memory_order_relaxed);
    if (now - was >= kWantedStepNs) {
      wanted_ns_.store(now, std::memory_order_relaxed);
      // The confirming thread may be idle: wake it (no lost wake-up: it looks at wanted_ns_
      // under this lock before it sleeps).
      if (now - was >= int64_t(kKeepConfirmedMs) * 1000000) {
        std::lock_guard<std::mutex> l(stop_mu_);
        stop_cv_.notify_all();
      }
    }
  }
  return now - confirmed_ns_.load(std::memory_order_acquire) < int64_t(kMapLeaseMs) * 1000000;
}

Status MapWatcher::Refresh() {
  bool found = false;
  EtcdKv kv;
  int64_t revision = 0;
  const int64_t asked = NowNs();  // etcd's read is linearizable: it happened after this
  reads_.fetch_add(1, std::memory_order_relaxed);
  Status s = etcd_->Get(key_, &found, &kv, &revision);
  if (!s.ok()) return s;
  if (!found) {
    bad_maps_.fetch_add(1);
    return Status(Code::kUnavailable, "the cluster's slot map is gone from etcd (" + key_ + ")");
  }
  // Confirmed only when what etcd holds is the current map (adopted, or seen already).
  if (Offer(kv.value, kv.mod_revision)) {
    int64_t prev = confirmed_ns_.load();
    while (prev < asked && !confirmed_ns_.compare_exchange_weak(prev, asked)) {
    }
  }
  return Status::Ok();
}

bool MapWatcher::Stopping() {
  std::lock_guard<std::mutex> l(stop_mu_);
  return stop_;
}

void MapWatcher::Pause(int ms, bool until_wanted) {
  std::unique_lock<std::mutex> l(stop_mu_);
  stop_cv_.wait_for(l, std::chrono::milliseconds(ms),
                    [&] { return stop_ || (until_wanted && Wanted(NowNs())); });
}

void MapWatcher::ConfirmLoop() {
  const int64_t every = int64_t(kMapLeaseMs) * 1000000 / 3;
  while (!Stopping()) {
    const int64_t now = NowNs();
    std::shared_ptr<const SlotMap> m = current();
    if (!Wanted(now) || !m || m->replicas() <= 1) {
      Pause(kWatchMs, true);  // idle: no etcd read until a GET asks (or the map gains replicas)
      continue;
    }
    const int64_t due = confirmed_ns_.load() + every;
    if (now < due) {
      Pause(int((due - now) / 1000000) + 1);
      continue;
    }
    if (!Refresh().ok()) Pause(kRetryMs / 4);
  }
}

void MapWatcher::Loop() {
  const int watch_ms = kWatchMs;
  while (!Stopping()) {
    int64_t from;
    {
      MutexLock l(&mu_);
      from = revision_ + 1;
    }
    watches_.fetch_add(1, std::memory_order_relaxed);
    Status s = etcd_->Watch(
        key_, false, from, watch_ms,
        [&](const std::vector<EtcdEvent>& events, int64_t) {
          for (const EtcdEvent& e : events) {
            if (e.deleted) {
              bad_maps_.fetch_add(1);
              LOG(ERROR) << "cluster map " << key_ << " deleted; keeping the last map";
              MutexLock l(&mu_);
              revision_ = std::max(revision_, e.kv.mod_revision);
            } else {
              Offer(e.kv.value, e.kv.mod_revision);
            }
          }
          return Stopping();
        },
        [this] { return Stopping(); });
    if (s.ok() || s.code() == Code::kTimeout) continue;
    // Compacted past `from`, or etcd unreachable: read the map again, then watch from there.
    LOG_EVERY_N(WARNING, 20) << "watching " << key_ << ": " << s.ToString();
    Pause(kRetryMs);
    if (!Stopping()) (void)Refresh();
  }
}

}  // namespace rkv::cluster
