// SPDX-License-Identifier: Apache-2.0
// ProgressReporter: a migration source's reports of how far its batch got
// (common/cluster/migration_progress.h): puts NAME/progress under the server's membership lease
// when MigrationProgress::kEveryMs passed since the last put or the phase changed, so the
// coordinator cancels a batch only when it stopped advancing (server/cluster/progress_watch.h).
// A put that fails is logged and tried at the next report (nothing waits for it beyond one etcd
// call).
// Thread safety: one thread (the migrator's). Ownership: borrows the etcd client (the node's).
#ifndef RKV_SERVER_CLUSTER_PROGRESS_REPORTER_H_
#define RKV_SERVER_CLUSTER_PROGRESS_REPORTER_H_

#include <chrono>
#include <cstdint>
#include <functional>
#include <string>
#include <utility>

#include "common/cluster/migration_progress.h"
#include "common/etcd/etcd_client.h"

namespace rkv::cluster {

class ProgressReporter {
 public:
  // `lease()`: the membership's lease (0: none; the report is put without one).
  ProgressReporter(EtcdClient* etcd, std::string key, std::function<int64_t()> lease,
                   uint64_t nonce)
      : etcd_(etcd), key_(std::move(key)), lease_(std::move(lease)) {
    now_.nonce = nonce;
  }
  void Note(MigrationProgress::Phase phase, uint64_t keys, uint64_t bytes);
  uint64_t puts() const { return puts_; }

 private:
  EtcdClient* const etcd_;
  const std::string key_;
  const std::function<int64_t()> lease_;
  MigrationProgress now_;
  bool put_any_ = false;
  MigrationProgress::Phase put_phase_ = MigrationProgress::kCopy;
  std::chrono::steady_clock::time_point put_at_;
  uint64_t puts_ = 0;
};

}  // namespace rkv::cluster

#endif  // RKV_SERVER_CLUSTER_PROGRESS_REPORTER_H_
