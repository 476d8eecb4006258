// SPDX-License-Identifier: Apache-2.0
// Migrator: what each record kind does to the map, and the hand-over of a primary's role to
// one of its backups (HANDOVER; docs/cluster.md, "Rebalancing replicated slots"; the argument
// in docs/design.md, "Replicas and failover").
//  - MOVE: the slots' primary becomes the target.
//  - ADD_REPLICA: the target fills the first free backup place.
//  - REPLACE_BACKUP: the target takes the replaced backup's place (one transaction: the slot
//    never has fewer backups than before; the replaced server releases the slot when it
//    applies the map).
//  - HANDOVER: no copy. The target is already a backup of every slot, so it holds every write
//    this primary acknowledged. This server pauses the slots' writes (MOVING) and waits for
//    the admitted ones, resolves each slot's kept write (a write of unknown outcome: the only
//    way a backup can hold a write this table lacks), and then, with the slots idle and the
//    tables of every replica equal, commits the map with the target as primary and this server
//    in the target's backup place. ClusterNode::Apply turns the paused words into BACKUP; the
//    target promotes its words (PROMOTING, then OWNED after the promotion fence, as in a
//    failover). Any failure before the commit resumes the slots (OWNED).
#include <glog/logging.h>

#include <chrono>
#include <string>

#include "common/cluster/map_lease.h"
#include "common/cluster/slot_map.h"
#include "server/cluster/migrator.h"

namespace rkv::cluster {

namespace {
constexpr int kPauseWaitMs = 5000;  // for writes admitted before the pause
// The target's backup place (1..replicas-1) in slot, or 0 when it is not a backup of it.
uint16_t BackupPlace(const SlotMap& map, uint32_t slot, uint16_t server) {
  for (uint16_t r = 1; server != kUnassigned && r < map.replicas(); ++r)
    if (map.OwnerIndex(slot, r) == server) return r;
  return 0;
}
bool HoldsReplica(const SlotMap& map, uint32_t slot, uint16_t server) {
  return server != kUnassigned &&
         (map.OwnerIndex(slot) == server || BackupPlace(map, slot, server));
}
}  // namespace

std::string Migrator::RolesRefused(const MigrationRecord& rec, const SlotMap& map,
                                   uint32_t slot) const {
  const uint16_t to = map.IndexOf(rec.to_id);
  const std::string s = "slot " + std::to_string(slot) + ": ";
  switch (rec.kind) {
    case MigrationRecord::kMove:
      return {};
    case MigrationRecord::kAddReplica:
      return map.replicas() > 1 ? std::string() : s + "the map has no backups";
    case MigrationRecord::kReplaceBackup:
      if (BackupPlace(map, slot, map.IndexOf(rec.replaced_id)) == 0)
        return s + "server " + std::to_string(rec.replaced_id) + " is not its backup";
      if (HoldsReplica(map, slot, to))
        return s + "server " + std::to_string(rec.to_id) + " already holds a replica";
      return {};
    case MigrationRecord::kHandover:
      if (BackupPlace(map, slot, to) == 0)
        return s + "server " + std::to_string(rec.to_id) + " is not its backup";
      return {};
  }
  return s + "unknown kind";
}

bool Migrator::EditMap(const MigrationRecord& rec, SlotMap* map) const {
  const uint16_t me = map->IndexOf(o_.my_id), to = map->IndexOf(rec.to_id);
  for (uint32_t slot : rec.slots) {
    if (rec.kind == MigrationRecord::kMove) {
      (void)map->Assign(slot, 0, to);
      continue;
    }
    if (map->OwnerIndex(slot) != me) return false;  // no longer ours
    if (rec.kind == MigrationRecord::kAddReplica) {
      uint16_t r = 1;  // the first free backup place
      while (r < map->replicas() && map->OwnerIndex(slot, r) != kUnassigned) ++r;
      if (r == map->replicas() || !map->Assign(slot, r, to)) return false;
    } else if (rec.kind == MigrationRecord::kReplaceBackup) {
      const uint16_t r = BackupPlace(*map, slot, map->IndexOf(rec.replaced_id));
      if (r == 0 || !map->Assign(slot, r, kUnassigned) || !map->Assign(slot, r, to)) return false;
    } else {
      const uint16_t r = BackupPlace(*map, slot, to);
      if (r == 0 || !map->Assign(slot, r, kUnassigned) || !map->Assign(slot, 0, to) ||
          !map->Assign(slot, r, me))
        return false;
    }
  }
  return true;
}

Migrator::Outcome Migrator::OutcomeIn(const MigrationRecord& rec, const SlotMap& map) const {
  const uint16_t me = map.IndexOf(o_.my_id), to = map.IndexOf(rec.to_id);
  const uint32_t slot = rec.slots[0];
  switch (rec.kind) {
    case MigrationRecord::kMove:
    case MigrationRecord::kHandover:
      if (to != kUnassigned && map.OwnerIndex(slot) == to) return Outcome::kCommitted;
      if (me != kUnassigned && map.OwnerIndex(slot) == me) return Outcome::kCancelled;
      if (rec.kind == MigrationRecord::kHandover) return Outcome::kCancelled;  // failed over
      return Outcome::kUnknown;
    case MigrationRecord::kAddReplica:
    case MigrationRecord::kReplaceBackup:
      // No longer the primary: whoever added the target, it was not us.
      if (me == kUnassigned || map.OwnerIndex(slot) != me) return Outcome::kCancelled;
      return BackupPlace(map, slot, to) != 0 ? Outcome::kCommitted : Outcome::kCancelled;
  }
  return Outcome::kCancelled;
}

void Migrator::Handover(const MigrationRecord& rec, int64_t rec_revision) {
  {
    bool live = false;  // the commit compares the target's member record (Commit)
    EtcdKv t;
    Status r =
        etcd_->Get(Key(("servers/" + std::to_string(rec.to_id)).c_str()), &live, &t, nullptr);
    if (!r.ok() || !live) {
      Resume(rec, rec_revision,
             "target server " + std::to_string(rec.to_id) + " is not live" +
                 (r.ok() ? std::string() : ": " + r.ToString()));
      return;
    }
    target_record_ = t.create_revision;
  }
  // A kept write is the one way a backup may hold a write this table lacks: each is resolved
  // first (resent and applied here), and none may be left once the slots are paused and idle.
  for (uint32_t slot : rec.slots)
    if (Stopping() || (o_.settle_kept && !o_.settle_kept(slot))) {
      Resume(rec, rec_revision,
             "slot " + std::to_string(slot) + " holds a write of unknown outcome that could " +
                 "not be settled yet");
      return;
    }
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(kPauseWaitMs);
  for (uint32_t slot : rec.slots)
    if (!owners_->Pause(slot, deadline)) {
      Resume(rec, rec_revision,
             "writes admitted before the pause did not finish in time (or a map change "
             "released a slot)");
      return;
    }
  for (uint32_t slot : rec.slots) {
    if (o_.has_kept && o_.has_kept(slot)) {
      Resume(rec, rec_revision,
             "slot " + std::to_string(slot) + " holds a write of unknown outcome");
      return;
    }
    if (o_.lacks_write && o_.lacks_write(slot)) {
      Resume(rec, rec_revision,
             "slot " + std::to_string(slot) +
                 ": this server's table lacks a write its backups hold (it had no room for "
                 "it), not reverted (more than 16 such keys, a revert that did not reach "
                 "every backup, or one kept after the settling); tried again later");
      return;
    }
  }
  const Outcome outcome = Commit(rec, rec_revision);
  if (outcome == Outcome::kUnknown) return;  // stopping: the words stay paused (MOVING)
  if (outcome == Outcome::kCancelled) {
    Resume(rec, rec_revision, "the migration record changed before the hand-over (cancelled)");
    return;
  }
  // ClusterNode::Apply turns the paused words into BACKUP when it applies the committed map.
  while (o_.applied_epoch && o_.applied_epoch() < committed_epoch_ && !Stopping()) Pause(20);
  // A word still paused now (Apply promotes, resync included, a paused primary that skipped
  // maps and is named primary again: PROMOTING, left alone here; this is the fallback): this
  // server skipped that map and applied a newer one that names
  // it primary again (the new primary died at once and it was promoted back). No write was
  // acknowledged meanwhile (they all needed this server, which refused them while paused), so
  // its table holds every acknowledged write: it takes the slot's writes again (ResumeSlot
  // checks the applied map; a word Apply changed is left as it is).
  // Its writes wait out the promotion fence first, as a promoted slot's do: clients of the
  // map that named the other server primary may read there until their map lease ran out.
  for (uint32_t slot : rec.slots)
    if (WordState(owners_->Word(slot)) == SlotState::kMoving) {
      owners_->FenceWrites(slot, std::chrono::steady_clock::now() + PromotionFence());
      ResumeSlot(slot);
    }
  owners_->SetHandingOver(rec.slots, false);
  done_.fetch_add(1);
  LOG(INFO) << "migration " << rec.nonce << ": primary of " << rec.slots.size()
            << " slot(s) handed over to server " << rec.to_id << "; this server is their backup";
}

}  // namespace rkv::cluster
