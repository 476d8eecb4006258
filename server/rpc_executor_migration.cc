// SPDX-License-Identifier: Apache-2.0
// The receiving side of a slot migration (docs/cluster.md, "Migration"): MIGRATE_BEGIN marks
// the slots IMPORTING and purges whatever this server still holds of them (left from an earlier
// ownership or an aborted migration); MIGRATE_PUT and MIGRATE_DELETE apply the source's copy,
// only to keys of IMPORTING slots (never to a slot this server owns, so a late or forged copy
// cannot overwrite a client's write), and only from the connection that began the import. The slots
// become OWNED when the map naming this server arrives (ClusterNode::Apply). Servers prove the
// cluster's token to each other as clients do.
#include <chrono>
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
    if (req.key.size() % 4 != 0 || n == 0 || n > 256 || !req.value.empty())
      return Status(Code::kBadRequest, "MIGRATE_BEGIN takes 1..256 u32 slots as its key");
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
    for (size_t i = 0; i < n; ++i)
      if (!owners_->BeginImport(slots[i], qp_num, words[i]))
        return Status(Code::kUnavailable, "MIGRATE_BEGIN: slot " + std::to_string(slots[i]) +
                                              " changed role here meanwhile; ask again");
    // A REPLICATE admitted while a slot was still a BACKUP here finishes before the purge scan
    // (else it could put back an entry after it).
    const auto idle_by = std::chrono::steady_clock::now() + std::chrono::seconds(5);
    for (uint32_t v : slots)
      if (!owners_->WaitIdle(v, idle_by))
        return Status(Code::kUnavailable, "MIGRATE_BEGIN: slot " + std::to_string(v) +
                                              " still has a replicated write running");
    std::vector<std::string> stale;
    cluster::ScanSlots(*table_, *owners_, in_set, [&](const std::string& k, const std::string&) {
      stale.push_back(k);
      return true;
    });
    for (const std::string& k : stale) (void)table_->Delete(k);
    counters_->migrations_in.fetch_add(1, std::memory_order_relaxed);
    counters_->migration_purged.fetch_add(stale.size(), std::memory_order_relaxed);
    *payload = "importing " + std::to_string(n) + " slot(s); purged " +
               std::to_string(stale.size()) + " stale entries";
    return Status::Ok();
  }
  const uint32_t slot = owners_->SlotOf(req.key);
  const SlotState st = cluster::WordState(owners_->Word(slot));
  if (st != SlotState::kImporting)
    return Status(Code::kInvalidArgument, "migration write for slot " + std::to_string(slot) +
                                              ", which is " + cluster::SlotStateName(st) +
                                              " here, not IMPORTING");
  if (owners_->Importer(slot) != qp_num)
    return Status(Code::kInvalidArgument, "migration write for slot " + std::to_string(slot) +
                                              " from a connection that did not begin its import");
  counters_->migrated_keys_in.fetch_add(1, std::memory_order_relaxed);
  if (req.op == wire::Op::kMigratePut) return table_->Put(req.key, req.value);
  Status s = table_->Delete(req.key);
  return s.IsNotFound() ? Status::Ok() : s;
}

}  // namespace rkv
