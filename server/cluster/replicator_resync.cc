// SPDX-License-Identifier: Apache-2.0
// Replicator: a promoted primary's resync of the backups a failover kept (Resync; the header
// comment in replicator.h, the argument in docs/design.md, "Replicas and failover").
#include <glog/logging.h>

#include <algorithm>
#include <chrono>
#include <cstring>

#include "common/wire.h"
#include "server/cluster/replicator.h"

namespace rkv::cluster {

Status Replicator::AskLastWrite(uint32_t slot, const Snapshot& snap, const Backup& b,
                                SteadyClock::time_point deadline, bool* has, uint64_t* digest,
                                std::string* key) {
  wire::ReplicateHeader h{};
  h.epoch = snap.epoch;
  h.sequence = 0;
  h.sender_id = my_id_.load();
  h.kind = wire::kReplicateQuery;
  char slot_le[sizeof slot];
  std::memcpy(slot_le, &slot, sizeof slot);  // little-endian (x86 and ARM)
  const std::string_view slot_bytes(slot_le, sizeof slot_le);
  h.digest = wire::ReplicateDigest(h.kind, slot_bytes, std::string_view());
  std::string msg(sizeof h, '\0');
  std::memcpy(msg.data(), &h, sizeof h);
  msg.append(slot_bytes);
  bool maybe_sent = false;
  std::string reply;
  const auto started = SteadyClock::now();
  Status s = SendOnce(slot, snap.epoch, b, msg, std::string_view(), deadline, &maybe_sent, &reply);
  TellSuspects(slot, b, s, started);
  if (!s.ok()) return s;
  wire::ReplicaLastWrite last{};
  if (reply.size() < sizeof last)
    return Status(Code::kProtocolError, "server " + std::to_string(b.id) +
                                            " answered the REPLICATE query with " +
                                            std::to_string(reply.size()) + " bytes");
  std::memcpy(&last, reply.data(), sizeof last);
  if (last.has > 1 || last.key_size > wire::kMaxKeySize ||
      reply.size() != sizeof last + last.key_size ||
      (last.has == 0 && (last.key_size != 0 || last.digest != 0)))
    return Status(Code::kProtocolError,
                  "server " + std::to_string(b.id) + " answered the REPLICATE query malformed");
  *has = last.has == 1;
  *digest = last.digest;
  key->assign(reply, sizeof last, last.key_size);
  if (*has && owners_->SlotOf(*key) != slot)
    return Status(Code::kProtocolError, "server " + std::to_string(b.id) +
                                            " named a key of another slot than " +
                                            std::to_string(slot));
  return Status::Ok();
}

Status Replicator::Resync(uint32_t slot, uint64_t expected, std::vector<uint32_t>* unreachable) {
  if (slot >= owners_->num_slots()) return Status(Code::kInvalidArgument, "no such slot");
  const auto now = SteadyClock::now();
  const auto deadline = now + std::chrono::milliseconds(o_.max_wait_ms);
  std::unique_lock<SlotLock> l(slot_mu_[slot], std::defer_lock);
  if (!l.try_lock_until(deadline))
    return Status(Code::kUnavailable, "slot " + std::to_string(slot) + "'s lock stayed busy");
  const Snapshot snap = SnapshotOf(slot);
  // The promotion the caller means (PROMOTING at its epoch; a map applied since that still
  // names this server leaves the word as it was, so the map's epoch may be newer).
  if (owners_->Word(slot) != expected || WordState(expected) != SlotState::kPromoting ||
      snap.primary != my_id_.load() || WordEpoch(expected) > snap.epoch)
    return Status(Code::kUnavailable,
                  "slot " + std::to_string(slot) + " is not being promoted in the applied map");
  // A replica here that may lack a write its ring acknowledged (OwnershipTable::RingLoss)
  // must not write its values over the backups': one of them may be the only holder.
  auto lacks = [&] {
    return owners_->RingLoss(slot)
               ? Status(Code::kUnavailable, "slot " + std::to_string(slot) +
                                                " may lack an acknowledged write here: no resync")
               : Status::Ok();
  };
  if (Status m = lacks(); !m.ok()) return m;
  std::unique_ptr<ResyncState>& st = resync_[slot];
  if (st && st->tenure != WordEpoch(expected)) st.reset();  // an earlier promotion's
  if (snap.backups.empty()) {
    st.reset();
    return Status::Ok();
  }
  for (const Backup& b : snap.backups)
    if (unreachable != nullptr &&
        std::find(unreachable->begin(), unreachable->end(), b.id) != unreachable->end())
      return Status(Code::kUnavailable, "backup " + std::to_string(b.id) +
                                            " did not answer another slot's resync just now");
  if (!st) st = std::make_unique<ResyncState>(ResyncState{WordEpoch(expected), {}, {}});
  // Primary() admits the PROMOTING word for this resync's own calls (under the slot's lock),
  // and so StillWanted: a backup that does not answer is told to the SuspectReporter.
  struct Flag {
    std::atomic<uint8_t>* f;
    ~Flag() { f->store(0); }
  } flag{&resyncing_[slot]};
  resyncing_[slot].store(1);
  // Lasting refusals only, for kResyncGiveUpMs (any other outcome starts the wait again): the
  // backup that refused cannot hold this table's data (e.g. no room for a value); it is
  // reported so that the coordinator drops it from this server's slots.
  auto refused = [&](const Status& s, uint32_t by) {
    if (!Permanent(s.code()) || by == 0) {
      st->refused_since = SteadyClock::time_point{};
      return;
    }
    const auto t = SteadyClock::now();
    if (st->refused_since == SteadyClock::time_point{}) st->refused_since = t;
    if (t - st->refused_since < std::chrono::milliseconds(kResyncGiveUpMs)) return;
    SuspectReporter* sr = suspects_.load();
    for (const Backup& b : snap.backups)
      if (b.id == by && sr != nullptr) {
        LOG(WARNING) << "slot " << slot << ": backup " << b.id << " keeps refusing the resync ("
                     << s.ToString() << "): reported, for the coordinator to drop it";
        sr->Diverged(b.id, b.host, b.port);
      }
  };
  uint64_t my_digest = 0;
  std::string my_key;
  const bool mine = owners_->LastWrite(slot, &my_digest, &my_key);
  // The keys to write: kept across attempts until one succeeds whole (an attempt that wrote
  // some may leave a backup whose record now matches this one's while another key differs).
  std::vector<std::string>& keys = st->keys;
  auto add = [&](const std::string& k) {
    if (std::find(keys.begin(), keys.end(), k) == keys.end()) keys.push_back(k);
  };
  for (const Backup& b : snap.backups) {
    bool has = false;
    uint64_t digest = 0;
    std::string key;
    Status s = AskLastWrite(slot, snap, b, deadline, &has, &digest, &key);
    if (unreachable != nullptr && (s.code() == Code::kTimeout ||
                                   s.code() == Code::kConnectionLost || s.code() == Code::kIoError))
      unreachable->push_back(b.id);
    if (!s.ok()) {
      refused(s, b.id);
      return Status(s.code(), "asking server " + std::to_string(b.id) + " for slot " +
                                  std::to_string(slot) + "'s last write: " + s.message());
    }
    // The same last write on both sides: equal (they differ by that write at most). Else the
    // keys named are written with this table's values (a key named by neither side differs
    // nowhere: see the header).
    if (mine && has && digest == my_digest) continue;
    if (mine) add(my_key);
    if (has) add(key);
  }
  for (const std::string& key : keys) {
    if (Status m = lacks(); !m.ok()) return m;
    std::string value;
    Status g = table_->Get(key, &value);
    if (!g.ok() && !g.IsNotFound()) return g;
    const bool put = g.ok();
    refused_by_[slot] = 0;
    Status s = WriteLocked(
        slot, put, key, put ? std::string_view(value) : std::string_view(),
        [] { return Status::Ok(); }, deadline);
    if (!s.ok()) {
      refused(s, refused_by_[slot]);
      return Status(s.code(), "resyncing slot " + std::to_string(slot) + ": " + s.message());
    }
    resync_writes_.fetch_add(1, std::memory_order_relaxed);
  }
  resyncs_.fetch_add(1, std::memory_order_relaxed);
  if (!keys.empty())
    LOG(INFO) << "slot " << slot << ": promoted; " << keys.size()
              << " key(s) whose last write may differ between the replicas written to the "
              << snap.backups.size() << " backup(s) kept, with this table's values";
  st.reset();
  return Status::Ok();
}

}  // namespace rkv::cluster
