// SPDX-License-Identifier: Apache-2.0
#include "server/cluster/replicator.h"

#include <glog/logging.h>

#include <algorithm>
#include <chrono>
#include <cstring>
#include <functional>

#include "client/client_impl.h"
#include "common/wire.h"

namespace rkv::cluster {

namespace {
using SteadyClock = std::chrono::steady_clock;
}  // namespace

Replicator::Replicator(OwnershipTable* owners, Table* table, ReplicatorOptions o)
    : owners_(owners),
      table_(table),
      o_(std::move(o)),
      slot_mu_(new SlotLock[owners->num_slots()]),
      pending_(new std::unique_ptr<Pending>[owners->num_slots()]),
      lacking_(new std::unique_ptr<Lacking>[owners->num_slots()]),
      resync_(new std::unique_ptr<ResyncState>[owners->num_slots()]),
      refused_by_(new uint32_t[owners->num_slots()]()),
      resyncing_(new std::atomic<uint8_t>[owners->num_slots()]) {
  for (uint32_t i = 0; i < owners->num_slots(); ++i) resyncing_[i].store(0);
}

Replicator::~Replicator() = default;

void Replicator::SetMap(const SlotMap& map) {
  auto m = std::make_shared<const SlotMap>(map);
  std::lock_guard<std::mutex> l(map_mu_);
  map_ = std::move(m);
  map_epoch_.store(map.epoch());
}

bool Replicator::Listed(const Snapshot& snap, uint32_t backup) {
  for (const Backup& x : snap.backups)
    if (x.id == backup) return true;
  return false;
}

bool Replicator::StillWanted(uint32_t slot, uint32_t backup) const {
  const Snapshot now = SnapshotOf(slot);
  return Primary(slot, now) && Listed(now, backup);
}

Replicator::Snapshot Replicator::SnapshotOf(uint32_t slot) const {
  std::shared_ptr<const SlotMap> m;
  {
    std::lock_guard<std::mutex> l(map_mu_);
    m = map_;
  }
  Snapshot out;
  if (!m || slot >= m->num_slots()) return out;
  out.epoch = m->epoch();
  const ServerEntry* p = m->Owner(slot, 0);
  out.primary = p != nullptr ? p->id : 0;
  for (uint16_t r = 1; r < m->replicas(); ++r) {
    const ServerEntry* e = m->Owner(slot, r);
    if (e != nullptr && e->id != my_id_.load()) out.backups.push_back({e->id, e->host, e->port});
  }
  return out;
}

bool Replicator::HasBackups(uint32_t slot) const { return !SnapshotOf(slot).backups.empty(); }

Replicator::Link* Replicator::Acquire(const Backup& b, SteadyClock::time_point deadline) {
  std::unique_lock<std::mutex> l(links_mu_);
  for (;;) {
    std::vector<std::unique_ptr<Link>>& pool = links_[b.id];
    for (auto& link : pool)
      if (!link->busy) {
        link->busy = true;
        return link.get();
      }
    if (pool.size() < kMaxLinks) {
      pool.push_back(std::make_unique<Link>());
      pool.back()->busy = true;
      return pool.back().get();
    }
    if (links_cv_.wait_until(l, deadline) == std::cv_status::timeout) return nullptr;
  }
}

void Replicator::Release(uint32_t /*id*/, Link* link, bool broken) {
  {
    std::lock_guard<std::mutex> l(links_mu_);
    if (broken) link->client.reset();  // the next use connects again
    link->busy = false;
  }
  links_cv_.notify_one();
}

bool Replicator::Attempt::Dropped() { return r->DroppedSince(slot, backup, &epoch); }

bool Replicator::DroppedSince(uint32_t slot, uint32_t backup, uint64_t* seen_epoch) const {
  const uint64_t e = map_epoch_.load(std::memory_order_relaxed);
  if (e == *seen_epoch) return false;
  *seen_epoch = e;
  return !StillWanted(slot, backup);
}

Status Replicator::Begin(uint32_t slot, uint64_t epoch, const Backup& b, const std::string& key,
                         std::string_view value, SteadyClock::time_point deadline, Attempt* a) {
  a->maybe_sent = false;
  a->link = nullptr;
  // A cut-off backup answers neither the connect nor the message: the waits end once the
  // applied map no longer wants this backup's ack (Attempt::Dropped; looked at only when the
  // map's epoch moved since the last look).
  a->r = this;
  a->slot = slot;
  a->backup = b.id;
  a->epoch = epoch;
  Link* link = Acquire(b, deadline);
  if (link == nullptr)
    return Status(Code::kBusy, "no free connection to backup " + std::to_string(b.id) + " (all " +
                                   std::to_string(kMaxLinks) + " in use)");
  // The link is this thread's until Release: its client is touched by no other.
  if (!link->client || link->client->broken())
    link->client = std::make_unique<ClientImpl>(b.host, b.port, o_.client);
  ClientImpl* const c = link->client.get();
  c->SetAbandon(&a->hook);  // cleared by End before Release (which may destroy c)
  Status s;
  if (c->broken()) {
    s = c->Open();
    if (s.ok() && c->owner_slots() != owners_->num_slots())
      s = Status(Code::kProtocolError, "the backup has no ownership table of this cluster");
  }
  if (s.ok()) {
    a->maybe_sent = true;
    bool posted = false;
    s = c->PostCall(wire::Op::kReplicate, key, value, &a->rid, &posted);
    if (s.ok() && !posted)  // nothing else is outstanding on a link: cannot happen
      s = Status(Code::kIoError, "REPLICATE not posted on an idle link");
  }
  if (!s.ok()) {
    c->SetAbandon(nullptr);
    Release(b.id, link, true);
    return s;
  }
  a->link = link;
  return Status::Ok();
}

Status Replicator::End(const Backup& b, Attempt* a, std::string* reply_out) {
  if (a->link == nullptr) return Status(Code::kInvalidArgument, "End without a begun attempt");
  ClientImpl* const c = a->link->client.get();
  std::string reply;
  uint64_t rid = 0;
  Status s = c->TakeCall(&rid, &reply);
  if (s.ok() && rid != a->rid)
    s = Status(Code::kProtocolError, "the backup answered another request than the REPLICATE");
  c->SetAbandon(nullptr);
  Release(b.id, a->link, c->broken() || s.code() == Code::kProtocolError);
  a->link = nullptr;
  if (reply_out != nullptr) *reply_out = std::move(reply);
  return s;
}

Status Replicator::SendOnce(uint32_t slot, uint64_t epoch, const Backup& b, const std::string& key,
                            std::string_view value, SteadyClock::time_point deadline,
                            bool* maybe_sent, std::string* reply) {
  Attempt a;
  Status s = Begin(slot, epoch, b, key, value, deadline, &a);
  if (s.ok()) s = End(b, &a, reply);
  *maybe_sent = a.maybe_sent;
  return s;
}

bool Replicator::Primary(uint32_t slot, const Snapshot& snap) const {
  const uint64_t word = owners_->Word(slot);
  const SlotState st = WordState(word);
  if (st == SlotState::kPromoting)  // a resync's writes: at the map's epoch only
    return snap.primary == my_id_.load() && resyncing_[slot].load() != 0 &&
           WordEpoch(word) <= snap.epoch;
  return snap.primary == my_id_.load() && (st == SlotState::kOwned || st == SlotState::kMoving);
}

// A refusal that asking again cannot change (the backup's answer is final for this message).
bool Replicator::Permanent(Code c) {
  return c == Code::kBadRequest || c == Code::kTooLarge || c == Code::kInvalidArgument ||
         c == Code::kTableFull;
}
// A refusal that says the backup did not apply the message (its table had no room, or the
// message did not decode): the backup's sequence did not move.
bool Replicator::NotApplied(Code c) {
  return c == Code::kBadRequest || c == Code::kTooLarge || c == Code::kTableFull;
}

Status Replicator::Write(uint32_t slot, bool put, std::string_view key, std::string_view value,
                         const std::function<Status()>& apply) {
  // The deadline counts the wait for the slot's lock: writes queued behind a slow backup give
  // up with it instead of each waiting max_wait_ms in turn.
  const auto deadline = SteadyClock::now() + std::chrono::milliseconds(o_.max_wait_ms);
  std::unique_lock<SlotLock> slot_lock(slot_mu_[slot], std::defer_lock);
  if (!slot_lock.try_lock_until(deadline)) {
    failures_.fetch_add(1, std::memory_order_relaxed);
    return Status(Code::kUnavailable, "the write was not applied: slot " + std::to_string(slot) +
                                          "'s earlier writes are still being replicated");
  }
  return WriteLocked(slot, put, key, value, apply, deadline);
}

Status Replicator::WriteLocked(uint32_t slot, bool put, std::string_view key,
                               std::string_view value, const std::function<Status()>& apply,
                               SteadyClock::time_point deadline) {
  Snapshot snap = SnapshotOf(slot);
  // Only the slot's primary in the applied map replicates and applies (a primary failed over
  // while its writes waited must not apply them alone).
  if (!Primary(slot, snap))
    return Status(Code::kUnavailable, "the write was not applied: this server is no longer slot " +
                                          std::to_string(slot) + "'s primary (map epoch " +
                                          std::to_string(snap.epoch) + ")");
  // An earlier write of unknown outcome first reaches every backup and this table (same
  // number and digest: a backup that has it answers it as a resend), so that no backup is left
  // a number behind for good.
  // A kept write belongs to the stint as primary it was made in (the word's epoch: a new stint
  // always has a newer one); a later stint's data already settled it (the next primary's).
  bool superseded = false;  // a kept write of this key, resent, waits for this one to replace it
  if (Status r = ResolveKept(slot, snap, key, deadline, &superseded); !r.ok()) return r;
  uint64_t seq = owners_->Sequence(slot);
  seq = (seq == OwnershipTable::kSequenceUnset ? 0 : seq) + 1;
  if (snap.backups.empty()) {
    owners_->SetSequence(slot, seq);
    Status a = apply();
    if (a.ok() || a.IsNotFound()) {
      if (superseded) DropKept(slot);
      ClearLacking(slot, key);  // no backup holds another value of it
    }
    return a;
  }
  std::string msg = Message(snap.epoch, seq, put, key, value);
  bool sent_any = false;
  std::string why;
  Status r = SendAll(slot, snap, &msg, put ? value : std::string_view(), deadline, &sent_any, &why);
  return AfterSend(slot, put, key, value, apply, seq, msg, r, sent_any, why, superseded);
}

std::string Replicator::Message(uint64_t epoch, uint64_t seq, bool put, std::string_view key,
                                std::string_view value) const {
  wire::ReplicateHeader h{};
  h.epoch = epoch;
  h.sequence = seq;
  h.sender_id = my_id_.load();
  h.kind = put ? wire::kReplicatePut : wire::kReplicateDelete;
  h.digest = wire::ReplicateDigest(h.kind, key, put ? value : std::string_view());
  std::string msg(sizeof h, '\0');
  std::memcpy(msg.data(), &h, sizeof h);
  msg.append(key);
  return msg;
}

Status Replicator::AfterSend(uint32_t slot, bool put, std::string_view key, std::string_view value,
                             const std::function<Status()>& apply, uint64_t seq,
                             const std::string& msg, const Status& r, bool sent_any,
                             const std::string& why, bool superseded) {
  auto keep = [&] {  // the write may be on some replica: resent (and applied here) first next time
    NoteLacking(slot, key);  // a delivered one of another key this table had no room for
    DropKept(slot);  // the older one: of this key (this later write replaces it), or noted above
    kept_.fetch_add(1, std::memory_order_relaxed);
    pending_[slot] =
        std::make_unique<Pending>(Pending{put, WordEpoch(owners_->Word(slot)), std::string(key),
                                          std::string(put ? value : std::string_view()), msg});
  };
  if (!r.ok()) {
    failures_.fetch_add(1, std::memory_order_relaxed);
    // Held by no backup: a refusal that says so keeps its code (TABLE_FULL: as a single server
    // would answer); its number is given to the next write.
    if (!sent_any)
      return Status(NotApplied(r.code()) ? r.code() : Code::kUnavailable,
                    "the write was not applied: slot " + std::to_string(slot) + ": " + why + " (" +
                        r.message() + ")");
    // Its number may have reached a backup: never given to another write.
    owners_->SetSequence(slot, seq);
    keep();
    return Status(Code::kTimeout, "outcome unknown: slot " + std::to_string(slot) + ": " + why +
                                      " (" + r.message() + ")");
  }
  owners_->SetSequence(slot, seq);
  // Still the primary of the map now applied (Apply installs the map before it changes words;
  // a write that passed this check was on every backup of a map that named this server
  // primary, the promoted one included).
  if (!Primary(slot, SnapshotOf(slot))) {
    failures_.fetch_add(1, std::memory_order_relaxed);
    return Status(Code::kTimeout, "outcome unknown: slot " + std::to_string(slot) +
                                      ": its backups applied the write, then this server "
                                      "stopped being its primary");
  }
  Status a = apply();
  if (!a.ok() && !a.IsNotFound()) {
    // The backups hold it and this table does not: not a failure the client may rely on.
    failures_.fetch_add(1, std::memory_order_relaxed);
    keep();
    return Status(Code::kTimeout, "outcome unknown: slot " + std::to_string(slot) +
                                      ": the backups applied the write but this server could "
                                      "not: " +
                                      a.ToString());
  }
  if (superseded) DropKept(slot);  // replaced on every replica and here
  ClearLacking(slot, key);         // the same: a lacked write of this key is replaced
  writes_.fetch_add(1, std::memory_order_relaxed);
  return a;
}

}  // namespace rkv::cluster
