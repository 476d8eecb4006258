// SPDX-License-Identifier: Apache-2.0
// ProgressWatch: the coordinator's judge of a running migration batch (coordinator_move.cc).
// The batch is stalled once what its source reported (common/cluster/migration_progress.h,
// NAME/progress, for the batch's nonce) has not changed for `limit`, counted from when the
// batch was put: a source that died, hangs or cannot reach etcd. A batch that advances is never
// stalled, however long it runs (a large batch at a low --migration_rate).
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
  ProgressWatch(uint64_t nonce, Clock::time_point start, std::chrono::milliseconds limit = kStalled)
      : nonce_(nonce), last_change_(start), limit_(limit) {}
  // What NAME/progress holds at `now` (null: nothing readable). Another batch's is ignored; a
  // change of this batch's restarts the clock.
  void Saw(const MigrationProgress* p, Clock::time_point now);
  bool Stalled(Clock::time_point now) const { return now - last_change_ > limit_; }
  std::chrono::milliseconds limit() const { return limit_; }

 private:
  const uint64_t nonce_;
  Clock::time_point last_change_;
  const std::chrono::milliseconds limit_;
  std::optional<MigrationProgress> last_;
};

}  // namespace rkv::cluster

#endif  // RKV_SERVER_CLUSTER_PROGRESS_WATCH_H_
