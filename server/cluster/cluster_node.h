// SPDX-License-Identifier: Apache-2.0
// ClusterNode: kvserver's part in a cluster (kvserver --cluster=etcd://.../NAME;
// docs/cluster.md). Prepare reads the cluster's slot map (its slot count sizes the ownership
// table the server puts in its region). Join, once the server listens, registers this server
// (server/cluster/membership.h), follows the map (common/cluster/map_watcher.h), applying each
// new map to the ownership table — a slot the map gives this server becomes OWNED at the map's
// epoch, a slot it no longer gives becomes NOT_OWNED — and stands for coordinator
// (server/cluster/coordinator.h).
// Lifecycle: Prepare -> Join -> destructor (coordinator resigns, watcher stops, the membership
// lease is revoked so the record goes at once).
// Thread safety: AppendStats from any thread; the rest from the owner. Ownership: owns its
// etcd client, membership, watcher and coordinator; borrows the OwnershipTable (the server's,
// which outlives the node: the server destroys the node first).
#ifndef RKV_SERVER_CLUSTER_CLUSTER_NODE_H_
#define RKV_SERVER_CLUSTER_CLUSTER_NODE_H_

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "common/cluster/cluster_address.h"
#include "common/cluster/map_watcher.h"
#include "common/etcd/etcd_client.h"
#include "common/wire.h"
#include "server/cluster/coordinator.h"
#include "server/cluster/disk_step_down.h"
#include "server/cluster/import_sweeper.h"
#include "server/cluster/membership.h"
#include "server/cluster/migrator.h"
#include "server/cluster/ownership_table.h"
#include "server/cluster/replicator.h"
#include "server/cluster/ring_drainer.h"
#include "server/cluster/ring_loss_reporter.h"
#include "server/cluster/sender_addresses.h"
#include "server/cluster/slot_reclaimer.h"
#include "server/cluster/suspect_reporter.h"
#include "server/metrics/stat_value.h"

namespace rkv::cluster {

struct ClusterNodeOptions {
  ClusterAddress cluster;
  EtcdSettings etcd;  // TLS and auth; the endpoints come from `cluster`
  std::string host;   // the address clients dial (--listen's)
  uint16_t port = 0;  // 0: the bound port, given to Join
  std::string zone;
  int lease_ttl_s = 2;
  int suspect_after_ms = 5000;  // server/cluster/suspect_reporter.h (0: never report)
  bool durable = false;         // --data_dir: a restart keeps the data
  std::string auth_token;       // proven to other servers when migrating to them
  uint64_t migration_rate = 0;  // bytes/s a migration copies at most (0: unpaced)
  // How long the replication and migration links poll for a peer's answer before they sleep
  // on a completion channel (Options::reply_spin_us; the server's resolved --poll_spin_us:
  // spinning only where the process has cores to spare).
  int reply_spin_us = -1;  // -1: always poll
  // --data_dir (else null): the write-ahead log's failure count and broken state, and a probe
  // of the data directory; with replicas, a failing log makes this server step down
  // (server/cluster/disk_step_down.h). Callable from Join until the node is destroyed.
  std::function<uint64_t()> log_failures;
  std::function<Status()> log_broken;
  std::function<Status()> disk_probe;
  int disk_hold_ms = 30000;
};

class ClusterNode {
 public:
  [[nodiscard]] static Status Prepare(ClusterNodeOptions o, std::unique_ptr<ClusterNode>* out);
  ~ClusterNode();
  ClusterNode(const ClusterNode&) = delete;
  ClusterNode& operator=(const ClusterNode&) = delete;
  uint32_t num_slots() const { return num_slots_; }
  uint64_t slot_seed() const { return slot_seed_; }
  // `port`: the port the server is bound to.
  // `table`: the server's (migrations copy from it); outlives the node.
  [[nodiscard]] Status Join(OwnershipTable* owners, Table* table, uint16_t port);
  uint32_t id() const { return membership_ ? membership_->id() : 0; }
  // A cluster with replicas (the map's replicas > 1): the replicator client writes go through
  // (owned by the node; the server stops its write pools before destroying the node). Null
  // without replicas. Call once, before Join, with the table Join will get.
  Replicator* MakeReplicator(OwnershipTable* owners, Table* table);
  // A memory-only server of a replicated cluster taking log rings (docs/replication-rings.md):
  // the drainer, owned by the node and started here; `apply` is the executor's
  // (RpcExecutor::ApplyRingRecord), which must outlive the node. Maps are applied with its
  // revocations (BeginMap/EndMap), and a promotion waits for the former primary's revoked
  // rings. Call once, before Join.
  RingDrainer* MakeRingDrainer(RingDrainer::ApplyFn apply,
                               RingDrainer::HeadroomFn headroom = nullptr);
  // The server stops: the log rings are revoked and freed before its connections go.
  void CloseRings() {
    if (rings_) rings_->Close();
  }
  uint16_t replicas() const { return replicas_; }
  void AppendStats(std::vector<StatValue>* v) const;
  // Where the applied map's servers registered: a REPLICATE is taken only from its sender's
  // address (server/cluster/sender_addresses.h). Lives as long as the node.
  const SenderAddresses& senders() const { return senders_; }
  // MIGRATE_BEGIN's check (RpcExecutor::SetImportCheck; server/cluster/import_check.h): OK
  // only if NAME/migration, read now, is a COPY to this server with this nonce whose slots
  // include every one of `slots`. Any thread.
  [[nodiscard]] Status CheckImport(uint64_t nonce, const std::vector<uint32_t>& slots) const;

 private:
  explicit ClusterNode(ClusterNodeOptions o) : o_(std::move(o)) {}
  void Apply(const SlotMap& map);
  // A replicated cluster: a server that restarts (same address, so same id) while the map still
  // names it for slots whose other replicas are live must not take them back with the data it
  // has (its log may lack acknowledged writes: --fsync=no, or none at all): it waits, before
  // registering, until the coordinator failed them over (its former process's lease expires);
  // re-replication then copies the slots to it afresh. Slots only it holds it takes back.
  [[nodiscard]] Status AwaitOwnFailover(const std::string& host, uint16_t port);

  ClusterNodeOptions o_;
  std::unique_ptr<EtcdClient> etcd_;
  uint32_t num_slots_ = 0;
  uint64_t slot_seed_ = 0;
  uint16_t replicas_ = 1;
  OwnershipTable* owners_ = nullptr;
  std::unique_ptr<Membership> membership_;
  std::unique_ptr<MapWatcher> watcher_;
  std::unique_ptr<LivenessProbe> probe_;  // replicated clusters; used by the coordinator
  std::unique_ptr<Coordinator> coordinator_;
  std::unique_ptr<Migrator> migrator_;
  // Replicated clusters, after Join: the replicator reports unreachable backups to it
  // (Replicator::SetSuspects); destroyed first (the write pools stopped before).
  std::unique_ptr<SuspectReporter> suspects_;
  // Backups that take log rings, after Join: reports the slots marked RingLoss; destroyed first.
  std::unique_ptr<RingLossReporter> ring_loss_;
  // Replicated durable clusters, after Join: gives up this server's replicas while its log
  // fails; destroyed first.
  std::unique_ptr<DiskStepDown> disk_;
  std::unique_ptr<Replicator> replicator_;
  std::unique_ptr<RingDrainer> rings_;  // destroyed before the replicator (declared after)
  std::atomic<uint64_t> promotions_{0};
  // Applying maps (cluster_node_apply.cc): the watcher thread's Apply and the promoter thread
  // change words under words_mu_.
  std::mutex words_mu_;
  std::condition_variable promote_cv_;
  struct Promotion {
    uint32_t slot;
    uint64_t epoch;
    std::chrono::steady_clock::time_point after;
    std::chrono::steady_clock::time_point retry{};  // after a failed resync: not before
    // False for a HANDOVER's (the former primary a backup of the slot in the next map): every
    // replica's entries are equal then, nothing to resync (docs/design.md).
    bool resync = true;
    // The slot's primary in the map applied before (kNoOwner: unknown, after skipped maps):
    // OWNED waits until its revoked log rings are drained and freed.
    uint32_t former = wire::kNoOwner;
  };
  std::vector<Promotion> promoting_;         // guarded by words_mu_
  std::shared_ptr<const SlotMap> last_map_;  // guarded by words_mu_
  std::vector<uint8_t> stale_role_;          // guarded by words_mu_ (after Join)
  bool stop_ = false;                        // guarded by words_mu_
  std::thread promoter_;
  // From Join: frees the entries of slots Apply (replicated clusters) or the import sweeper
  // released.
  std::unique_ptr<SlotReclaimer> reclaimer_;
  // From Join: releases the slots of imports that will never complete; destroyed first.
  std::unique_ptr<ImportSweeper> sweeper_;
  // The promoter: a promoted slot's word becomes OWNED (readable, writable) once its fence
  // passed, no replicated write it admitted as a backup is still running, and the backups the
  // map kept were resynced (Replicator::Resync; tried again every kResyncRetryMs until then).
  static constexpr int kResyncRetryMs = 200;
  void Promote();
  std::atomic<uint64_t> applied_epoch_{0};
  SenderAddresses senders_;  // updated by Apply before the words change
};

}  // namespace rkv::cluster

#endif  // RKV_SERVER_CLUSTER_CLUSTER_NODE_H_
