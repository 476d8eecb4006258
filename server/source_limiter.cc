#include "server/source_limiter.h"

#include <algorithm>
#include <cstdio>
#include <utility>

namespace rkv {
namespace {

std::string Number(double v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%g", v);
  return buf;
}

}  // namespace

struct SourceLimiter::Lease::State {
  struct Entry {
    uint32_t connections = 0;
    double tokens = 0;
    Clock::time_point last;  // last attempt (token refill reference)
  };
  explicit State(const Limits& l) : limits(l) {}
  const Limits limits;
  mutable Mutex mu;
  std::unordered_map<std::string, Entry> sources GUARDED_BY(mu);
};

SourceLimiter::Lease::~Lease() { Release(); }

SourceLimiter::Lease::Lease(Lease&& o) noexcept
    : state_(std::move(o.state_)), source_(std::move(o.source_)) {
  o.state_.reset();
}

SourceLimiter::Lease& SourceLimiter::Lease::operator=(Lease&& o) noexcept {
  if (this != &o) {
    Release();
    state_ = std::move(o.state_);
    source_ = std::move(o.source_);
    o.state_.reset();
  }
  return *this;
}

void SourceLimiter::Lease::Release() {
  if (!state_) return;
  {
    MutexLock l(&state_->mu);
    auto it = state_->sources.find(source_);
    if (it != state_->sources.end() && it->second.connections > 0) --it->second.connections;
  }
  state_.reset();
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
  auto it = sources.find(source);
  if (it == sources.end()) {
    if (sources.size() >= std::max<size_t>(lim.max_sources, 1)) {
      // Forget the idle address whose last attempt is oldest.
      auto victim = sources.end();
      for (auto j = sources.begin(); j != sources.end(); ++j) {
        if (j->second.connections == 0 &&
            (victim == sources.end() || j->second.last < victim->second.last))
          victim = j;
      }
      if (victim == sources.end())
        return Status(Code::kBusy, "server tracks " + std::to_string(sources.size()) +
                                       " addresses that all hold connections; try again later");
      sources.erase(victim);
    }
    Lease::State::Entry e;
    e.tokens = double(lim.attempt_burst);
    e.last = now;
    it = sources.emplace(source, e).first;
  }
  Lease::State::Entry& e = it->second;
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
  if (lim.max_conns_per_source > 0 && e.connections >= lim.max_conns_per_source)
    return Status(Code::kBusy, source + " already has " + std::to_string(e.connections) +
                                   " connections (--max_conns_per_source); try again later");
  ++e.connections;
  return Status::Ok();
}

uint32_t SourceLimiter::Connections(const std::string& source) const {
  MutexLock l(&state_->mu);
  auto it = state_->sources.find(source);
  return it == state_->sources.end() ? 0 : it->second.connections;
}

size_t SourceLimiter::tracked() const {
  MutexLock l(&state_->mu);
  return state_->sources.size();
}

}  // namespace rkv
