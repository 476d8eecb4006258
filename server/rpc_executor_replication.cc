// SPDX-License-Identifier: Apache-2.0
// The backup's side of replication (docs/cluster.md, "Replication"; the argument in
// docs/design.md, "Replicas and failover"): REPLICATE applies a primary's write to a slot that
// is a BACKUP here, in the slot's sequence order, and only from the server this backup's map
// names as the slot's primary at the message's epoch. Refusals (each counted):
//   a slot that is not a backup here (yet: a new backup applies the map naming it after its
//   primary may): UNAVAILABLE; a malformed message or a digest that does not match: BAD_REQUEST;
//   an epoch older than the one this server became a backup at: INVALID_ARGUMENT (the sender
//   was deposed);
//   an epoch newer than this server's map: UNAVAILABLE (the primary asks again once it caught
//   up; MOVED and TRY_AGAIN are not used: their replies lead with a wire::MovedPayload);
//   a sender that is not the slot's primary: INVALID_ARGUMENT;
//   a sequence number other than the next one: INVALID_ARGUMENT (a gap: something was lost;
//   or an older one), unless it is the last one applied with the same digest: a resend after a
//   lost reply, answered OK without applying it again. (The answer to a gap names no number.) The
//   write is admitted through the ownership table's in-flight count, so a promotion
// (ClusterNode::Apply) waits for it before the slot takes clients' writes.
#include <glog/logging.h>

#include <cstring>

#include "server/cluster/replica_ring.h"
#include "server/rpc_executor.h"

namespace rkv {

using cluster::SlotState;

namespace {

// One REPLICATE (a write or a query) admitted through the ownership table's in-flight count
// for a slot that is a BACKUP here; the admission ends with this object (a promotion waits
// for it). Not copyable; lives on the executing thread's stack.
class ReplicaAdmission {
 public:
  ReplicaAdmission(cluster::OwnershipTable* owners, uint32_t slot)
      : owners_(owners), slot_(slot), admitted_(owners->BeginReplicaWrite(slot, &word_)) {}
  ~ReplicaAdmission() {
    if (admitted_) owners_->EndWrite(slot_);
  }
  ReplicaAdmission(const ReplicaAdmission&) = delete;
  ReplicaAdmission& operator=(const ReplicaAdmission&) = delete;

  bool admitted() const { return admitted_; }
  uint64_t word() const { return word_; }  // the slot's word when admitted (or refused)
  // The refusal of a message `what` for a slot that is not a BACKUP here.
  Status Refusal(const char* what) const {
    return Status(Code::kUnavailable,
                  std::string(what) + ": slot " + std::to_string(slot_) + " is " +
                      cluster::SlotStateName(cluster::WordState(word_)) + " here, not BACKUP");
  }

 private:
  cluster::OwnershipTable* const owners_;
  const uint32_t slot_;
  uint64_t word_ = 0;
  const bool admitted_;
};

}  // namespace

Status RpcExecutor::ExecuteReplicate(const wire::Request& req, std::string* payload) {
  if (owners_ == nullptr) {
    counters_->repl_refused_state.fetch_add(1, std::memory_order_relaxed);
    return Status(Code::kInvalidArgument, "this server is not in a cluster: no replication");
  }
  wire::ReplicateHeader h{};
  if (req.key.size() <= sizeof h) {
    counters_->repl_refused_state.fetch_add(1, std::memory_order_relaxed);
    return Status(Code::kBadRequest, "REPLICATE: the key must hold a 32-byte header and a key");
  }
  std::memcpy(&h, req.key.data(), sizeof h);
  const std::string_view key = req.key.substr(sizeof h);
  // What the sender placed in this server's log rings before it sent this is applied first
  // (docs/replication-rings.md), before any stripe is taken (the drainer takes them).
  if (rings_ != nullptr) rings_->DrainWriter(h.sender_id);
  if (h.kind == wire::kReplicateQuery) return ExecuteReplicaQuery(h, key, req.value, payload);
  ReplicaVerdict verdict;
  return ApplyReplica(h, key, req.value, payload, &verdict);
}

Status RpcExecutor::ApplyReplica(const wire::ReplicateHeader& h, std::string_view key,
                                 std::string_view value, std::string* payload,
                                 ReplicaVerdict* verdict, bool ring) {
  const bool put = h.kind == wire::kReplicatePut;
  if (key.size() > wire::kMaxKeySize || (!put && h.kind != wire::kReplicateDelete) ||
      h.reserved[0] != 0 || h.reserved[1] != 0 || h.reserved[2] != 0 || (!put && !value.empty()) ||
      h.sequence == 0 || h.sequence == cluster::OwnershipTable::kSequenceUnset ||
      h.digest != wire::ReplicateDigest(h.kind, key, value)) {
    counters_->repl_refused_state.fetch_add(1, std::memory_order_relaxed);
    *verdict = ReplicaVerdict::kMalformed;
    return Status(Code::kBadRequest, "REPLICATE: malformed header or key");
  }
  const uint32_t slot = owners_->SlotOf(key);
  const ReplicaAdmission admit(owners_, slot);
  if (!admit.admitted()) {
    if (!ring) counters_->repl_refused_state.fetch_add(1, std::memory_order_relaxed);
    *verdict = ReplicaVerdict::kNotBackup;
    return admit.Refusal("REPLICATE");
  }
  if (owners_->RingLoss(slot)) {
    counters_->repl_refused_state.fetch_add(1, std::memory_order_relaxed);
    *verdict = ReplicaVerdict::kRingLoss;
    return RingLossRefusal(slot);
  }
  const uint64_t word = admit.word();
  if (h.epoch < cluster::WordEpoch(word)) {
    counters_->repl_refused_epoch.fetch_add(1, std::memory_order_relaxed);
    *verdict = ReplicaVerdict::kOldEpoch;
    return Status(Code::kInvalidArgument, "REPLICATE: epoch " + std::to_string(h.epoch) +
                                              " is older than this backup's (" +
                                              std::to_string(cluster::WordEpoch(word)) + ")");
  }
  // Under the slot's stripe: a promoted primary's query (ExecuteReplicaQuery) answers only once
  // the routing names it, and no write of the former primary admitted before is applied after.
  std::lock_guard<std::mutex> l(repl_mu_[slot % kReplStripes]);
  uint64_t map_epoch = 0;
  uint32_t primary = wire::kNoOwner;
  owners_->Route(slot, &map_epoch, &primary);
  if (h.epoch > map_epoch) {
    *verdict = ReplicaVerdict::kNewerEpoch;
    return Status(Code::kUnavailable, "REPLICATE: this backup has not applied map epoch " +
                                          std::to_string(h.epoch) + " yet");
  }
  if (h.sender_id != primary) {
    counters_->repl_refused_sender.fetch_add(1, std::memory_order_relaxed);
    *verdict = ReplicaVerdict::kWrongSender;
    return Status(Code::kInvalidArgument,
                  "REPLICATE: server " + std::to_string(h.sender_id) + " is not slot " +
                      std::to_string(slot) + "'s primary (server " + std::to_string(primary) + ")");
  }
  const uint64_t applied = owners_->Sequence(slot);
  if (applied != cluster::OwnershipTable::kSequenceUnset) {
    if (h.sequence == applied && h.digest == owners_->Digest(slot)) {
      counters_->repl_duplicates.fetch_add(1, std::memory_order_relaxed);
      *verdict = ReplicaVerdict::kDuplicate;
      *payload = "already applied";
      return Status::Ok();
    }
    if (h.sequence != applied + 1) {
      *verdict = h.sequence > applied + 1 ? ReplicaVerdict::kGap : ReplicaVerdict::kUsed;
      if (!ring || *verdict == ReplicaVerdict::kUsed)
        counters_->repl_refused_sequence.fetch_add(1, std::memory_order_relaxed);
      return Status(Code::kInvalidArgument,
                    "REPLICATE: slot " + std::to_string(slot) + " sequence " +
                        std::to_string(h.sequence) + " is not the next one here" +
                        (h.sequence == applied ? " (another write has that number)" : ""));
    }
  }
  Status s = put ? table_->Put(key, value) : table_->Delete(key);
  if (s.IsNotFound()) s = Status::Ok();
  if (!s.ok()) {
    *verdict = ReplicaVerdict::kTableError;
    return s;
  }
  owners_->SetSequence(slot, h.sequence);
  owners_->SetDigest(slot, h.digest);
  owners_->SetLastWrite(slot, h.digest, key, h.sender_id);
  counters_->repl_applied.fetch_add(1, std::memory_order_relaxed);
  *verdict = ReplicaVerdict::kApplied;
  return Status::Ok();
}

Status RpcExecutor::RingLossRefusal(uint32_t slot) {
  return Status(Code::kInvalidArgument,
                "REPLICATE: this backup refused a log ring record of slot " + std::to_string(slot) +
                    " and may lack an acknowledged write: it takes none until the map drops it");
}

cluster::RingDrainer::Outcome RpcExecutor::ApplyRingRecord(const cluster::ReplicaRing& ring,
                                                           const cluster::RingRecordView& r,
                                                           bool last_try) {
  using Outcome = cluster::RingDrainer::Outcome;
  if (owners_ == nullptr) return Outcome::kRefused;
  if (r.header.sender_id != ring.writer()) {  // a ring carries its own writer's writes only
    counters_->repl_refused_sender.fetch_add(1, std::memory_order_relaxed);
    // Its writer was told it was placed: marked where this server holds a replica that a
    // promotion could serve (never a slot it does not hold, nor one it serves already: such a
    // forgery must not make the coordinator demote a live primary).
    const uint32_t slot = owners_->SlotOf(r.key);
    const SlotState st = cluster::WordState(owners_->Word(slot));
    if (st == SlotState::kBackup || st == SlotState::kPromoting) owners_->MarkRingLoss(slot);
    return Outcome::kRefused;
  }
  std::string payload;
  ReplicaVerdict verdict = ReplicaVerdict::kMalformed;
  (void)ApplyReplica(r.header, r.key, r.value, &payload, &verdict, true);
  const uint32_t slot = owners_->SlotOf(r.key);
  switch (verdict) {
    case ReplicaVerdict::kApplied:
    case ReplicaVerdict::kDuplicate:
      return Outcome::kApplied;
    case ReplicaVerdict::kGap:
      // Its predecessor was placed in another of the writer's rings after the drainer looked
      // there and before it found this one (the drainer's two looks narrow that window, and a
      // slow drainer thread widens it again), or not placed at all (a writer out of step: its
      // record stays here, and the stuck head is the ring's end when it is revoked). Taken
      // again on the next pass, in order (repl_ring_waits; not a refusal), until its last try.
      if (last_try) {
        counters_->repl_refused_sequence.fetch_add(1, std::memory_order_relaxed);
        owners_->MarkRingLoss(slot);  // admitted: a BACKUP here, lacking a placed write
        return Outcome::kRefused;
      }
      LOG_EVERY_N(INFO, 100) << "log ring of server " << ring.writer() << ": slot " << slot
                             << " record number " << r.header.sequence << " at epoch "
                             << r.header.epoch << " waits for its predecessor (applied here: "
                             << owners_->Sequence(slot) << ")";
      return Outcome::kWait;
    case ReplicaVerdict::kNotBackup: {
      const SlotState st = cluster::WordState(owners_->Word(slot));
      // A BACKUP that refused the admission is freeing entries for a moment (a reclaim
      // batch): asked again, as a REPLICATE would be.
      if (st == SlotState::kBackup && !last_try) return Outcome::kWait;
      // A replica that went on without it (promoted while the record waited): marked. No
      // replica here (released, or a copy under way that the map will name or drop), or one
      // served here already (a promotion waits for the former primary's rings, so only a
      // forgery reaches it, which must not make the coordinator demote a live primary): not.
      if (st == SlotState::kPromoting || st == SlotState::kBackup) owners_->MarkRingLoss(slot);
      counters_->repl_refused_state.fetch_add(1, std::memory_order_relaxed);
      return Outcome::kRefused;
    }
    case ReplicaVerdict::kMalformed:  // no slot to speak of; its writer's rings are revoked
      return Outcome::kRefused;
    default:
      // Its writer was told it was placed: never silently dropped. A correct primary writes
      // none of these; a token holder that forged a REPLICATE with the primary's next number
      // makes one, and a table with no room refuses one (kTableError). This replica of the
      // slot may now lack an acknowledged write: marked (REPLICATE and QUERY refused here, no
      // promotion to OWNED) until the slot is released or copied afresh.
      owners_->MarkRingLoss(slot);
      return Outcome::kRefused;
  }
}

Status RpcExecutor::ExecuteReplicaQuery(const wire::ReplicateHeader& h, std::string_view key,
                                        std::string_view value, std::string* payload) {
  uint32_t slot = 0;
  if (key.size() != sizeof slot || !value.empty() || h.sequence != 0 || h.reserved[0] != 0 ||
      h.reserved[1] != 0 || h.reserved[2] != 0 ||
      h.digest != wire::ReplicateDigest(h.kind, key, value)) {
    counters_->repl_refused_state.fetch_add(1, std::memory_order_relaxed);
    return Status(Code::kBadRequest, "REPLICATE query: malformed header or slot");
  }
  std::memcpy(&slot, key.data(), sizeof slot);  // little-endian (x86 and ARM)
  if (slot >= owners_->num_slots()) {
    counters_->repl_refused_state.fetch_add(1, std::memory_order_relaxed);
    return Status(Code::kBadRequest, "REPLICATE query: no slot " + std::to_string(slot));
  }
  const ReplicaAdmission admit(owners_, slot);
  if (!admit.admitted()) {
    counters_->repl_refused_state.fetch_add(1, std::memory_order_relaxed);
    return admit.Refusal("REPLICATE query");
  }
  if (owners_->RingLoss(slot)) {  // its answer could not name the write this backup lacks
    counters_->repl_refused_state.fetch_add(1, std::memory_order_relaxed);
    return RingLossRefusal(slot);
  }
  const uint64_t word = admit.word();
  std::lock_guard<std::mutex> l(repl_mu_[slot % kReplStripes]);
  uint64_t map_epoch = 0;
  uint32_t primary = wire::kNoOwner;
  owners_->Route(slot, &map_epoch, &primary);
  // Only the primary of a map this backup applied: from then on the former primary's writes
  // are refused here (its sender no longer matches), so the answer stays the last write.
  if (h.epoch > map_epoch)  // not counted, as for REPLICATE: the asker asks again
    return Status(Code::kUnavailable, "REPLICATE query: this backup has not applied map epoch " +
                                          std::to_string(h.epoch) + " yet");
  if (h.epoch < cluster::WordEpoch(word)) {
    counters_->repl_refused_epoch.fetch_add(1, std::memory_order_relaxed);
    return Status(Code::kInvalidArgument, "REPLICATE query: epoch " + std::to_string(h.epoch) +
                                              " is older than this backup's");
  }
  if (h.sender_id != primary) {
    counters_->repl_refused_sender.fetch_add(1, std::memory_order_relaxed);
    return Status(Code::kInvalidArgument, "REPLICATE query: server " + std::to_string(h.sender_id) +
                                              " is not slot " + std::to_string(slot) +
                                              "'s primary at epoch " + std::to_string(h.epoch));
  }
  wire::ReplicaLastWrite last{};
  std::string last_key;
  uint64_t digest = 0;
  uint32_t sender = 0;
  last.has = owners_->LastWrite(slot, &digest, &last_key, &sender) ? 1 : 0;
  last.digest = digest;
  // From now on only the asker's writes are applied here (the routing names it), and it
  // numbers on from its own last number: the next one is taken whichever it is (a write of
  // the former primary admitted before the routing changed may have set a number it lacks).
  // Not once a write of the asker was applied here: its numbering holds already (a late
  // repeat of the query must not turn the order check off).
  if (!last.has || sender != h.sender_id)
    owners_->SetSequence(slot, cluster::OwnershipTable::kSequenceUnset);
  last.key_size = uint32_t(last_key.size());
  payload->assign(reinterpret_cast<const char*>(&last), sizeof last);
  payload->append(last_key);
  counters_->repl_queries.fetch_add(1, std::memory_order_relaxed);
  return Status::Ok();
}

}  // namespace rkv
