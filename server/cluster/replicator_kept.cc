// SPDX-License-Identifier: Apache-2.0
// Replicator: a slot's kept write (a write of unknown outcome, or one the backups applied and
// this table did not; server/cluster/replicator.h): resolved before the slot's next write
// (ResolveKept, from Write) or, for re-replication, without one (Settle).
#include <glog/logging.h>

#include <algorithm>
#include <chrono>

#include "server/cluster/replicator.h"

namespace rkv::cluster {

void Replicator::DropKept(uint32_t slot) {
  if (!pending_[slot]) return;
  pending_[slot].reset();
  kept_.fetch_sub(1, std::memory_order_relaxed);
}

void Replicator::NoteLacking(uint32_t slot, std::string_view key) {
  const Pending* p = pending_[slot].get();
  if (p == nullptr || !p->delivered || p->key == key) return;
  auto& l = lacking_[slot];
  if (!l) lacking_slots_.fetch_add(1, std::memory_order_relaxed);
  if (!l || l->tenure != p->tenure) l = std::make_unique<Lacking>(Lacking{p->tenure, {}, false});
  if (std::find(l->keys.begin(), l->keys.end(), p->key) != l->keys.end()) return;
  if (l->keys.size() < kMaxLacking)
    l->keys.push_back(p->key);
  else
    l->overflow = true;
}

void Replicator::ClearLacking(uint32_t slot, std::string_view key) {
  auto& l = lacking_[slot];
  if (!l) return;
  l->keys.erase(std::remove(l->keys.begin(), l->keys.end(), key), l->keys.end());
  if (l->keys.empty() && !l->overflow) {
    l.reset();
    lacking_slots_.fetch_sub(1, std::memory_order_relaxed);
  }
}

Status Replicator::Revert(uint32_t slot, const std::string& key, SteadyClock::time_point deadline) {
  std::string value;
  Status g = table_->Get(key, &value);
  if (!g.ok() && !g.IsNotFound()) return g;
  const bool put = g.ok();
  Status s = WriteLocked(
      slot, put, key, put ? std::string_view(value) : std::string_view(),
      [] { return Status::Ok(); }, deadline);
  if (s.ok()) {
    reverts_.fetch_add(1, std::memory_order_relaxed);
    LOG(INFO) << "slot " << slot << ": a write this table had no room for is replaced on the "
              << "backups by this table's value of its key (outcome unknown: never applied)";
  }
  return s;
}

bool Replicator::LacksWrite(uint32_t slot) {
  std::unique_lock<SlotLock> l(slot_mu_[slot], std::defer_lock);
  if (!l.try_lock_until(SteadyClock::now() + std::chrono::milliseconds(100))) return true;
  DropStaleLacking(slot, WordEpoch(owners_->Word(slot)));
  return lacking_[slot] != nullptr;
}

bool Replicator::HasKept(uint32_t slot) {
  std::unique_lock<SlotLock> l(slot_mu_[slot], std::defer_lock);
  if (!l.try_lock_until(SteadyClock::now() + std::chrono::milliseconds(100))) return true;
  return pending_[slot] != nullptr;
}

Status Replicator::ResolveKept(uint32_t slot, const Snapshot& snap, std::string_view key,
                               SteadyClock::time_point deadline, bool* superseded) {
  *superseded = false;
  // A kept write belongs to the stint as primary it was made in (the word's epoch: a new stint
  // always has a newer one); a later stint's data already settled it (the next primary's).
  if (pending_[slot] && pending_[slot]->tenure != WordEpoch(owners_->Word(slot))) DropKept(slot);
  if (!pending_[slot]) return Status::Ok();
  Pending& p = *pending_[slot];
  bool sent = false;
  std::string why;
  // Resent until it reached every backup once; never after (later numbers follow it there).
  Status r =
      p.delivered ? Status::Ok() : SendAll(slot, snap, &p.msg, p.value, deadline, &sent, &why);
  if (r.ok() && !Primary(slot, SnapshotOf(slot))) {
    r = Status(Code::kUnavailable, "deposed");
    why = "this server is no longer its primary";
  }
  if (!r.ok()) {
    failures_.fetch_add(1, std::memory_order_relaxed);
    return Status(Code::kUnavailable,
                  "the write was not applied: slot " + std::to_string(slot) +
                      "'s earlier write of unknown outcome is not on every replica yet (" + why +
                      ": " + r.message() + ")");
  }
  p.delivered = true;
  // On every backup now. A write to the same key supersedes it here: its local apply is left
  // to the new write, which replaces it on every replica (until that succeeds it stays
  // kept). Otherwise it is applied here; if this table still refuses it (no room for its
  // value) it stays kept and the slot's writes go on: writes to other keys commute with it,
  // and the next write of its key supersedes it, so a value this table has no room for
  // never blocks the slot, nor a DELETE that would make room.
  *superseded = p.key == key;
  if (*superseded) return Status::Ok();
  Status a = p.put ? table_->Put(p.key, p.value) : table_->Delete(p.key);
  if (a.ok() || a.IsNotFound()) {
    // Inside an admitted write: a re-replication copy ships this key too.
    if (owners_->Tracked(slot)) owners_->MarkDirty(p.key);
    DropKept(slot);
  } else {
    LOG_EVERY_N(WARNING, 100) << "slot " << slot
                              << ": a kept write still does not apply here: " << a.ToString();
  }
  return Status::Ok();
}

bool Replicator::Settle(uint32_t slot) {
  if (slot >= owners_->num_slots()) return false;
  // None anywhere (one kept later is caught after the pause).
  if (kept_.load() == 0 && lacking_slots_.load() == 0) return true;
  // The slot's lock only briefly (a slot whose writes wait on a slow backup is settled by the
  // next try); the resend itself gets the writes' usual max_wait_ms.
  if (!HasKept(slot) && !LacksWrite(slot)) return true;
  const auto deadline = SteadyClock::now() + std::chrono::milliseconds(o_.max_wait_ms);
  // Admitted as a client's write is (an OWNED word only; a hand-over or promotion waits for it).
  uint64_t word = 0;
  if (!owners_->BeginWrite(slot, &word)) return false;
  struct End {
    OwnershipTable* o;
    uint32_t slot;
    ~End() { o->EndWrite(slot); }
  } end{owners_, slot};
  std::unique_lock<SlotLock> l(slot_mu_[slot], std::defer_lock);
  if (!l.try_lock_until(SteadyClock::now() + std::chrono::milliseconds(100))) return false;
  const uint64_t tenure = WordEpoch(owners_->Word(slot));
  DropStaleLacking(slot, tenure);
  auto lacks = [&] { return lacking_[slot] != nullptr; };
  if (!pending_[slot] && !lacks()) return true;
  const Snapshot snap = SnapshotOf(slot);
  if (!Primary(slot, snap)) return false;
  if (snap.backups.empty() && lacks()) {  // no backup holds anything this table lacks
    lacking_[slot].reset();
    lacking_slots_.fetch_sub(1, std::memory_order_relaxed);
  }
  bool superseded = false;
  if (!ResolveKept(slot, snap, std::string_view(), deadline, &superseded).ok()) return false;
  // Left: a delivered kept write this table has no room for, and delivered ones of other keys
  // it lacks. The backups are given this table's values of those keys instead (Revert), so a
  // copy made from this table, or a hand-over, leaves every replica with what this table holds.
  if (pending_[slot] && pending_[slot]->delivered && Revertible(slot, snap, pending_[slot]->key)) {
    const std::string key = pending_[slot]->key;
    if (!Revert(slot, key, deadline).ok()) return false;
  }
  // The lacking keys matter to a hand-over only (a copy carries this table's values, and the
  // hand-over checks LacksWrite after its pause): reverted where possible, never failing this.
  if (lacks() && !lacking_[slot]->overflow) {
    const std::vector<std::string> keys = lacking_[slot]->keys;  // Revert changes the list
    for (const std::string& key : keys)
      if (Revertible(slot, snap, key)) (void)Revert(slot, key, deadline);
  }
  return pending_[slot] == nullptr;
}

bool Replicator::Revertible(uint32_t slot, const Snapshot& snap, const std::string& key) const {
  (void)slot;
  if (snap.backups.size() <= 1) return true;  // a refusal by the one backup leaves nothing
  std::string value;
  return table_->Get(key, &value).IsNotFound();  // a DELETE: no backup refuses it for room
}

void Replicator::DropStaleLacking(uint32_t slot, uint64_t tenure) {
  auto& l = lacking_[slot];
  if (!l || l->tenure == tenure) return;
  l.reset();
  lacking_slots_.fetch_sub(1, std::memory_order_relaxed);
}

}  // namespace rkv::cluster
