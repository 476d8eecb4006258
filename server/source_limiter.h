// SourceLimiter: per-source-address limits on connections (issue 12, "Limits"): at most
// `max_conns_per_source` live connections from one address, and connection attempts from one
// address at most `attempts_per_s` on average with bursts up to `attempt_burst` (a token
// bucket), so one host cannot take every connection slot or keep the acceptors busy. Applies to
// rdma_cm connects and to manual-mode exchanges alike (the source is the peer's IP address,
// without the port).
//
// Admit() is called for every attempt; it spends a token and, if the source is under its
// connection cap, returns a Lease that counts as one of its connections until the Lease is
// destroyed (when the connection is torn down; also when the attempt fails later in setup).
// Bounds: at most `max_sources` addresses are tracked. When the table is full, the address with
// no live connection that was used least recently (its last attempt, or its last connection
// going away) is forgotten (its bucket starts full again), in O(1) (a list of idle addresses);
// if every tracked address holds connections, a new address is refused (more live connections
// than max_sources cannot exist when max_sources >= --max_connections, which Server ensures).
// Thread safety: every method is thread-safe (mu_). A Lease may be destroyed on any thread.
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
    uint32_t max_conns_per_source = 64;  // 0: no cap
    double attempts_per_s = 20;          // 0: no rate limit
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

   private:
    friend class SourceLimiter;
    struct State;
    Lease(std::shared_ptr<State> state, std::string source)
        : state_(std::move(state)), source_(std::move(source)) {}
    void Release();
    std::shared_ptr<State> state_;
    std::string source_;
  };

  explicit SourceLimiter(const Limits& limits);

  // An attempt from `source` at `now`: *lease holds one connection of it, or the Status says
  // why not (Code::kBusy naming the limit). A share *lease already held (of any source) is
  // released when the new one replaces it; on refusal *lease is left as it was.
  [[nodiscard]] Status Admit(const std::string& source, Clock::time_point now, Lease* lease);

  // Live connections counted for `source` (tests and stats).
  uint32_t Connections(const std::string& source) const;
  size_t tracked() const;

 private:
  // Admit's checks and counting, under the mutex.
  Status Count(const std::string& source, Clock::time_point now);
  std::shared_ptr<Lease::State> state_;
};

}  // namespace rkv

#endif  // RKV_SERVER_SOURCE_LIMITER_H_
