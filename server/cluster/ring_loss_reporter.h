// SPDX-License-Identifier: Apache-2.0
// RingLossReporter: tells the coordinator which slots this server may lack an acknowledged
// write of (OwnershipTable::RingLoss: a log ring record of the slot was refused here after its
// writer had been told it was placed; docs/replication-rings.md, "A refused record"). Without
// it such a replica only refuses: its primary's ring writes to it go on being acknowledged by
// the NIC while it lacks them, and if the primary dies the promotion stops at the mark (the
// slot unavailable, never wrong).
// Every kCheckMs it compares the table's RingLossGeneration (and the membership lease) with
// what it last put: on a change it puts a RingLossRecord of the marked slots at
// NAME/ringloss/ME under this server's membership lease (so it goes when this server goes), or
// deletes the key when no slot is marked. The coordinator then takes this server out of those
// slots' replicas (common/cluster/replica_plan.h, DropRingLossReplicas); the map that drops it
// releases the slot here, which clears the mark, and the next put (or the delete) says so; a
// slot copied here afresh is cleared the same way. While slots are marked the record is read
// every kRefreshMs even without a change, and put again if it is gone or differs (so a record
// deleted by someone else, or lost to an etcd restored from an older snapshot, comes back; a
// read does not wake the coordinator's watch as a put would). A failed etcd call is tried
// again after kRetryMs.
// Thread safety: reports() and failures() from any thread. Ownership: borrows the EtcdClient
// and the OwnershipTable (both outlive it); the functions it is given must stay callable until
// it is destroyed; owns its thread, stopped by the destructor once its current etcd call
// returns (its deadline).
#ifndef RKV_SERVER_CLUSTER_RING_LOSS_REPORTER_H_
#define RKV_SERVER_CLUSTER_RING_LOSS_REPORTER_H_

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <mutex>
#include <thread>

#include "common/cluster/cluster_address.h"
#include "common/etcd/etcd_client.h"
#include "server/cluster/ownership_table.h"

namespace rkv::cluster {

struct RingLossReporterOptions {
  EtcdClient* etcd = nullptr;
  ClusterAddress cluster;
  const OwnershipTable* owners = nullptr;
  uint32_t my_id = 0;
  std::function<int64_t()> lease;       // the membership's lease; 0 while it has none
  std::function<uint64_t()> map_epoch;  // the applied map's epoch (put in the record)
};

class RingLossReporter {
 public:
  static constexpr int kCheckMs = 100;
  static constexpr int kRetryMs = 1000;
  static constexpr int kRefreshMs = 5000;

  explicit RingLossReporter(RingLossReporterOptions o);
  ~RingLossReporter();
  RingLossReporter(const RingLossReporter&) = delete;
  RingLossReporter& operator=(const RingLossReporter&) = delete;

  uint64_t reports() const { return reports_.load(); }    // records put or deleted
  uint64_t failures() const { return failures_.load(); }  // etcd calls that failed
  uint32_t reported() const { return reported_.load(); }  // slots in etcd now

 private:
  void Loop();
  // One check: a put or delete when the marks or the lease changed. False if etcd failed.
  bool Check();

  const RingLossReporterOptions o_;
  std::mutex mu_;
  std::condition_variable cv_;
  bool stop_ = false;  // guarded by mu_
  // The thread's: what etcd holds (the generation and lease it was written at).
  uint64_t put_gen_ = 0;
  int64_t put_lease_ = 0;
  bool in_etcd_ = false;
  std::chrono::steady_clock::time_point put_at_{};  // the last put
  std::atomic<uint64_t> reports_{0}, failures_{0};
  std::atomic<uint32_t> reported_{0};
  std::thread thread_;
};

}  // namespace rkv::cluster

#endif  // RKV_SERVER_CLUSTER_RING_LOSS_REPORTER_H_
