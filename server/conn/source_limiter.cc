// SPDX-License-Identifier: Apache-2.0
#include "server/conn/source_limiter.h"

#include <algorithm>
#include <cstdio>
#include <list>
#include <utility>

#include "common/wire.h"

namespace rkv {
namespace {

std::string Number(double v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%g", v);
  return buf;
}

}  // namespace

struct SourceLimiter::Lease::State {
  // Keys of idle entries (no live connection), least recently used first; a key points at the
  // key of its node in `sources` (stable until that node is erased).
  using IdleList = std::list<const std::string*>;
  struct Entry {
    uint32_t connections = 0;
    uint32_t pending = 0;  // of the connections, those not yet opened
    uint32_t closing = 0;  // of the connections, those being torn down
    double tokens = 0;
    Clock::time_point last;  // last attempt (token refill reference)
    bool idle = false;       // in `idle` (connections == 0)
    IdleList::iterator idle_pos;
  };
  using Map = std::unordered_map<std::string, Entry>;
  explicit State(const Limits& l) : limits(l) {}
  // O(1) bookkeeping of the idle list (mu held).
  void MarkIdle(Map::iterator it) REQUIRES(mu) {  // also: used again, goes to the back
    Entry& e = it->second;
    if (e.idle) {
      idle.splice(idle.end(), idle, e.idle_pos);
    } else {
      e.idle_pos = idle.insert(idle.end(), &it->first);
      e.idle = true;
    }
  }
  void MarkBusy(Entry* e) REQUIRES(mu) {
    if (!e->idle) return;
    idle.erase(e->idle_pos);
    e->idle = false;
  }
  const Limits limits;
  mutable Mutex mu;
  Map sources GUARDED_BY(mu);
  IdleList idle GUARDED_BY(mu);
};

SourceLimiter::Lease::~Lease() { Release(); }

SourceLimiter::Lease::Lease(Lease&& o) noexcept
    : state_(std::move(o.state_)),
      source_(std::move(o.source_)),
      pending_(o.pending_),
      closing_(o.closing_) {
  o.state_.reset();
  o.pending_ = false;
  o.closing_ = false;
}

SourceLimiter::Lease& SourceLimiter::Lease::operator=(Lease&& o) noexcept {
  if (this != &o) {
    Release();
    state_ = std::move(o.state_);
    source_ = std::move(o.source_);
    pending_ = o.pending_;
    closing_ = o.closing_;
    o.state_.reset();
    o.pending_ = false;
    o.closing_ = false;
  }
  return *this;
}

void SourceLimiter::Lease::Opened() {
  if (!state_ || !pending_) return;
  pending_ = false;
  MutexLock l(&state_->mu);
  auto it = state_->sources.find(source_);
  if (it != state_->sources.end() && it->second.pending > 0) --it->second.pending;
}

void SourceLimiter::Lease::Closing() {
  if (!state_ || closing_) return;
  closing_ = true;
  MutexLock l(&state_->mu);
  auto it = state_->sources.find(source_);
  if (it != state_->sources.end()) ++it->second.closing;
}

void SourceLimiter::Lease::Release() {
  if (!state_) return;
  {
    MutexLock l(&state_->mu);
    auto it = state_->sources.find(source_);
    if (it != state_->sources.end()) {
      if (pending_ && it->second.pending > 0) --it->second.pending;
      if (closing_ && it->second.closing > 0) --it->second.closing;
      if (it->second.connections > 0 && --it->second.connections == 0) state_->MarkIdle(it);
    }
  }
  state_.reset();
  pending_ = false;
  closing_ = false;
}

SourceLimiter::SourceLimiter(const Limits& limits)
    : state_(std::make_shared<Lease::State>(limits)) {}

Status SourceLimiter::Admit(const std::string& source, Clock::time_point now, Lease* lease) {
  Status s = Count(source, now);
  // Outside the lock: a share *lease held before is released by this assignment, and its
  // Release takes the same mutex.
  if (s.ok()) *lease = Lease(state_, source);
  return s;
}

Status SourceLimiter::Count(const std::string& source, Clock::time_point now) {
  const Limits& lim = state_->limits;
  MutexLock l(&state_->mu);
  auto& sources = state_->sources;
  auto& idle = state_->idle;
  auto it = sources.find(source);
  if (it == sources.end()) {
    if (sources.size() >= std::max<size_t>(lim.max_sources, 1)) {
      // Forget the idle address used least recently (O(1): the front of the idle list).
      if (idle.empty())
        return Status(Code::kBusy, "server tracks " + std::to_string(sources.size()) +
                                       " addresses that all hold connections; try again later");
      auto victim = sources.find(*idle.front());
      idle.pop_front();
      sources.erase(victim);
    }
    Lease::State::Entry e;
    e.tokens = double(lim.attempt_burst);
    e.last = now;
    it = sources.emplace(source, e).first;
  }
  Lease::State::Entry& e = it->second;
  if (e.connections == 0) state_->MarkIdle(it);  // used now: the back of the idle list
  if (lim.attempts_per_s > 0) {
    const double elapsed = std::chrono::duration<double>(now - e.last).count();
    if (elapsed > 0)
      e.tokens = std::min(double(lim.attempt_burst), e.tokens + elapsed * lim.attempts_per_s);
    e.last = std::max(e.last, now);
    if (e.tokens < 1)
      return Status(Code::kBusy, "too many connection attempts from " + source + " (more than " +
                                     Number(lim.attempts_per_s) +
                                     "/s, --max_connects_per_source_per_s); try again later");
    e.tokens -= 1;
  } else {
    e.last = std::max(e.last, now);
  }
  if (lim.max_conns_per_source > 0 && e.connections >= lim.max_conns_per_source) {
    // Connections being torn down still count (they hold a QP and a slot) but leave within
    // the drain deadline: say so, so the client can tell a passing refusal from a lasting one.
    // Short: an rdma_cm refusal carries at most 140 bytes (common/wire.h).
    std::string closing =
        e.closing == 0 ? "; try again later"
                       : ", " + std::to_string(e.closing) + wire::kBusyStillClosing + "; try again";
    return Status(Code::kBusy, source + " already has " + std::to_string(e.connections) +
                                   " connections (--max_conns_per_source)" + closing);
  }
  if (lim.max_pending_per_source > 0 && e.pending >= lim.max_pending_per_source)
    return Status(Code::kBusy, source + " already has " + std::to_string(e.pending) +
                                   " connections in setup or not yet opened "
                                   "(--max_pending_per_source); try again");
  ++e.connections;
  ++e.pending;
  state_->MarkBusy(&e);
  return Status::Ok();
}

template <typename Field>
uint32_t SourceLimiter::Read(const std::string& source, Field field) const {
  MutexLock l(&state_->mu);
  auto it = state_->sources.find(source);
  return it == state_->sources.end() ? 0 : it->second.*field;
}

uint32_t SourceLimiter::Connections(const std::string& source) const {
  return Read(source, &Lease::State::Entry::connections);
}

uint32_t SourceLimiter::Pending(const std::string& source) const {
  return Read(source, &Lease::State::Entry::pending);
}

uint32_t SourceLimiter::Closing(const std::string& source) const {
  return Read(source, &Lease::State::Entry::closing);
}

size_t SourceLimiter::tracked() const {
  MutexLock l(&state_->mu);
  return state_->sources.size();
}

}  // namespace rkv
