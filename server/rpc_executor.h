// SPDX-License-Identifier: Apache-2.0
// RpcExecutor: executes one request a client sent (PUT, DELETE, STATS, PARAMS) and encodes the
// reply. It knows nothing of queues or completions: the worker hands it the received bytes
// and a send buffer.
// Thread safety: Execute may run on every worker at once (the table has its own locks;
// counters are atomics). The QP passed for PARAMS must stay alive during the call (the worker
// that serves the connection guarantees it: it alone drains the QP before its destruction).
#ifndef RKV_SERVER_RPC_EXECUTOR_H_
#define RKV_SERVER_RPC_EXECUTOR_H_

#include <infiniband/verbs.h>

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "common/wire.h"
#include "server/cluster/ownership_table.h"
#include "server/cluster/replicator.h"
#include "server/cluster/ring_drainer.h"
#include "server/metrics/counters.h"
#include "server/store/table.h"

namespace rkv {

// What PARAMS reports about the region (with the asking connection's own rkey: Execute's
// granted_rkey; the region's address is 0: every rkey a client gets is zero-based).
struct RegionInfo {
  uint64_t addr = 0;
  uint32_t rkey = 0;
  uint64_t size = 0;
};

class RpcExecutor {
 public:
  RpcExecutor(Table* table, ServerCounters* counters, RegionInfo region,
              std::function<std::string()> stats_text)
      : table_(table), counters_(counters), region_(region), stats_text_(std::move(stats_text)) {}

  // Decodes `len` bytes at `msg` (peer-controlled: every length is checked), executes the
  // request and writes the reply into out[0, cap). Returns the reply length. *malformed is set
  // when the request could not be decoded (the reply then says BAD_REQUEST).
  // `qp` and `granted_rkey` (the rkey OPEN gave this connection) are needed for PARAMS only
  // (the write pool passes nullptr and 0 for PUT and DELETE); `qp_num` names the connection in
  // logs.
  size_t Execute(ibv_qp* qp, uint32_t qp_num, uint32_t granted_rkey, const uint8_t* msg, size_t len,
                 uint8_t* out, size_t cap, bool* malformed);
  // SNAPSHOT asks this handler (kvserver --data_dir); without one it answers INVALID_ARGUMENT.
  // Set before the workers start.
  void SetSnapshotHandler(std::function<std::string()> handler) { snapshot_ = std::move(handler); }
  // kvserver --cluster: PUT and DELETE pass the slot's write gate first (admitted only where
  // the slot's word is OWNED; otherwise answered MOVED, or TRY_AGAIN while it is MOVING, with
  // a wire::MovedPayload). Set before the workers start; the table outlives this.
  void SetOwnership(cluster::OwnershipTable* owners) { owners_ = owners; }
  // kvserver --cluster with replicas: a client's PUT/DELETE reaches the slot's backups first
  // (server/cluster/replicator.h). Set before the workers start; outlives the workers.
  void SetReplicator(cluster::Replicator* r) { replicator_ = r; }
  // A memory-only backup's log rings (docs/replication-rings.md): a REPLICATE first drains its
  // sender's rings. Set before the workers start; outlives the workers.
  void SetRingDrainer(cluster::RingDrainer* rings) { rings_ = rings; }
  // The drainer's apply function (RingDrainer::ApplyFn) for a ring record: ApplyReplica's
  // checks, its verdict mapped as docs/replication-rings.md says (applied or a resend:
  // applied; a gap, or a BACKUP slot being reclaimed: wait, but not on its `last_try`;
  // anything else: refused, and the slot marked OwnershipTable::RingLoss where this server
  // holds a replica of it, no room included). A record must name the ring's writer as its
  // sender.
  cluster::RingDrainer::Outcome ApplyRingRecord(const cluster::ReplicaRing& ring,
                                                const cluster::RingRecordView& record,
                                                bool last_try);
  // Counts a record the fast path wrote to a backup's ring, a ring this server granted.
  void CountRingWrite() { counters_->repl_ring_writes.fetch_add(1, std::memory_order_relaxed); }
  void CountRingGrant() { counters_->repl_ring_grants.fetch_add(1, std::memory_order_relaxed); }
  // kvserver --cluster: MIGRATE_BEGIN's check that etcd's migration record (NAME/migration)
  // is a copy to this server of those slots with that nonce (ClusterNode::CheckImport); none
  // set: every MIGRATE_BEGIN is refused. Set before the workers start; outlives the workers.
  using ImportCheck = std::function<Status(uint64_t nonce, const std::vector<uint32_t>& slots)>;
  void SetImportCheck(ImportCheck check) { import_check_ = std::move(check); }

  // A client's replicated PUT/DELETE on a worker's fast path (rpc_executor_fast.cc;
  // server/conn/replica_fast_path.h): Execute's steps for it, split where the backups' replies
  // are awaited. BeginFast: true when the request (moved out of *request then) is a
  // well-formed PUT/DELETE of a slot this server is the primary of with backups, admitted
  // through the slot's write gate, and the replicator began it (op->fw holds the slot's lock);
  // false (nothing taken or held): execute it as usual. The caller posts op->fw to the backups
  // and ends with EndFast (the reply written to out[0, cap), its length returned), or with
  // AbortFast when nothing was posted (then executes op->request as usual). Any thread may end
  // it; EndFast blocks only when some first attempt did not succeed (Replicator::EndFast).
  struct FastOp {
    std::string request;  // the received bytes
    wire::Op op{};
    uint64_t request_id = 0;
    cluster::Replicator::FastWrite fw;
  };
  [[nodiscard]] bool BeginFast(std::string* request, FastOp* op);
  size_t EndFast(FastOp* op, const Status* status, const bool* maybe_sent, uint8_t* out,
                 size_t cap);
  void AbortFast(FastOp* op);
  // Shutdown with the write posted and not ended (status/maybe_sent as for EndFast):
  // Replicator::FailFast, the gate left. Not counted, not marked dirty (the server stops).
  void FailFast(FastOp* op, const Status* status, const bool* maybe_sent);
  // Replicator::FastDropped: the map no longer wants `backup`'s reply to this write (its wait
  // ends now; the end retries per the new map). *seen_epoch starts as op->fw.snap.epoch.
  [[nodiscard]] bool FastDropped(const FastOp& op, uint32_t backup, uint64_t* seen_epoch) const {
    return replicator_ != nullptr && replicator_->FastDropped(op.fw, backup, seen_epoch);
  }

 private:
  Table* const table_;
  ServerCounters* const counters_;
  const RegionInfo region_;
  const std::function<std::string()> stats_text_;
  std::function<std::string()> snapshot_;
  cluster::OwnershipTable* owners_ = nullptr;
  cluster::Replicator* replicator_ = nullptr;
  cluster::RingDrainer* rings_ = nullptr;
  ImportCheck import_check_;
  static constexpr size_t kReplStripes = 256;
  std::unique_ptr<std::mutex[]> repl_mu_{new std::mutex[kReplStripes]};
  // REPLICATE (rpc_executor_replication.cc): a backup applying its primary's write; the
  // sender's log rings are drained first.
  Status ExecuteReplicate(const wire::Request& req, std::string* payload);
  // What ApplyReplica found: REPLICATE answers with its Status, a ring record's drainer maps
  // it to an outcome (ApplyRingRecord).
  enum class ReplicaVerdict {
    kApplied,
    kDuplicate,  // the last number again with its digest: taken, nothing applied
    kMalformed,
    kNotBackup,    // the slot is not a BACKUP here
    kOldEpoch,     // older than the epoch this server became the slot's backup at
    kNewerEpoch,   // newer than this server's map
    kWrongSender,  // not the slot's primary in this server's map
    kGap,          // past the next number
    kUsed,         // a number already taken by another write
    kTableError,   // the table refused it (no room)
    kRingLoss,     // a ring record of the slot was refused here (OwnershipTable::RingLoss)
  };
  static Status RingLossRefusal(uint32_t slot);
  // The checks and the apply of one replicated write, after its header was read: the same for
  // a REPLICATE and a ring record (`ring`: the verdicts a ring record waits at, kGap and
  // kNotBackup, are not counted as refusals here: ApplyRingRecord counts what it refuses).
  // Takes the slot's stripe; never drains the rings.
  Status ApplyReplica(const wire::ReplicateHeader& h, std::string_view key, std::string_view value,
                      std::string* payload, ReplicaVerdict* verdict, bool ring = false);
  // PUT/DELETE's table write (*payload: the entry's location for the client's cache).
  Status ApplyWrite(bool put, std::string_view key, std::string_view value, std::string* payload);
  // The reply: `code` unless OK and `s` failed (then s's code and message, counted).
  size_t EncodeOutcome(wire::Op op, uint64_t request_id, Code code, const Status& s,
                       std::string* payload, uint8_t* out, size_t cap);
  // REPLICATE's query (wire::kReplicateQuery): a promoted primary asks for the last write this
  // backup applied to a slot (Replicator::Resync).
  Status ExecuteReplicaQuery(const wire::ReplicateHeader& h, std::string_view key,
                             std::string_view value, std::string* payload);
  // MIGRATE_BEGIN/PUT/DELETE (rpc_executor_migration.cc): a migration's receiving side.
  Status ExecuteMigration(const wire::Request& req, uint32_t qp_num, std::string* payload);
  // Fills the MOVED/TRY_AGAIN answer for a write the gate refused.
  Code Refuse(uint32_t slot, uint64_t word, std::string* payload);
};

}  // namespace rkv

#endif  // RKV_SERVER_RPC_EXECUTOR_H_
