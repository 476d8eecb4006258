// SPDX-License-Identifier: Apache-2.0
// The receiving side of a slot migration (docs/cluster.md, "Migration"): MIGRATE_BEGIN marks
// the slots IMPORTING and purges whatever this server still holds of them (left from an earlier
// ownership or an aborted migration); MIGRATE_PUT and MIGRATE_DELETE apply the source's copy,
// only to keys of IMPORTING slots (never to a slot this server owns, so a late or forged copy
// cannot overwrite a client's write), and only from the connection that began the import. The slots
// become OWNED when the map naming this server arrives (ClusterNode::Apply). Servers prove the
// cluster's token to each other as clients do.
#include <chrono>
#include <map>
#include <vector>

#include "server/cluster/slot_scan.h"
#include "server/rpc_executor.h"

namespace rkv {

using cluster::SlotState;

Status RpcExecutor::ExecuteMigration(const wire::Request& req, uint32_t qp_num,
                                     std::string* payload) {
  if (owners_ == nullptr)
    return Status(Code::kInvalidArgument, "this server is not in a cluster: no migrations");
  if (req.op == wire::Op::kMigrateBegin) {
    const size_t n = req.key.size() / 4;
    if (req.key.size() % 4 != 0 || n == 0 || n > 256 || req.value.size() != 8)
      return Status(Code::kBadRequest,
                    "MIGRATE_BEGIN takes 1..256 u32 slots as its key and the migration record's "
                    "u64 nonce as its value");
    uint64_t nonce = 0;
    for (int b = 0; b < 8; ++b) nonce |= uint64_t(uint8_t(req.value[b])) << (8 * b);
    std::vector<uint32_t> slots(n);
    std::vector<uint64_t> words(n);
    std::vector<bool> in_set(owners_->num_slots(), false);
    for (size_t i = 0; i < n; ++i) {
      uint32_t v = 0;
      for (int b = 0; b < 4; ++b) v |= uint32_t(uint8_t(req.key[4 * i + b])) << (8 * b);
      if (v >= owners_->num_slots())
        return Status(Code::kBadRequest,
                      "MIGRATE_BEGIN: slot " + std::to_string(v) + " out of range");
      if (in_set[v])
        return Status(Code::kBadRequest,
                      "MIGRATE_BEGIN: slot " + std::to_string(v) + " listed twice");
      words[i] = owners_->Word(v);
      const SlotState st = cluster::WordState(words[i]);
      // A backup of the slot here is never a re-replication's target either (the planner picks
      // servers holding no replica): a late BEGIN from a deposed primary must not wipe it.
      if (st == SlotState::kOwned || st == SlotState::kMoving || st == SlotState::kPromoting ||
          st == SlotState::kBackup)
        return Status(Code::kInvalidArgument, "MIGRATE_BEGIN: slot " + std::to_string(v) + " is " +
                                                  cluster::SlotStateName(st) +
                                                  " here; refusing to import over it");
      slots[i] = v;
      in_set[v] = true;
    }
    // Only the source of the migration etcd holds now, for its slots: a BEGIN of a record
    // replaced or cancelled (a source that stalled past it) must not take over or purge a
    // newer import (docs/design.md, "Abandoned imports"). Checked again once the slots are
    // IMPORTING under this BEGIN's tickets: a newer record made after that second read begins
    // with a newer BEGIN, which stops this one's purge (BeginPurge).
    if (!import_check_)
      return Status(Code::kInvalidArgument, "MIGRATE_BEGIN: this server cannot check migrations");
    Status c = import_check_(nonce, slots);
    if (!c.ok()) return Status(c.code(), "MIGRATE_BEGIN: " + c.message());
    cluster::OwnershipTable::ImportBegun begun;
    if (!owners_->BeginImports(slots, words, qp_num, &begun))
      return Status(Code::kUnavailable,
                    "MIGRATE_BEGIN: a slot changed role here meanwhile; nothing imported");
    c = import_check_(nonce, slots);
    if (!c.ok()) {  // an import this took over goes on
      owners_->UndoImports(begun);
      return Status(c.code(), "MIGRATE_BEGIN: " + c.message());
    }
    // A REPLICATE admitted while a slot was still a BACKUP here, or an older import's write or
    // purge batch, finishes before the purge scan (else it could put back an entry after it).
    const auto idle_by = std::chrono::steady_clock::now() + std::chrono::seconds(5);
    for (uint32_t v : slots)
      if (!owners_->WaitIdle(v, idle_by))
        return Status(Code::kUnavailable,
                      "MIGRATE_BEGIN: slot " + std::to_string(v) + " still has a write running");
    std::map<uint32_t, uint64_t> ticket_of;
    for (size_t i = 0; i < n; ++i) ticket_of[slots[i]] = begun.tickets[i];
    size_t purged = 0;
    for (const auto& [slot, keys] : cluster::KeysBySlot(*table_, *owners_, in_set)) {
      const uint32_t v = slot;
      const uint64_t t = ticket_of[slot];
      bool complete = false;
      purged += cluster::DeleteHeld(
          table_, keys, [&] { return owners_->BeginPurge(v, t); }, [&] { owners_->EndWrite(v); },
          nullptr, &complete);
      if (!complete)  // another BEGIN took the slot (or a map changed it): this import is over
        return Status(Code::kUnavailable, "MIGRATE_BEGIN: slot " + std::to_string(v) +
                                              " was taken by another import during the purge");
    }
    counters_->migrations_in.fetch_add(1, std::memory_order_relaxed);
    counters_->migration_purged.fetch_add(purged, std::memory_order_relaxed);
    *payload = "importing " + std::to_string(n) + " slot(s); purged " + std::to_string(purged) +
               " stale entries";
    return Status::Ok();
  }
  const uint32_t slot = owners_->SlotOf(req.key);
  const SlotState st = cluster::WordState(owners_->Word(slot));
  if (st != SlotState::kImporting)
    return Status(Code::kInvalidArgument, "migration write for slot " + std::to_string(slot) +
                                              ", which is " + cluster::SlotStateName(st) +
                                              " here, not IMPORTING");
  if (!owners_->BeginImportWrite(slot, qp_num))
    return Status(Code::kInvalidArgument, "migration write for slot " + std::to_string(slot) +
                                              " from a connection that did not begin its import");
  counters_->migrated_keys_in.fetch_add(1, std::memory_order_relaxed);
  Status s =
      req.op == wire::Op::kMigratePut ? table_->Put(req.key, req.value) : table_->Delete(req.key);
  owners_->EndWrite(slot);
  return s.IsNotFound() && req.op == wire::Op::kMigrateDelete ? Status::Ok() : s;
}

}  // namespace rkv
