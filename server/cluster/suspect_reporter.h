// SPDX-License-Identifier: Apache-2.0
// SuspectReporter: a primary's side of partial partitions (docs/cluster.md, "Partial
// partitions"). A backup that is alive in etcd (its lease kept) but that this server cannot
// reach would hold every write of the slots it backs up until the write's deadline, for as long
// as the partition lasts: its lease never expires, and the coordinator's liveness probe (which
// may well reach it) does not find it dead. The replicator tells this class of every attempt
// to a backup the map still wants that failed in transport (Failed: no connection, no reply;
// with the time the attempt started) and of every answer (Reached). A backup whose attempts
// all failed, at least two, each starting at most kGapMs after the previous one failed, from
// the first one's start for `suspect_after_ms`, is reported: a SuspectRecord at
// NAME/suspects/BACKUP/ME under this server's membership lease (it goes when this server goes). The
// coordinator then drops that backup from this server's slots and never makes it one of their
// backups while the record exists (server/cluster/coordinator_replicas.cc), so the writes go on
// with the others (and re-replication gives the slots another backup). Once this server can open a
// connection to the backup again (the OPEN handshake: a round trip with its server; first tried
// max(heal_check_ms, kHoldMs) after the report, then at doubling intervals up to kMaxCheckMs),
// or an answer from it arrived meanwhile, it deletes the record: the backup may be chosen
// again (a copy first, as for any new backup). A record lost with a lease (this server
// registered again) is put again under the new one.
// Per backup, a lifecycle (State): kFailing (a streak, not reported) -> kReport (to be put) ->
// kReported (in etcd) -> kHealed (to be deleted) -> gone; Reached ends a kFailing streak at
// once. At most kMaxTracked backups are tracked (one per server of the map in practice).
// Thread safety: Failed and Reached from any thread (a mutex, and for Reached an atomic fast
// path while nothing is tracked; they never block on etcd: the thread does the etcd calls and
// the connects). Ownership: borrows the EtcdClient (outlives it); the functions it is given
// must stay callable until it is destroyed; owns its thread, stopped by the destructor once its
// current call returns (a healing connect and its OPEN: 1 s each; an etcd call: its 5 s
// deadline at worst).
#ifndef RKV_SERVER_CLUSTER_SUSPECT_REPORTER_H_
#define RKV_SERVER_CLUSTER_SUSPECT_REPORTER_H_

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <map>
#include <mutex>
#include <string>
#include <thread>

#include "common/cluster/cluster_address.h"
#include "common/etcd/etcd_client.h"
#include "rkv/client.h"

namespace rkv::cluster {

struct SuspectReporterOptions {
  EtcdClient* etcd = nullptr;
  ClusterAddress cluster;
  std::function<uint32_t()> my_id;      // 0 until this server joined: nothing is reported
  std::function<int64_t()> lease;       // the membership's lease; 0 while it has none
  std::function<uint64_t()> map_epoch;  // the applied map's epoch (put in the record)
  Options client;                       // the healing connect (auth token)
  int suspect_after_ms = 5000;          // a streak this long is reported; 0: never report
  int heal_check_ms = 1000;
};

class SuspectReporter {
 public:
  static constexpr int kGapMs = 1000;        // failures further apart start a new streak
  static constexpr int kHoldMs = 5000;       // a report lives at least this long
  static constexpr int kMaxCheckMs = 30000;  // the longest interval between healing connects
  static constexpr size_t kMaxTracked = 1024;

  explicit SuspectReporter(SuspectReporterOptions o);
  ~SuspectReporter();
  SuspectReporter(const SuspectReporter&) = delete;
  SuspectReporter& operator=(const SuspectReporter&) = delete;

  // An attempt to reach backup `id` at host:port, started at `started`, failed in transport.
  void Failed(uint32_t id, const std::string& host, uint16_t port,
              std::chrono::steady_clock::time_point started);
  // Backup `id` answered.
  void Reached(uint32_t id);
  // Backup `id` answers but cannot be brought to this primary's data (a promoted primary's
  // resync it refuses for good: Replicator::Resync): reported at once, and answers do not
  // heal the report for kHoldMs (the coordinator drops the backup meanwhile); then as any
  // report (a connect heals it; the backup may be chosen again, a copy first).
  void Diverged(uint32_t id, const std::string& host, uint16_t port);

  uint64_t reported() const { return reported_.load(); }  // records put (each streak once)
  uint64_t healed() const { return healed_.load(); }      // records deleted after a heal
  uint64_t suspected() const;                             // backups reported, not yet healed

 private:
  enum class State { kFailing, kReport, kReported, kHealed };
  struct Entry {
    State state = State::kFailing;
    // The streak's first attempt's start and its last failure.
    std::chrono::steady_clock::time_point since, last;
    std::chrono::steady_clock::time_point next_check;  // kReported: the next healing connect
    int check_ms = 0;                                  // kReported: the interval after it
    int failures = 0;                                  // kFailing: attempts in the streak
    std::string host;
    uint16_t port = 0;
    int64_t lease = 0;  // kReported: the lease the record was put under
    std::chrono::steady_clock::time_point hold_until{};  // Diverged: Reached heals not before
  };
  void Loop();
  // One pass over the entries (the thread's; takes mu_ only between etcd calls).
  void Pass();
  std::string Key(uint32_t backup, uint32_t me) const;

  const SuspectReporterOptions o_;
  mutable std::mutex mu_;
  std::condition_variable cv_;
  std::map<uint32_t, Entry> entries_;  // guarded by mu_
  bool stop_ = false;                  // guarded by mu_
  bool wake_ = false;                  // guarded by mu_: an entry turned kReport
  std::atomic<size_t> tracked_{0};     // entries_.size(), for Reached's fast path
  std::atomic<uint64_t> reported_{0}, healed_{0};
  std::thread thread_;
};

}  // namespace rkv::cluster

#endif  // RKV_SERVER_CLUSTER_SUSPECT_REPORTER_H_
