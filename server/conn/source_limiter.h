// SPDX-License-Identifier: Apache-2.0
// SourceLimiter: per-source-address limits on connections (issue 12, "Limits"): at most
// `max_conns_per_source` live connections from one address, of which at most
// `max_pending_per_source` not yet opened (in setup, or connected without a successful OPEN),
// and connection attempts from one address at most `attempts_per_s` on average with bursts up
// to `attempt_burst` (a token bucket), so one host cannot take every connection slot, every
// setup slot (--max_pending) or keep the acceptors busy. Applies to rdma_cm connects and to
// manual-mode exchanges alike (the source is the peer's IP address, without the port).
//
// Admit() is called for every attempt; it spends a token and, if the source is under both of
// its caps, returns a Lease that counts as one of its connections until the Lease is
// destroyed (when the connection is torn down; also when the attempt fails later in setup),
// and as one of its unopened connections until Lease::Opened() (or its destruction). A
// connection that is being torn down (Lease::Closing(): its QP drains, 300 ms on rxe) still
// counts, since it still holds a QP and a slot, but a refusal then says how many of the
// source's connections are still closing, so a client that
// reconnects in a loop knows its refusal will pass within a moment (rkv::Client retries it).
// The refusal then reads "<source> already has <n> connections (--max_conns_per_source), <k>
// still closing; try again" (wire::kBusyStillClosing): at most 132 bytes (a 45-character
// address), so with rdma_reject's "BUSY: " prefix and NUL it fits its 140.
// Bounds: at most `max_sources` addresses are tracked. When the table is full, the address with
// no live connection that was used least recently (its last attempt, or its last connection
// going away) is forgotten (its bucket starts full again), in O(1) (a list of idle addresses);
// if every tracked address holds connections, a new address is refused (more live connections
// than max_sources cannot exist when max_sources >= --max_connections, which Server ensures).
// Thread safety: every method of SourceLimiter is thread-safe (mu_). A Lease is moved and
// destroyed by one thread at a time (it may change threads); Opened() and Closing() may run
// at the same time as each other (each writes its own flag, the counts are under the mutex),
// not with a move or the destruction.
// Ownership and lifetime: Leases hold a shared_ptr to the limiter's state, so a Lease may
// outlive the SourceLimiter.
#ifndef RKV_SERVER_SOURCE_LIMITER_H_
#define RKV_SERVER_SOURCE_LIMITER_H_

#include <chrono>
#include <cstdint>
#include <memory>
#include <string>
#include <unordered_map>

#include "common/mutex.h"
#include "rkv/status.h"

namespace rkv {

class SourceLimiter {
 public:
  using Clock = std::chrono::steady_clock;
  struct Limits {
    uint32_t max_conns_per_source = 64;   // 0: no cap
    uint32_t max_pending_per_source = 8;  // not yet opened; 0: no cap
    double attempts_per_s = 20;           // 0: no rate limit
    uint32_t attempt_burst = 40;
    size_t max_sources = 4096;
  };

  // One connection's share of its source's cap; releases it when destroyed.
  class Lease {
   public:
    Lease() = default;
    ~Lease();
    Lease(Lease&& o) noexcept;
    Lease& operator=(Lease&& o) noexcept;
    Lease(const Lease&) = delete;
    Lease& operator=(const Lease&) = delete;
    bool held() const { return state_ != nullptr; }
    // The connection has opened (a successful OPEN): it no longer counts against
    // max_pending_per_source (still against max_conns_per_source). Idempotent; no-op if empty.
    void Opened();
    bool pending() const { return state_ != nullptr && pending_; }
    // The connection is being torn down: it still counts against both caps until the Lease is
    // destroyed, and refusals name it as closing. Idempotent; no-op if empty.
    void Closing();

   private:
    friend class SourceLimiter;
    struct State;
    Lease(std::shared_ptr<State> state, std::string source)
        : state_(std::move(state)), source_(std::move(source)), pending_(true) {}
    void Release();
    std::shared_ptr<State> state_;
    std::string source_;
    bool pending_ = false;
    bool closing_ = false;
  };

  explicit SourceLimiter(const Limits& limits);

  // An attempt from `source` at `now`: *lease holds one connection of it, or the Status says
  // why not (Code::kBusy naming the limit). A share *lease already held (of any source) is
  // released when the new one replaces it; on refusal *lease is left as it was.
  [[nodiscard]] Status Admit(const std::string& source, Clock::time_point now, Lease* lease);

  // Live connections counted for `source`, and of them those not yet opened (tests, stats).
  uint32_t Connections(const std::string& source) const;
  uint32_t Pending(const std::string& source) const;
  uint32_t Closing(const std::string& source) const;
  size_t tracked() const;

 private:
  // Admit's checks and counting, under the mutex.
  Status Count(const std::string& source, Clock::time_point now);
  // One count of `source`'s entry (0 if untracked), under the mutex; defined and used in the .cc.
  template <typename Field>
  uint32_t Read(const std::string& source, Field field) const;
  std::shared_ptr<Lease::State> state_;
};

}  // namespace rkv

#endif  // RKV_SERVER_SOURCE_LIMITER_H_
