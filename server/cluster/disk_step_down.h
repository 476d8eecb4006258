// SPDX-License-Identifier: Apache-2.0
// DiskStepDown: a durable server of a replicated cluster whose write-ahead log fails (a full
// disk, an I/O error) gives up its replicas, as `kvctl cluster remove` would make it (docs/
// cluster.md, "A failing disk"). Without it, such a server stays a primary: every write to its
// slots fails ("outcome unknown") for as long as the disk stays bad, although each slot has a
// backup that could take over at once.
//
// Every check_ms it reads the log's failure count and its broken state. Failures that go on
// (seen at checks at least kConfirmMs apart, each within kStreakGapMs of the previous one), or
// a broken log, put a DrainRecord at NAME/draining/ME under this server's membership lease (only
// if the key is absent: a `cluster remove` already put one; a put whose answer was lost is
// recognised by reading the key back: the same bytes under this lease). The coordinator then counts
// the server as down for placement (server/cluster/coordinator_drain.cc): its primaries fail over
// to their backups in one fenced map transaction, it leaves every slot's backups, and
// re-replication never picks it. It stays registered and readable until the map moves its slots.
// Once stepped down it probes the data directory (`probe`: write, sync and remove a test file)
// after a hold: first_hold_ms, doubled (up to max_hold_ms) each time it steps down again within
// max_hold_ms of coming back. A probe that passes, with no new log failure during the hold, and a
// log not broken, deletes the record (only if it is still the one it put: the same lease and
// mod revision), and the server may be chosen for replicas again (a copy first); a failure
// before the delete went through keeps it down for another, doubled hold. A broken log
// (it refuses every record until a restart: durable_log.h) keeps the record until the process
// ends (the lease takes it). A new registration (another lease) loses the record: it is put
// again under the new one while the server is still stepped down.
// Lifecycle (State): kHealthy -> kStepping (the record to put) -> kDown (in etcd) ->
// kReturning (to delete) -> kHealthy; a failed etcd call is tried again at the next check.
// Thread safety: the counters from any thread. Ownership: borrows the EtcdClient (outlives it);
// the functions it is given must stay callable until it is destroyed; owns its thread, stopped
// by the destructor once its current call returns (an etcd call: its deadline; a probe: its
// writes and sync, which a hung device can hold as it holds the log's own sync).
#ifndef RKV_SERVER_CLUSTER_DISK_STEP_DOWN_H_
#define RKV_SERVER_CLUSTER_DISK_STEP_DOWN_H_

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <mutex>
#include <string>
#include <thread>

#include "common/cluster/cluster_address.h"
#include "common/etcd/etcd_client.h"
#include "rkv/status.h"

namespace rkv::cluster {

struct DiskStepDownOptions {
  EtcdClient* etcd = nullptr;
  ClusterAddress cluster;
  uint32_t my_id = 0;
  std::function<int64_t()> lease;       // the membership's lease; 0 while it has none
  std::function<uint64_t()> map_epoch;  // the applied map's epoch (information in the record)
  std::function<uint64_t()> failures;   // the log's failed records so far (never decreases)
  std::function<Status()> broken;       // OK, or why the log refuses every record until a restart
  std::function<Status()> probe;        // whether the data directory takes a write and a sync
  int check_ms = 500;
  int first_hold_ms = 30000;
  int max_hold_ms = 600000;
};

class DiskStepDown {
 public:
  enum class State { kHealthy, kStepping, kDown, kReturning };
  static constexpr int kConfirmMs = 1000;
  static constexpr int kStreakGapMs = 10000;

  explicit DiskStepDown(DiskStepDownOptions o);
  ~DiskStepDown();
  DiskStepDown(const DiskStepDown&) = delete;
  DiskStepDown& operator=(const DiskStepDown&) = delete;

  uint64_t step_downs() const { return step_downs_.load(); }  // times it stepped down
  uint64_t returns() const { return returns_.load(); }        // times a probe ended a step-down
  bool down() const { return down_.load(); }                  // stepped down now (not kHealthy)

 private:
  using SteadyClock = std::chrono::steady_clock;
  void Loop();
  // One check (the thread's); `now` its time.
  void Check(SteadyClock::time_point now);
  [[nodiscard]] Status PutRecord(bool* put);
  [[nodiscard]] Status DeleteRecord(bool* deleted);
  std::string Key() const;

  const DiskStepDownOptions o_;
  // The thread's state.
  State state_ = State::kHealthy;
  uint64_t last_failures_ = 0;
  bool ours_ = false;       // kDown: the record is the one this class put
  bool ambiguous_ = false;  // a put failed with no answer: it may have been applied
  std::string tried_;       // the bytes of the last put tried
  SteadyClock::time_point streak_start_{}, last_failure_{};  // kHealthy's failure streak
  int64_t put_lease_ = 0;  // kDown: the lease it was put under (ours_ or not)
  int64_t put_rev_ = 0;    // kDown, ours_: its mod revision
  int hold_ms_ = 0;
  SteadyClock::time_point next_probe_{};
  SteadyClock::time_point returned_at_{};
  std::string why_;  // the failure that made it step down (logged)
  std::atomic<uint64_t> step_downs_{0};
  std::atomic<uint64_t> returns_{0};
  std::atomic<bool> down_{false};
  std::mutex mu_;
  std::condition_variable cv_;
  bool stop_ = false;  // guarded by mu_
  std::thread thread_;
};

}  // namespace rkv::cluster

#endif  // RKV_SERVER_CLUSTER_DISK_STEP_DOWN_H_
