// SPDX-License-Identifier: Apache-2.0
// ProgressReporter: a migration source's reports of how far its batch got
// (common/cluster/migration_progress.h): puts NAME/progress under the server's membership lease
// when MigrationProgress::kEveryMs passed since the last put or the phase changed, so the
// coordinator cancels a batch only when it stopped advancing (server/cluster/progress_watch.h).
// A put that fails is logged and not tried again for kQuietMs (the copy goes on meanwhile;
// each put may wait up to one etcd call's timeout).
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
  static constexpr int kQuietMs = 10000;
  // The figures now; put when due (see above).
  void Note(MigrationProgress::Phase phase, uint64_t keys, uint64_t bytes);
  // Buckets the copy's table scans went through (reported with the next put).
  void Scanned(uint64_t buckets) { now_.scanned = buckets; }
  uint64_t puts() const { return puts_; }

 private:
  EtcdClient* const etcd_;
  const std::string key_;
  const std::function<int64_t()> lease_;
  MigrationProgress now_;
  bool put_any_ = false;
  MigrationProgress::Phase put_phase_ = MigrationProgress::kCopy;
  std::chrono::steady_clock::time_point put_at_;
  bool failed_ = false;  // the last put failed: the next waits kQuietMs
  uint64_t puts_ = 0;
};

}  // namespace rkv::cluster

#endif  // RKV_SERVER_CLUSTER_PROGRESS_REPORTER_H_
