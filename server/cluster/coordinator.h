// SPDX-License-Identifier: Apache-2.0
// Coordinator: the candidacy every cluster kvserver runs for the cluster's decisions
// (docs/cluster.md, "The coordinator" and "Requests"). A thread stands in the election
// (server/cluster/election.h) under the server's membership lease; while it leads, it carries
// out the requests kvctl puts at NAME/request (rebalance, remove), one at a time: it reads the
// map and the live members, plans (common/cluster/rebalance_plan.h), commits the new map with
// a raised epoch in one transaction that compares the map's mod revision and its own
// leadership (a deposed coordinator commits nothing), and answers at NAME/result in a
// transaction that also deletes the request.
// Slots that must move between live servers move online, one batch at a time
// (server/cluster/migrator.h runs in the source); the request is answered when all moved.
// Thread safety: leading() from any thread. Ownership: borrows the EtcdClient and the lease
// source (both outlive it); owns its thread, stopped (and the leadership resigned) by the
// destructor within about a second.
#ifndef RKV_SERVER_CLUSTER_COORDINATOR_H_
#define RKV_SERVER_CLUSTER_COORDINATOR_H_

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <map>
#include <mutex>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "common/cluster/cached_leased_read.h"
#include "common/cluster/cluster_address.h"
#include "common/cluster/cluster_request.h"
#include "common/cluster/drain_record.h"
#include "common/cluster/member_record.h"
#include "common/cluster/migration_record.h"
#include "common/cluster/rebalance_plan.h"
#include "common/cluster/replica_plan.h"
#include "common/cluster/ring_loss_record.h"
#include "common/cluster/suspect_record.h"
#include "common/etcd/etcd_client.h"
#include "server/cluster/election.h"
#include "server/cluster/liveness_probe.h"

namespace rkv::cluster {

class Coordinator {
 public:
  // lease(): the membership's current lease (0 while it has none). `probe` (may be null; it
  // outlives this): the servers of a replicated map are watched by it while this leads, and
  // one it finds dead is failed over at once (server/cluster/liveness_probe.h).
  Coordinator(EtcdClient* etcd, ClusterAddress cluster, uint32_t my_id,
              std::function<int64_t()> lease, LivenessProbe* probe = nullptr);
  ~Coordinator();
  Coordinator(const Coordinator&) = delete;
  Coordinator& operator=(const Coordinator&) = delete;
  void Start();
  bool leading() const { return leading_.load(); }
  uint64_t requests_done() const { return requests_done_.load(); }
  uint64_t failovers() const { return failovers_.load(); }  // slots promoted while leading
  // Backups dropped from slots because their primary reported them unreachable (while leading).
  uint64_t suspect_drops() const { return suspect_drops_.load(); }
  uint64_t ring_loss_drops() const { return ring_loss_drops_.load(); }

 private:
  void Loop();
  bool Stopping();
  void Pause(int ms);
  // Handles NAME/request if present, else waits up to a second for one. kAborted-like
  // failures (lost leadership) are returned as errors; the loop campaigns again.
  Status ServeOnce(Election* e);
  // Moves the slots (or, kAddReplica, copies them to one more backup), one migration batch
  // (NAME/migration) at a time; *moved counts them.
  Status Move(Election* e, const std::vector<SlotMove>& moves, MigrationRecord::Kind kind,
              uint32_t* moved);
  // One migration batch of `slots` from `from` to `to`: puts the record, waits for DONE or
  // FAILED; cancels it if a side's member record is gone or once the source's progress
  // reports stopped changing (server/cluster/progress_watch.h).
  // *retry: it failed in a way that may pass once both sides are live (FAILED, or cancelled
  // for a side's missing record), not for lack of time or leadership.
  // `replaced`: a REPLACE_BACKUP batch's replaced backup (0 for the other kinds).
  Status MoveBatch(Election* e, uint32_t from, uint32_t to, const std::vector<uint32_t>& slots,
                   MigrationRecord::Kind kind, bool* retry, uint32_t replaced = 0);
  // `cluster rebalance` of a replicated cluster (coordinator_balance.cc): rounds of
  // PlanReplicaBalance (common/cluster/replica_balance_plan.h) over the live servers (read
  // again each round; never onto a server a slot's primary reported), each step a
  // REPLACE_BACKUP or HANDOVER batch run by the slots' primary, until a round plans nothing.
  // *replaced, *handed: the slots whose backup moved, whose primary moved.
  Status BalanceReplicas(Election* e, uint32_t* replaced, uint32_t* handed);
  // The member records (NAME/servers/), and the live servers that may hold slots: those whose
  // record decodes, less (`replicated`) the ones being removed. *leases (may be null): member
  // id -> the lease of its record.
  Status ReadLive(bool replicated, std::vector<EtcdKv>* members, std::vector<LiveServer>* live,
                  std::map<uint32_t, int64_t>* leases = nullptr);
  // After a failed batch: whether both sides are registered (waiting up to 10 s), and the
  // slots of *slots that `from` still owns in the map.
  bool BothLive(uint32_t from, uint32_t to, std::vector<uint32_t>* slots);
  // A replicated cluster's upkeep (coordinator_replicas.cc): fails over slots whose primary is
  // down, drops dead backups (one fenced map transaction), then restores missing backups, one
  // ADD_REPLICA batch at a time. *replicated: the map has replicas > 1.
  // Upkeep, skipped unless dirty_, ProbeNews(), !upkeep_idle_ or kFullUpkeepMs passed.
  Status Maintain(Election* e, bool* replicated);
  // Whether the probe found one of targets_ dead that no Upkeep acted on yet (no etcd read).
  bool ProbeNews() const;
  // Not leading: whether the probe found the leader ProbeLeader last read dead (no etcd read).
  bool LeaderFoundDead() const;
  // Failover (and, if `rereplicate`, one re-replication batch); *changed: a map was committed.
  // Move calls it with rereplicate false while an ADD_REPLICA batch runs, so that failures are
  // handled meanwhile.
  Status Upkeep(Election* e, bool rereplicate, bool* replicated, bool* changed);
  // Not leading, with a probe: probes the leader; if it is found dead (nothing listens at its
  // address: server/cluster/liveness_probe.h), revokes its lease, which ends its candidacy and
  // its membership at once, so the next candidate leads without waiting for the lease to
  // expire (coordinator_replicas.cc).
  void ProbeLeader();
  // Revokes the lease of a server the probe found dead (once per lease; `who` for the log).
  void RevokeDead(const MemberRecord& r, int64_t lease, const char* who);
  // The reports live servers put under their membership leases (`leases`: member id -> the
  // lease of its record), from one of the caches below (common/cluster/cached_leased_read.h:
  // read at most every kReportsEveryMs; on a failed read, the last answer and the error);
  // records that do not decode or live under another lease are skipped (logged, but for
  // draining/: an old registration's record is no news).
  template <class Record, class Out>
  [[nodiscard]] Status ReadReports(CachedLeasedRead<Record, Out>* cache,
                                   const std::map<uint32_t, int64_t>& leases,
                                   std::vector<Out>* out) {
    LeasedRecords<Record> got;
    bool read = false;
    Status s = cache->Read(etcd_, cluster_.Prefix(), leases, out, &got, &read);
    if (read)
      LogIgnored(cache->dir().c_str(), got.malformed,
                 cache->dir() == "draining/" ? 0 : got.unleased, got.more);
    return s;
  }
  // Logs (throttled) the records of NAME/`dir` the lease filter left out.
  void LogIgnored(const char* dir, const std::vector<std::string>& malformed, size_t unleased,
                  bool more);
  // `cluster remove` of server `id` in a replicated cluster (coordinator_drain.cc): puts its
  // DrainRecord if it is live, then runs Upkeep until the map gives it no replica role.
  Status Drain(Election* e, const SlotMap& map, const std::vector<EtcdKv>& members, uint32_t id,
               ClusterResult* res);
  // After a transaction whose StillLeader compare may have failed: UNAUTHENTICATED if the
  // election now has another leader (or none), the read's error if it failed, else OK.
  [[nodiscard]] Status CheckStillLeader(const Election& e);
  // Carries out one decoded request; fills the result.
  Status Carry(Election* e, const ClusterRequest& req, ClusterResult* res);
  std::string Key(const char* rest) const { return cluster_.Prefix() + rest; }

  EtcdClient* const etcd_;
  const ClusterAddress cluster_;
  const uint32_t my_id_;
  const std::function<int64_t()> lease_;
  LivenessProbe* const probe_;
  std::set<int64_t> revoked_;  // leases revoked after a probe found their server dead (loop's)
  std::atomic<bool> leading_{false};
  std::atomic<uint64_t> requests_done_{0};
  std::atomic<uint64_t> failovers_{0};
  std::atomic<uint64_t> suspect_drops_{0};
  std::atomic<uint64_t> ring_loss_drops_{0};
  // Re-replication pacing after a failed batch, and the pair taken next (the loop thread's).
  std::chrono::steady_clock::time_point next_rereplication_{};
  // The reports (the loop thread's; ReadReports), each read at most every kReportsEveryMs:
  static constexpr int kReportsEveryMs = 500;
  // SuspectRecords (NAME/suspects/): the (primary, backup) pairs to keep apart;
  CachedLeasedRead<SuspectRecord, Avoid> suspects_{
      "suspects/", &SuspectRecord::reporter, std::chrono::milliseconds(kReportsEveryMs),
      [](const SuspectRecord& r, std::vector<Avoid>* o) {
        o->push_back({r.reporter, r.backup});
      }};
  // RingLossRecords (NAME/ringloss/): the (server, slot) pairs where a replica may lack an
  // acknowledged write (a refused log ring record);
  CachedLeasedRead<RingLossRecord, SlotLoss> ring_losses_{
      "ringloss/", &RingLossRecord::server, std::chrono::milliseconds(kReportsEveryMs),
      [](const RingLossRecord& r, std::vector<SlotLoss>* o) {
        for (uint32_t slot : r.slots) o->push_back({r.server, slot});
      }};
  // DrainRecords (NAME/draining/): the servers `cluster remove` is taking out of a replicated
  // cluster (coordinator_drain.cc).
  CachedLeasedRead<DrainRecord, uint32_t> draining_{
      "draining/", &DrainRecord::server, std::chrono::milliseconds(kReportsEveryMs),
      [](const DrainRecord& r, std::vector<uint32_t>* o) { o->push_back(r.server); }};
  // The leader's idle rounds (the loop thread's; docs/cluster.md, "Failover and
  // re-replication"): etcd is read again (Maintain -> Upkeep) only when the watch on the
  // cluster's prefix saw a change since the last read (dirty_), the probe found a target dead
  // (ProbeNews), the last upkeep left work (a batch, a commit, an error, paced
  // re-replication: !upkeep_idle_), or
  // kFullUpkeepMs passed (a safety net, which also reads NAME/request and restarts the watch
  // from that read's revision); NAME/request is read otherwise only after the watch saw it put.
  static constexpr int kFullUpkeepMs = 1000;
  int64_t watch_from_ = 0;  // changes up to this revision are known (0: read everything again)
  bool dirty_ = true;       // a change under the prefix (not request/result) not yet read
  bool request_maybe_ = true;
  bool upkeep_idle_ = false;  // the last Upkeep ended with nothing left to do
  bool replicated_ = false;   // the last Upkeep's map had replicas > 1
  std::chrono::steady_clock::time_point next_full_upkeep_{};
  std::vector<LivenessProbe::Target> targets_;  // the probe's targets the last Upkeep set
  std::set<int64_t> noticed_;  // leases whose "dead" verdict an Upkeep acted on (ProbeNews)
  // Not leading: the leader ProbeLeader last read (lease 0: none), read again every
  // kLeaderReadMs (the campaign's waits in between read nothing: Election::Campaign).
  static constexpr int kLeaderReadMs = 1000;
  LivenessProbe::Target leader_;
  std::chrono::steady_clock::time_point next_leader_read_{};
  size_t rotation_ = 0;
  std::mutex mu_;
  std::condition_variable cv_;
  bool stop_ = false;  // guarded by mu_
  std::thread thread_;
};

}  // namespace rkv::cluster

#endif  // RKV_SERVER_CLUSTER_COORDINATOR_H_
