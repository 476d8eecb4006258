// SPDX-License-Identifier: Apache-2.0
#include "server/cluster/liveness_probe.h"

#include <glog/logging.h>

#include <algorithm>
#include <chrono>

#include "client/client_impl.h"

namespace rkv::cluster {

namespace {
Options ProbeOptions(std::string token) {
  Options o;
  o.auth_token = std::move(token);
  o.location_cache_entries = 0;
  o.connect_timeout_ms = LivenessProbe::kTimeoutMs;
  o.rpc_timeout_ms = LivenessProbe::kReadTimeoutMs;
  o.auto_reconnect = false;
  return o;
}
// Any short key: its bucket pair is read, whatever it holds.
constexpr std::string_view kProbeKey = "rkv-liveness-probe";
}  // namespace

LivenessProbe::LivenessProbe(std::string auth_token)
    : options_(ProbeOptions(std::move(auth_token))), thread_([this] { Loop(); }) {}

LivenessProbe::~LivenessProbe() {
  {
    std::lock_guard<std::mutex> l(mu_);
    stop_ = true;
  }
  cv_.notify_all();
  thread_.join();
}

bool LivenessProbe::NoListener(const Status& s) {
  // common/verbs/rdma.cc names the event and the reject reason; 8 is IB CM's "invalid service
  // id": the peer's CM answered, and no rdma_cm id listens on that port. A server's own refusal
  // (BUSY, or any reject it sends) carries reason 28 (consumer defined).
  return s.code() == Code::kConnectionLost &&
         s.message().find("RDMA_CM_EVENT_REJECTED (status 8)") != std::string::npos;
}

void LivenessProbe::SetTargets(const std::vector<Target>& targets) {
  std::lock_guard<std::mutex> l(mu_);
  targets_ = targets;
  dead_.erase(std::remove_if(dead_.begin(), dead_.end(),
                             [&](const std::pair<uint32_t, int64_t>& d) {
                               for (const Target& t : targets_)
                                 if (t.id == d.first && t.lease == d.second) return false;
                               return true;
                             }),
              dead_.end());
}

bool LivenessProbe::FoundDead(uint32_t id, int64_t lease) const {
  std::lock_guard<std::mutex> l(mu_);
  return std::find(dead_.begin(), dead_.end(), std::make_pair(id, lease)) != dead_.end();
}

void LivenessProbe::ProbeOnce(Probe* p) {
  if (p->dead) return;
  // A process that dies closes its rdma_cm ids: its host's kernel sends a disconnect at once,
  // and it waits in the channel (checked first: no READ needed to notice it).
  if (p->conn && !p->conn->PeerGone()) {
    std::string value;
    Status s = p->conn->Get(kProbeKey, &value);
    if (s.ok() || s.IsNotFound()) return;  // answered: alive
  }
  // No connection yet, or it failed: connect once more.
  p->conn = std::make_unique<ClientImpl>(p->t.host, p->t.port, options_);
  Status s = p->conn->Open();
  if (s.ok()) {
    const uint64_t instance = p->conn->info().instance_id;
    if (p->instance == 0 || p->instance == instance) {
      p->instance = instance;
      return;
    }
    LOG(WARNING) << "cluster: server " << p->t.id << " (" << p->t.host << ":" << p->t.port
                 << ") was replaced by another process (instance " << instance << ")";
  } else if (NoListener(s)) {
    LOG(WARNING) << "cluster: server " << p->t.id << " (" << p->t.host << ":" << p->t.port
                 << ") is gone: " << s.message();
  } else {
    p->conn.reset();  // proves nothing (timeout, unreachable, busy): the lease decides
    return;
  }
  p->conn.reset();
  p->dead = true;
  found_dead_.fetch_add(1);
  std::lock_guard<std::mutex> l(mu_);
  dead_.emplace_back(p->t.id, p->t.lease);
}

void LivenessProbe::Loop() {
  std::vector<Probe> probes;
  std::unique_lock<std::mutex> l(mu_);
  while (!stop_) {
    // Follow the targets: keep the probes of those still named (same id and lease).
    std::vector<Probe> next;
    for (const Target& t : targets_) {
      auto it = std::find_if(probes.begin(), probes.end(), [&](const Probe& p) {
        return p.t.id == t.id && p.t.lease == t.lease;
      });
      if (it != probes.end()) {
        it->t = t;
        next.push_back(std::move(*it));
      } else {
        next.push_back(Probe{t, nullptr, 0, false});
      }
    }
    probes.swap(next);
    l.unlock();
    next.clear();  // dropped probes' connections torn down without the lock
    for (Probe& p : probes) {
      ProbeOnce(&p);
      std::lock_guard<std::mutex> g(mu_);
      if (stop_) break;
    }
    l.lock();
    cv_.wait_for(l, std::chrono::milliseconds(kProbeMs), [this] { return stop_; });
  }
}

}  // namespace rkv::cluster
