// SPDX-License-Identifier: Apache-2.0
// ProgressWatch: the coordinator's judge of a running migration batch (coordinator_move.cc).
// The batch is stalled when its source's reports (common/cluster/migration_progress.h,
// NAME/progress, for the batch's nonce) stopped changing for `limit`; before its first report
// (the source still finishing the batch before, waiting for a promotion, settling kept writes,
// beginning the import; a hand-over, which copies nothing and never reports) the batch has
// `first` from when it was put. A source that died, hangs or cannot reach etcd is stalled; a
// batch that advances never is, however long it runs (a large batch at a low
// --migration_rate). Time while etcd could not be read does not count: after a failed read the
// clock restarts at the next good one (the source could not report either).
// Thread safety: a value type (the coordinator's thread).
#ifndef RKV_SERVER_CLUSTER_PROGRESS_WATCH_H_
#define RKV_SERVER_CLUSTER_PROGRESS_WATCH_H_

#include <chrono>
#include <cstdint>
#include <optional>

#include "common/cluster/migration_progress.h"

namespace rkv::cluster {

class ProgressWatch {
 public:
  using Clock = std::chrono::steady_clock;
  static constexpr std::chrono::milliseconds kStalled{60000};
  static constexpr std::chrono::milliseconds kFirst{300000};
  ProgressWatch(uint64_t nonce, Clock::time_point start, std::chrono::milliseconds limit = kStalled,
                std::chrono::milliseconds first = kFirst)
      : nonce_(nonce), last_change_(start), limit_(limit), first_(first) {}
  // A read of NAME/progress at `now`: `read_ok` false when etcd could not be read; `p` what it
  // holds (null: nothing, or nothing decodable). Another batch's is ignored; a change of this
  // batch's restarts the clock.
  void Saw(bool read_ok, const MigrationProgress* p, Clock::time_point now);
  bool Stalled(Clock::time_point now) const {
    return !blind_ && now - last_change_ > (last_ ? limit_ : first_);
  }
  std::chrono::milliseconds limit() const { return last_ ? limit_ : first_; }

 private:
  const uint64_t nonce_;
  Clock::time_point last_change_;
  const std::chrono::milliseconds limit_, first_;
  std::optional<MigrationProgress> last_;
  bool blind_ = false;  // the last read failed
};

}  // namespace rkv::cluster

#endif  // RKV_SERVER_CLUSTER_PROGRESS_WATCH_H_
