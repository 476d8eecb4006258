// SPDX-License-Identifier: Apache-2.0
// ClusterNode: applying each new map to this server's ownership words (docs/cluster.md,
// "Ownership words", "Failover and re-replication"; the argument in docs/design.md, "Replicas
// and failover"). Per slot, by this server's role in the map:
//  - primary: OWNED at the map's epoch; but a promotion (the slot was a backup here, or another
//    server was its primary in the last map, with replicas) goes through PROMOTING: neither
//    readable nor writable until the promotion fence passed (map_lease.h), the replicated
//    writes admitted as a backup finished and the backups the map kept were resynced
//    (Replicator::Resync); the promoter thread then stores OWNED;
//  - backup: BACKUP (sequence unset: it takes the primary's next number; also when it stays a
//    backup under a new primary: a HANDOVER, or a failover that kept it);
//  - none: NOT_OWNED (its entries freed by the slot reclaimer, server/cluster/slot_reclaimer.h).
// Slots a migration is handing over keep their words (the migration sets them), unless the map
// no longer names this server as their primary: a HANDOVER's commit (paused words, this server
// now their backup) makes them BACKUP; otherwise (a failover while it ran) they are released
// here, and the migration's resume leaves them (it checks the routing, installed first).
// A memory-only server restarted empty does not take the roles it held before (stale_role_)
// until a copy reaches it (IMPORTING) or the map drops them.
#include <glog/logging.h>

#include <algorithm>

#include "common/cluster/map_lease.h"
#include "common/wire.h"
#include "server/cluster/cluster_node.h"
#include "server/cluster/ring_revocations.h"

namespace rkv::cluster {

void ClusterNode::Apply(const SlotMap& map) {
  if (map.num_slots() != owners_->num_slots() || map.slot_seed() != slot_seed_) {
    LOG(ERROR) << "cluster map of epoch " << map.epoch()
               << " has another slot count or seed than this server's; not applied";
    return;
  }
  senders_.Update(map);  // names resolved here, outside the lock
  std::lock_guard<std::mutex> words(words_mu_);
  const uint32_t my_id = membership_ ? membership_->id() : 0;
  // Log rings (docs/replication-rings.md): the primaries whose role towards this backup the
  // map changes are cut off first, and what they placed is applied under the map applied so
  // far; no ring is granted until the new map is applied completely (EndMap, below).
  if (rings_) rings_->BeginMap(RingWritersToRevoke(last_map_.get(), map, my_id));
  // The replicator and the routing learn the map before any word changes.
  if (replicator_) replicator_->SetMap(map);
  const uint16_t me = membership_ ? map.IndexOf(my_id) : kUnassigned;
  std::vector<uint32_t> owner_ids(map.num_slots(), wire::kNoOwner);
  for (uint32_t slot = 0; slot < map.num_slots(); ++slot) {
    const uint16_t o = map.OwnerIndex(slot);
    if (o != kUnassigned) owner_ids[slot] = map.servers()[o].id;
  }
  // Still a backup under a new primary: a HANDOVER (every replica's entries of the slot are
  // equal), or a failover that kept this backup (the promoted primary resyncs it before it
  // takes writes: Replicator::Resync). The new primary numbers on from its own last number,
  // which this backup may not share (it may have joined with no write since), so it takes the
  // next number, whichever it is. Before the routing names the new primary: its first
  // REPLICATE (and its resync's query) is admitted only after that.
  for (uint32_t slot = 0; last_map_ && me != kUnassigned && slot < map.num_slots(); ++slot) {
    const uint16_t was = last_map_->OwnerIndex(slot), is = map.OwnerIndex(slot);
    // A map skipped (the watcher applies the newest) may have changed the primary and back.
    const bool skipped = map.epoch() > last_map_->epoch() + 1;
    if (was == kUnassigned || is == kUnassigned ||
        WordState(owners_->Word(slot)) != SlotState::kBackup ||
        (last_map_->servers()[was].id == map.servers()[is].id && !skipped))
      continue;
    for (uint16_t r = 1; r < map.replicas(); ++r)
      if (map.OwnerIndex(slot, r) == me) owners_->SetSequence(slot, OwnershipTable::kSequenceUnset);
  }
  owners_->SetRouting(map.epoch(), owner_ids);
  uint32_t gained = 0, lost = 0, promoted = 0, backups = 0;
  const auto now = std::chrono::steady_clock::now();
  for (uint32_t slot = 0; slot < map.num_slots(); ++slot) {
    int role = -1;  // this server's replica index for the slot
    for (uint16_t r = 0; me != kUnassigned && r < map.replicas(); ++r)
      if (map.OwnerIndex(slot, r) == me) role = r;
    const uint64_t word = owners_->Word(slot);
    const SlotState st = WordState(word);
    const bool held =
        st == SlotState::kOwned || st == SlotState::kMoving || st == SlotState::kPromoting;
    if (role < 0 && slot < stale_role_.size()) stale_role_[slot] = 0;
    const bool stale = slot < stale_role_.size() && stale_role_[slot] != 0;
    if (owners_->HandingOver(slot)) {
      if (role > 0 && st == SlotState::kMoving && map.replicas() > 1) {
        // A HANDOVER's commit (migrator_roles.cc): the only map that names a primary as a
        // backup of its own slot. Its writes are paused and idle and its table equals the new
        // primary's: a backup that takes the new primary's next number.
        owners_->SetSequence(slot, OwnershipTable::kSequenceUnset);
        owners_->ClearLastWrite(slot);  // its table equals the new primary's
        owners_->Set(slot, OwnerWord(map.epoch(), SlotState::kBackup));
        owners_->SetHandingOver({slot}, false);  // later maps treat it as any backup
        ++backups;
      } else if (role != 0 && held) {  // failed over while a migration ran
        owners_->Set(slot, OwnerWord(WordEpoch(word), SlotState::kNotOwned));
        owners_->ClearRingLoss(slot);  // no replica here any more
        ++lost;
      } else if (role == 0 && st == SlotState::kMoving && map.replicas() > 1 &&
                 (!last_map_ || map.epoch() > last_map_->epoch() + 1)) {
        // Primary still, but maps were skipped: the HANDOVER may have been committed, the new
        // primary taken writes this server never got (its word was not BACKUP) and failed, and
        // this server been promoted back with a backup that holds them. Promoted as any backup
        // is, resync included; the migration's resume then finds the word changed and leaves
        // it (Resume takes MOVING only).
        owners_->FenceWrites(slot, now + PromotionFence());
        owners_->Set(slot, OwnerWord(map.epoch(), SlotState::kPromoting));
        promoting_.push_back({slot, map.epoch(), now + PromotionFence(), {}, true, wire::kNoOwner});
        ++promoted;
      }
      continue;
    }
    if (role == 0) {
      if (held || stale) continue;
      uint32_t before = wire::kNoOwner;  // the primary of the last map applied
      if (last_map_ && last_map_->OwnerIndex(slot) != kUnassigned)
        before = last_map_->servers()[last_map_->OwnerIndex(slot)].id;
      if (map.replicas() > 1 &&
          (st == SlotState::kBackup || (before != wire::kNoOwner && before != my_id))) {
        // A HANDOVER: the next map (none skipped) names the former primary a backup here.
        bool handover = false;
        for (uint16_t r = 1; last_map_ && map.epoch() == last_map_->epoch() + 1 &&
                             before != wire::kNoOwner && r < map.replicas();
             ++r)
          if (const ServerEntry* e = map.Owner(slot, r); e != nullptr && e->id == before)
            handover = true;
        owners_->FenceWrites(slot, now + PromotionFence());
        owners_->Set(slot, OwnerWord(map.epoch(), SlotState::kPromoting));
        const bool skipped = last_map_ && map.epoch() > last_map_->epoch() + 1;
        promoting_.push_back({slot,
                              map.epoch(),
                              now + PromotionFence(),
                              {},
                              !handover,
                              skipped ? wire::kNoOwner : before});
        ++promoted;
      } else {
        owners_->Set(slot, OwnerWord(map.epoch(), SlotState::kOwned));
        // Gained from no replica (or an import): a mark a record set as the slot was released
        // here (a forged one, applied while the release ran) is nothing of this replica's.
        owners_->ClearRingLoss(slot);
        ++gained;
      }
    } else if (role > 0) {
      if (st == SlotState::kBackup || (stale && st != SlotState::kImporting)) continue;
      // A new backup: whatever the copy (or an empty new slot) left; it accepts the primary's
      // next sequence number, whichever it is.
      owners_->SetSequence(slot, OwnershipTable::kSequenceUnset);
      owners_->ClearLastWrite(slot);  // none applied since the copy
      owners_->ClearRingLoss(slot);   // the copy holds everything
      owners_->Set(slot, OwnerWord(map.epoch(), SlotState::kBackup));
      if (slot < stale_role_.size()) stale_role_[slot] = 0;
      ++backups;
    } else if (held || st == SlotState::kBackup) {
      const uint64_t released = OwnerWord(WordEpoch(word), SlotState::kNotOwned);
      owners_->Set(slot, released);
      owners_->ClearRingLoss(slot);                          // no replica here any more
      if (reclaimer_) reclaimer_->Released(slot, released);  // its entries are no replica's
      ++lost;
    }
  }
  last_map_ = std::make_shared<const SlotMap>(map);
  applied_epoch_.store(map.epoch());
  // Every word is set: writers may write at this epoch. No ring while a role is stale (a
  // record of such a slot could only be refused after it was acknowledged).
  if (rings_)
    rings_->EndMap(map.epoch(), std::none_of(stale_role_.begin(), stale_role_.end(),
                                             [](uint8_t stale) { return stale != 0; }));
  promotions_.fetch_add(promoted);
  if (promoted > 0) promote_cv_.notify_all();
  LOG(INFO) << "cluster map epoch " << map.epoch() << " applied: " << gained << " slot(s) gained, "
            << promoted << " promoted, " << backups << " new backup(s), " << lost << " released, "
            << owners_->CountOwned() << " owned, " << owners_->CountBackups() << " backups";
}

void ClusterNode::Promote() {
  std::unique_lock<std::mutex> l(words_mu_);
  while (!stop_) {
    auto next = std::chrono::steady_clock::now() + std::chrono::seconds(1);
    const auto now = std::chrono::steady_clock::now();
    std::vector<Promotion> due;  // fenced and idle: resynced (outside the lock), then OWNED
    for (size_t i = 0; i < promoting_.size();) {
      const Promotion& p = promoting_[i];
      if (owners_->Word(p.slot) != OwnerWord(p.epoch, SlotState::kPromoting)) {
        promoting_.erase(promoting_.begin() + long(i));  // changed since: nothing to do
        continue;
      }
      // Also the former primary's revoked log rings drained and freed (one holding a record
      // that waits or was kept holds the slot: unavailable, never without that write).
      // And never a slot whose replica here may lack a write its ring acknowledged
      // (OwnershipTable::RingLoss): unavailable rather than without it.
      // The rings first: the drainer marks a slot before it frees the ring whose record it
      // refused, so a mark from the former primary's last records is seen once they are gone.
      if (now >= p.after && now >= p.retry &&
          !(rings_ &&
            rings_->HasRevoked(p.former == wire::kNoOwner ? RingDrainer::kAnyWriter : p.former)) &&
          !owners_->RingLoss(p.slot) && owners_->WaitIdle(p.slot, now)) {
        due.push_back(p);
      } else {
        next = std::min(next, std::max({p.after, p.retry, now + std::chrono::milliseconds(10)}));
      }
      ++i;
    }
    if (due.empty()) {
      promote_cv_.wait_until(l, next);
      continue;
    }
    // Resync asks the backups and writes to them: not under words_mu_ (Apply must go on, and
    // a map that drops an unreachable backup is what ends a resync that cannot pass). Each
    // slot takes reads and writes as soon as its own resync passed.
    std::vector<uint32_t> unreachable;  // backups that failed in transport this round
    uint32_t done = 0;
    for (const Promotion& d : due) {
      if (stop_) break;
      const uint64_t word = OwnerWord(d.epoch, SlotState::kPromoting);
      Status s;
      if (d.resync && replicator_) {
        l.unlock();
        s = replicator_->Resync(d.slot, word, &unreachable);
        l.lock();
      }
      auto it = std::find_if(promoting_.begin(), promoting_.end(), [&](const Promotion& p) {
        return p.slot == d.slot && p.epoch == d.epoch;
      });
      if (it == promoting_.end()) continue;
      if (!s.ok()) {
        LOG_EVERY_N(WARNING, 20) << "cluster: promoted slot " << d.slot
                                 << " not yet resynced (tried again): " << s.ToString();
        it->retry = std::chrono::steady_clock::now() + std::chrono::milliseconds(kResyncRetryMs);
        continue;
      }
      // Marked during the resync: never OWNED (the resync itself refuses a marked slot).
      if (owners_->RingLoss(d.slot)) {
        it->retry = std::chrono::steady_clock::now() + std::chrono::milliseconds(kResyncRetryMs);
        continue;
      }
      // Unless a map changed the word meanwhile (then the next pass drops it).
      if (owners_->CompareAndSet(d.slot, word, OwnerWord(d.epoch, SlotState::kOwned))) {
        promoting_.erase(it);
        ++done;
      }
    }
    if (done > 0) LOG(INFO) << "cluster: " << done << " promoted slot(s) now take reads and writes";
  }
}

}  // namespace rkv::cluster
