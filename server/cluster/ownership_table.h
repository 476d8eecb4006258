// SPDX-License-Identifier: Apache-2.0
// OwnershipTable: this server's ownership words (common/cluster/ownership_word.h), one per hash
// slot, in the registered region after the table, so that clients read them with their GETs;
// and the write gate that makes "check ownership, then apply" atomic with a hand-over.
//
// Writes (PUT/DELETE, the request executor): BeginWrite(slot) counts the write in flight on the
// slot, then reads the word; only an OWNED word admits the write; EndWrite ends it. A hand-over
// (Pause) stores MOVING, then waits until no write admitted before it is still in flight. Both
// sides use sequentially consistent operations (the write's increment before its word load, the
// pause's store before its count load), so either the write sees MOVING or the pause sees the
// write and waits for it: no write is applied after Pause returns.
// The routing (the map's epoch and each slot's owner id) answers MOVED replies.
// Thread safety: every method from any thread. Ownership: borrows the words (the server's
// region, which outlives this); owns the in-flight counters and the routing.
#ifndef RKV_SERVER_CLUSTER_OWNERSHIP_TABLE_H_
#define RKV_SERVER_CLUSTER_OWNERSHIP_TABLE_H_

#include <atomic>
#include <chrono>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <unordered_set>
#include <vector>

#include "common/cluster/ownership_word.h"
#include "common/mutex.h"

namespace rkv::cluster {

class OwnershipTable {
 public:
  // `words`: num_slots 8-byte aligned words, zero (NOT_OWNED) at start.
  OwnershipTable(uint64_t* words, uint32_t num_slots, uint64_t slot_seed);
  uint32_t num_slots() const { return num_slots_; }
  uint64_t slot_seed() const { return slot_seed_; }
  uint32_t SlotOf(std::string_view key) const;
  uint64_t Word(uint32_t slot) const { return __atomic_load_n(&words_[slot], __ATOMIC_SEQ_CST); }
  // One 8-byte store (readers see the old word or the new one).
  void Set(uint32_t slot, uint64_t word) {
    __atomic_store_n(&words_[slot], word, __ATOMIC_SEQ_CST);
  }

  // True (and the write counted in flight) if the slot is OWNED and past its write fence;
  // otherwise *word says why (a fenced slot reads as MOVING: TRY_AGAIN).
  bool BeginWrite(uint32_t slot, uint64_t* word);
  // A backup's replicated write: counted in flight like a client's; true only while the word
  // is BACKUP (a promotion waits for the admitted ones: WaitIdle).
  bool BeginReplicaWrite(uint32_t slot, uint64_t* word);
  // The slot reclaimer's deletion (server/cluster/slot_reclaimer.h): marks the slot
  // reclaiming (BeginWrite and BeginReplicaWrite refuse it until EndReclaim, whatever its word
  // becomes meanwhile) and counts an operation in flight on it (WaitIdle waits for it), then
  // true if the word is `word`; false (nothing left marked or counted) otherwise. All
  // sequentially consistent: a write admitted after this saw the word change, which came after
  // the mark, so it sees the mark.
  bool BeginReclaim(uint32_t slot, uint64_t word);
  void EndReclaim(uint32_t slot);
  // Waits until no write admitted to the slot is in flight; false at the deadline.
  bool WaitIdle(uint32_t slot, std::chrono::steady_clock::time_point deadline) const;
  // A promoted backup takes client writes only after every client's map lease that could still
  // name the old primary has run out (docs/design.md, "Failover"): until `until`, BeginWrite
  // refuses with TRY_AGAIN.
  void FenceWrites(uint32_t slot, std::chrono::steady_clock::time_point until);
  // The slot's replication sequence: the last write number this server applied (as backup) or
  // gave (as primary). kSequenceUnset: a new backup that accepts whatever number comes first.
  static constexpr uint64_t kSequenceUnset = ~uint64_t{0};
  uint64_t Sequence(uint32_t slot) const { return seq_[slot].load(); }
  void SetSequence(uint32_t slot, uint64_t seq) { seq_[slot].store(seq); }
  // A backup's digest of the last write it applied (wire::ReplicateDigest).
  uint64_t Digest(uint32_t slot) const { return digest_[slot].load(); }
  void SetDigest(uint32_t slot, uint64_t d) { digest_[slot].store(d); }
  // A backup's last applied write to the slot (its digest and key), which a promoted primary
  // compares with its own to resync the backups it kept (Replicator::Resync; docs/design.md,
  // "Replicas and failover"): set by each REPLICATE applied here, cleared when the slot becomes
  // a new backup here (a copy). One key per slot (at most wire::kMaxKeySize bytes).
  // `sender`: the primary that sent it.
  void SetLastWrite(uint32_t slot, uint64_t digest, std::string_view key, uint32_t sender);
  void ClearLastWrite(uint32_t slot);
  // False (nothing named) when no write was applied since the slot became a backup here.
  // *sender (may be null): the primary that sent it.
  bool LastWrite(uint32_t slot, uint64_t* digest, std::string* key,
                 uint32_t* sender = nullptr) const;
  // A backup that refused a log ring record of the slot (docs/replication-rings.md): its
  // writer was told the write was placed, so this replica may lack an acknowledged write.
  // While marked, the slot's REPLICATEs and QUERYs are refused here (its primary's writes
  // fail visibly and report it, until the map drops this backup) and a promotion does not
  // store OWNED. Cleared when the slot is released or becomes a new backup by a copy.
  // Each change of a mark raises RingLossGeneration (the server reports the marked slots:
  // server/cluster/ring_loss_reporter.h).
  void MarkRingLoss(uint32_t slot) {
    if (ring_loss_[slot].exchange(1) == 0) ring_loss_gen_.fetch_add(1);
  }
  void ClearRingLoss(uint32_t slot) {
    if (ring_loss_[slot].exchange(0) != 0) ring_loss_gen_.fetch_add(1);
  }
  bool RingLoss(uint32_t slot) const { return ring_loss_[slot].load() != 0; }
  uint64_t RingLossGeneration() const { return ring_loss_gen_.load(); }
  // The marked slots, ascending (read one by one: a mark changing meanwhile raises the
  // generation again).
  std::vector<uint32_t> RingLossSlots() const {
    std::vector<uint32_t> out;
    for (uint32_t s = 0; s < num_slots_; ++s)
      if (RingLoss(s)) out.push_back(s);
    return out;
  }
  uint32_t CountBackups() const { return CountState(SlotState::kBackup); }
  uint32_t CountState(SlotState st) const;
  void EndWrite(uint32_t slot) { inflight_[slot].fetch_sub(1, std::memory_order_seq_cst); }
  // Sets the slot MOVING (at its current epoch) and waits until its admitted writes are done.
  // False if they were not done by `deadline` (the slot stays MOVING), or if the word was
  // neither OWNED nor MOVING (then unchanged: a map change released it meanwhile).
  bool Pause(uint32_t slot, std::chrono::steady_clock::time_point deadline);
  // MOVING or NOT_OWNED -> OWNED (same epoch) in one compare-and-swap (a migration that did not
  // hand the slot over takes it back); false (unchanged) otherwise.
  bool Resume(uint32_t slot);
  // The word from `expected` to `desired` in one compare-and-swap; false (unchanged) if it was
  // not `expected` (a map change stored another meanwhile).
  bool CompareAndSet(uint32_t slot, uint64_t expected, uint64_t desired) {
    return __atomic_compare_exchange_n(&words_[slot], &expected, desired, false, __ATOMIC_SEQ_CST,
                                       __ATOMIC_SEQ_CST);
  }
  uint32_t CountOwned() const;

  // Migration's dirty keys: while a slot is tracked, every write admitted to it records its
  // key (MarkDirty, called by the executor before EndWrite, so Pause also waits for it). At
  // most kMaxDirty distinct keys are kept; past that TakeDirty reports an overflow and the
  // migration copies the slots again.
  static constexpr size_t kMaxDirty = 1 << 20;
  void Track(const std::vector<uint32_t>& slots, bool on);
  // MIGRATE_BEGIN of `slots`: each becomes IMPORTING (at its word's epoch), begun by the
  // connection with QP number `qp_num`, under a ticket of its own (never 0, never reused while
  // this table lives). All or none, atomically with DropImport: false, nothing changed, if any
  // word is no longer the one in `words` (the one the caller checked: a map applied meanwhile
  // may have given the slot a role here). *begun: what UndoImports needs.
  struct ImportBegun {
    std::vector<uint32_t> slots;
    std::vector<uint64_t> words, tickets;  // as checked; the tickets given
    std::vector<uint32_t> prev_importer;   // each slot's import before
    std::vector<uint64_t> prev_ticket;
  };
  [[nodiscard]] bool BeginImports(const std::vector<uint32_t>& slots,
                                  const std::vector<uint64_t>& words, uint32_t qp_num,
                                  ImportBegun* begun);
  // Takes back an import BeginImports began (its BEGIN was refused after all): each slot still
  // under its ticket gets its word, connection and ticket of before (an import it had taken
  // over goes on); a slot another BEGIN took since is left to it.
  void UndoImports(const ImportBegun& begun);
  uint32_t Importer(uint32_t slot) const { return importer_[slot].load(); }
  uint64_t ImportTicket(uint32_t slot) const { return ticket_[slot].load(); }
  // A migration write (MIGRATE_PUT/DELETE) to the slot from the connection `qp_num`: counted in
  // flight (WaitIdle waits for it; EndWrite ends it), then true only if the slot is IMPORTING
  // from that connection (false: nothing left counted).
  bool BeginImportWrite(uint32_t slot, uint32_t qp_num);
  // A batch of MIGRATE_BEGIN's purge (what the slot held before the import): counted in
  // flight, then true only while the slot is IMPORTING under `ticket`; EndWrite ends it. A
  // later MIGRATE_BEGIN of the slot waits for the batch (WaitIdle) and stops the rest.
  bool BeginPurge(uint32_t slot, uint64_t ticket);
  // An abandoned import (server/cluster/import_sweeper.h): the slot becomes `released`
  // (NOT_OWNED) only if it still holds `word` and the import is still the one of `ticket`,
  // atomically with BeginImports (a new import in between keeps the slot). True if released;
  // migration writes admitted before may still be in flight (WaitIdle).
  bool DropImport(uint32_t slot, uint64_t ticket, uint64_t word, uint64_t released);
  // Slots being handed over by this server: map changes leave their words to the migration.
  void SetHandingOver(const std::vector<uint32_t>& slots, bool on);
  bool HandingOver(uint32_t slot) const { return handover_[slot].load() != 0; }
  bool Tracked(uint32_t slot) const { return tracked_[slot].load(std::memory_order_seq_cst) != 0; }
  void MarkDirty(std::string_view key);
  // Moves the recorded keys to *out (cleared first); *overflowed: some were not kept.
  void TakeDirty(std::vector<std::string>* out, bool* overflowed);

  // What MOVED replies name: the map epoch the server went by and each slot's owner id.
  void SetRouting(uint64_t epoch, std::vector<uint32_t> owner_ids);
  void Route(uint32_t slot, uint64_t* epoch, uint32_t* owner_id) const;

 private:
  void UndoLocked(const ImportBegun& begun) REQUIRES(import_mu_);
  uint64_t* const words_;
  const uint32_t num_slots_;
  const uint64_t slot_seed_;
  std::unique_ptr<std::atomic<uint32_t>[]> inflight_;
  std::unique_ptr<std::atomic<uint8_t>[]> tracked_;
  std::unique_ptr<std::atomic<uint8_t>[]> handover_;
  std::unique_ptr<std::atomic<uint8_t>[]> ring_loss_;
  std::atomic<uint64_t> ring_loss_gen_{0};
  std::unique_ptr<std::atomic<uint32_t>[]> reclaiming_;  // deletion batches under way
  std::unique_ptr<std::atomic<uint32_t>[]> importer_;    // the importing connection's QP number
  std::unique_ptr<std::atomic<uint64_t>[]> ticket_;      // the import's ticket; 0: none
  Mutex import_mu_;                                      // BeginImports against DropImport
  uint64_t imports_ GUARDED_BY(import_mu_) = 0;          // the last ticket given
  std::unique_ptr<std::atomic<int64_t>[]> fence_ns_;     // steady_clock ns; 0: none
  std::unique_ptr<std::atomic<uint64_t>[]> seq_;
  std::unique_ptr<std::atomic<uint64_t>[]> digest_;
  struct LastWriteRecord {
    bool has = false;
    uint64_t digest = 0;
    std::string key;
    uint32_t sender = 0;
  };
  static constexpr size_t kLastStripes = 64;
  std::unique_ptr<LastWriteRecord[]> last_;  // guarded by last_mu_[slot % kLastStripes]
  mutable std::unique_ptr<std::mutex[]> last_mu_;
  Mutex dirty_mu_;
  std::unordered_set<std::string> dirty_ GUARDED_BY(dirty_mu_);
  bool dirty_overflow_ GUARDED_BY(dirty_mu_) = false;
  mutable Mutex mu_;
  uint64_t routing_epoch_ GUARDED_BY(mu_) = 0;
  std::vector<uint32_t> owner_ids_ GUARDED_BY(mu_);
};

}  // namespace rkv::cluster

#endif  // RKV_SERVER_CLUSTER_OWNERSHIP_TABLE_H_
