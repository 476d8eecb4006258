// SPDX-License-Identifier: Apache-2.0
// LogThrottle: at most `per_second` log lines of one kind (connection refusals and failed
// handshakes, which any peer can cause) per one-second
// window; the rest are held back and counted, and the next line that is logged says how many
// were (HeldBackNote). A peer that makes the server refuse it over and over cannot flood the
// log; the counters (STATS connections_rejected, source_limited) still count every refusal.
// Thread safety: Admit is thread-safe (the manual acceptor refuses from several threads).
#ifndef RKV_SERVER_LOG_THROTTLE_H_
#define RKV_SERVER_LOG_THROTTLE_H_

#include <chrono>
#include <cstdint>
#include <string>

#include "common/mutex.h"

namespace rkv {

class LogThrottle {
 public:
  using Clock = std::chrono::steady_clock;
  explicit LogThrottle(int per_second) : per_second_(per_second) {}

  // Whether a line at `now` may be logged. If so, *held_back is the number of lines held back
  // since the last one logged (to be reported with it: HeldBackNote), else it is 0.
  bool Admit(Clock::time_point now, uint64_t* held_back) EXCLUDES(mu_) {
    MutexLock l(&mu_);
    *held_back = 0;
    if (!started_ || now - window_start_ >= std::chrono::seconds(1)) {
      started_ = true;
      window_start_ = now;
      in_window_ = 0;
    }
    if (in_window_ >= per_second_) {
      ++held_;
      return false;
    }
    ++in_window_;
    *held_back = held_;
    held_ = 0;
    return true;
  }

 private:
  const int per_second_;
  Mutex mu_;
  bool started_ GUARDED_BY(mu_) = false;
  Clock::time_point window_start_ GUARDED_BY(mu_);
  int in_window_ GUARDED_BY(mu_) = 0;
  uint64_t held_ GUARDED_BY(mu_) = 0;
};

// " (and N more refusals or failed setups not logged since the last line)", or "" for 0.
inline std::string HeldBackNote(uint64_t held_back) {
  if (held_back == 0) return "";
  return " (and " + std::to_string(held_back) +
         " more refusals or failed setups not logged since the last line; STATS counts them)";
}

}  // namespace rkv

#endif  // RKV_SERVER_LOG_THROTTLE_H_
