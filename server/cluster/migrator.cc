// SPDX-License-Identifier: Apache-2.0
#include "server/cluster/migrator.h"

#include <glog/logging.h>

#include <chrono>
#include <map>

#include "client/client_impl.h"
#include "common/cluster/map_lease.h"
#include "common/cluster/slot_map.h"
#include "server/cluster/progress_reporter.h"
#include "server/cluster/slot_scan.h"

namespace rkv::cluster {

namespace {
using SteadyClock = std::chrono::steady_clock;
constexpr int kWaitMs = 1000;
constexpr int kRetryMs = 200;
constexpr int kGraceMs = 20;        // read grace period between NOT_OWNED and the commit
constexpr int kPauseWaitMs = 5000;  // for writes admitted before the pause
constexpr size_t kDirtyRounds = 8;
constexpr size_t kFewDirty = 64;         // pause once a round leaves at most this many keys
constexpr size_t kMaxPausedKeys = 4096;  // ...and never with more than this many to ship
}  // namespace

Migrator::Migrator(EtcdClient* etcd, Table* table, OwnershipTable* owners, MigratorOptions o)
    : etcd_(etcd), table_(table), owners_(owners), o_(std::move(o)) {}

void Migrator::Start() {
  thread_ = std::thread([this] { Loop(); });
}

Migrator::~Migrator() {
  {
    std::lock_guard<std::mutex> l(mu_);
    stop_ = true;
  }
  cv_.notify_all();
  if (thread_.joinable()) thread_.join();
}

bool Migrator::Stopping() {
  std::lock_guard<std::mutex> l(mu_);
  return stop_;
}

void Migrator::Pause(int ms) {
  std::unique_lock<std::mutex> l(mu_);
  cv_.wait_for(l, std::chrono::milliseconds(ms), [this] { return stop_; });
}

void Migrator::Loop() {
  while (!Stopping()) {
    bool found = false;
    EtcdKv kv;
    int64_t revision = 0;
    Status s = etcd_->Get(Key("migration"), &found, &kv, &revision);
    if (!s.ok()) {
      Pause(kRetryMs);
      continue;
    }
    MigrationRecord rec;
    if (found && MigrationRecord::Decode(kv.value, &rec).ok() &&
        rec.state == MigrationRecord::kCopy && rec.from_id == o_.my_id &&
        rec.nonce != last_nonce_) {
      last_nonce_ = rec.nonce;
      Run(rec, kv.mod_revision);
      continue;
    }
    (void)etcd_->Watch(
        Key("migration"), false, revision + 1, kWaitMs,
        [&](const std::vector<EtcdEvent>& ev, int64_t) { return !ev.empty() || Stopping(); });
  }
}

void Migrator::Run(const MigrationRecord& rec, int64_t rec_revision) {
  LOG(INFO) << "migration " << rec.nonce << ": " << rec.slots.size() << " slot(s) to server "
            << rec.to_id;
  // The map must name this server as the owner of every slot, and the target by address.
  bool found = false;
  EtcdKv kv;
  std::string why;
  SlotMap map;
  Status s = etcd_->Get(Key("map"), &found, &kv, nullptr);
  if (!s.ok() || !found || !SlotMap::Decode(kv.value, &map).ok()) {
    why = "cannot read the map: " + (s.ok() ? std::string("missing or malformed") : s.ToString());
  } else if (map.num_slots() != owners_->num_slots()) {
    why = "the map's slot count changed";
  }
  const uint16_t me = map.IndexOf(o_.my_id), to = map.IndexOf(rec.to_id);
  if (why.empty() && to == kUnassigned)
    why = "target server " + std::to_string(rec.to_id) + " is not in the map";
  // A slot this server was just promoted to (a hand-over of the last round, a failover) is
  // PROMOTING until its promotion fence passed, and is not even that before this server
  // applied the map: both waited for, not refused.
  const auto promoted_by = SteadyClock::now() + PromotionFence() + std::chrono::seconds(2);
  while (why.empty() && o_.applied_epoch && o_.applied_epoch() < map.epoch() && !Stopping() &&
         SteadyClock::now() < promoted_by)
    Pause(20);
  for (uint32_t slot : rec.slots)
    while (why.empty() && slot < owners_->num_slots() && !Stopping() &&
           WordState(owners_->Word(slot)) == SlotState::kPromoting &&
           SteadyClock::now() < promoted_by)
      Pause(20);
  for (size_t i = 0; why.empty() && i < rec.slots.size(); ++i) {
    const uint32_t slot = rec.slots[i];
    if (slot >= map.num_slots() || map.OwnerIndex(slot) != me || me == kUnassigned ||
        WordState(owners_->Word(slot)) != SlotState::kOwned)
      why = "slot " + std::to_string(slot) + " is not owned here";
    else
      why = RolesRefused(rec, map, slot);
  }
  if (!why.empty()) {
    Fail(rec, rec_revision, why);
    return;
  }
  owners_->SetHandingOver(rec.slots, true);  // every slot checked < num_slots above
  if (rec.kind == MigrationRecord::kHandover) {
    Handover(rec, rec_revision);
    return;
  }
  if (!Copy(rec, map.servers()[to].host, map.servers()[to].port, &why)) {
    Resume(rec, rec_revision, why);
    return;
  }
  const Outcome outcome = Commit(rec, rec_revision);
  if (outcome == Outcome::kUnknown) return;  // stopping; words NOT_OWNED, record as it is
  if (outcome == Outcome::kCancelled) {
    Resume(rec, rec_revision, "the migration record changed before the hand-over (cancelled)");
    return;
  }
  if (rec.CopiesToBackup()) {
    // Writes resume only once this server applied the map naming the new backup: from then on
    // every write reaches it (server/cluster/replicator.h).
    while (o_.applied_epoch && o_.applied_epoch() < committed_epoch_ && !Stopping()) Pause(20);
    for (uint32_t slot : rec.slots)  // unless a failover took it meanwhile (Apply released it)
      ResumeSlot(slot);
    owners_->SetHandingOver(rec.slots, false);
    done_.fetch_add(1);
    LOG(INFO) << "migration " << rec.nonce << ": " << rec.slots.size()
              << " slot(s) copied to server " << rec.to_id << ", now a backup";
    return;
  }
  owners_->SetHandingOver(rec.slots, false);
  done_.fetch_add(1);
  LOG(INFO) << "migration " << rec.nonce << ": " << rec.slots.size()
            << " slot(s) handed over to server " << rec.to_id;
  Purge(rec.slots);
}

bool Migrator::Copy(const MigrationRecord& rec, const std::string& host, uint16_t port,
                    std::string* why) {
  {
    bool live = false;
    EtcdKv t;
    Status r =
        etcd_->Get(Key(("servers/" + std::to_string(rec.to_id)).c_str()), &live, &t, nullptr);
    if (!r.ok() || !live) {
      *why = "target server " + std::to_string(rec.to_id) + " is not live" +
             (r.ok() ? std::string() : ": " + r.ToString());
      return false;
    }
    target_record_ = t.create_revision;
  }
  ClientImpl target(host, port, o_.client);
  Status s = target.Open();
  if (s.ok() && target.owner_slots() != owners_->num_slots())
    s = Status(Code::kProtocolError, "the target has no ownership table of this cluster");
  for (size_t i = 0; s.ok() && i < rec.slots.size(); i += 256) {
    std::string key;
    for (size_t j = i; j < rec.slots.size() && j < i + 256; ++j)
      for (int b = 0; b < 4; ++b) key.push_back(char((rec.slots[j] >> (8 * b)) & 0xff));
    std::string reply, nonce;  // the record's nonce: the target checks it against etcd
    for (int b = 0; b < 8; ++b) nonce.push_back(char((rec.nonce >> (8 * b)) & 0xff));
    s = target.Call(wire::Op::kMigrateBegin, key, nonce, &reply);
  }
  if (!s.ok()) {
    *why = "target " + host + ":" + std::to_string(port) + ": " + s.ToString();
    return false;
  }
  std::vector<bool> in_set(owners_->num_slots(), false);
  for (uint32_t slot : rec.slots) in_set[slot] = true;
  // A kept write (unknown outcome) blocks an ADD_REPLICA copy (checked after the pause): one
  // left in a slot nobody writes again would block it for good, so each is resolved first
  // (resent to the slot's backups and applied here, before the copy reads the table).
  if (rec.CopiesToBackup() && o_.settle_kept)
    for (uint32_t slot : rec.slots) {
      if (Stopping()) {
        *why = "stopping";
        return false;
      }
      if (!o_.settle_kept(slot)) {  // before any copy: the batch would fail after it anyway
        *why = "slot " + std::to_string(slot) +
               " holds a write of unknown outcome that could not be settled yet (its resend "
               "or revert did not reach every backup, a revert to several backups of a value "
               "this table has no room to replace, or the slot was busy)";
        return false;
      }
    }
  const auto start = SteadyClock::now();
  uint64_t bytes = 0, keys = 0, scanned = 0;
  // The coordinator cancels a batch only once these stop changing
  // (server/cluster/progress_watch.h).
  ProgressReporter progress(etcd_, Key("progress"), o_.lease, rec.nonce);
  MigrationProgress::Phase phase = MigrationProgress::kCopy;
  progress.Note(phase, keys, bytes);
  // The copies are pipelined: up to the target's request credits in flight on the connection
  // (the target applies one connection's writes in the order sent). flush() waits for every
  // answer: before the dirty set is taken, before the pause and before the commit, all that
  // was sent is applied at the target. A refusal or a failed connection fails the copy.
  int in_flight = 0;
  auto take = [&]() {
    uint64_t rid = 0;
    std::string reply;
    Status t = target.TakeCall(&rid, &reply);
    --in_flight;
    if (!t.ok() && s.ok()) s = t;
    return s.ok();
  };
  auto flush = [&]() {
    while (in_flight > 0)
      if (!take()) return false;
    return s.ok();
  };
  auto send = [&](const std::string& k, const std::string* v) {
    for (;;) {
      uint64_t rid = 0;
      bool posted = false;
      s = target.PostCall(v ? wire::Op::kMigratePut : wire::Op::kMigrateDelete, k,
                          v ? std::string_view(*v) : std::string_view(), &rid, &posted);
      if (!s.ok()) return false;
      if (posted) break;
      if (in_flight == 0) {  // cannot happen: an idle window takes a request
        s = Status(Code::kIoError, "a copy was not posted with nothing in flight");
        return false;
      }
      if (!take()) return false;
    }
    ++in_flight;
    keys_sent_.fetch_add(1, std::memory_order_relaxed);
    bytes += k.size() + (v ? v->size() : 0);
    progress.Note(phase, ++keys, bytes);
    if (o_.rate_bytes_s > 0) {  // paced: never ahead of rate x elapsed
      const auto due = start + std::chrono::microseconds(bytes * 1000000 / o_.rate_bytes_s);
      if (due > SteadyClock::now()) {  // a stop ends the wait (and the copy)
        std::unique_lock<std::mutex> l(mu_);
        cv_.wait_until(l, due, [this] { return stop_; });
      }
    }
    return s.ok() && !Stopping();
  };
  auto ship_dirty = [&](size_t* count, bool* overflow) {
    std::vector<std::string> keys;
    owners_->TakeDirty(&keys, overflow);
    *count = keys.size();
    std::string value;
    for (const std::string& k : keys) {
      Status g = table_->Get(k, &value);
      if (!send(k, g.ok() ? &value : nullptr)) return false;
    }
    return flush();
  };
  owners_->Track(rec.slots, true);
  auto fail = [&](const std::string& what) {
    owners_->Track(rec.slots, false);
    *why = what + (s.ok() ? std::string() : ": " + s.ToString());
    // No copy stays in flight past the failure (a late one could land after the next
    // attempt's MIGRATE_BEGIN purged the slots): answered, or the connection is gone.
    while (in_flight > 0 && !target.broken()) {  // whatever s says: every answer taken
      uint64_t rid = 0;
      std::string reply;
      (void)target.TakeCall(&rid, &reply);
      --in_flight;
    }
    return false;
  };
  bool rescan = true;
  size_t dirty = 0;
  for (size_t round = 0; round < kDirtyRounds; ++round) {
    if (rescan && (!ScanSlots(
                       *table_, *owners_, in_set,
                       [&](const std::string& k, const std::string& v) { return send(k, &v); },
                       [&](uint64_t b) {
                         progress.Scanned(scanned + b);
                         progress.Note(phase, keys, bytes);
                       }) ||
                   !flush()))
      return fail("copying the slots' entries");
    if (rescan) scanned += table_->geometry().num_buckets + 1;
    rescan = false;
    phase = MigrationProgress::kCatchUp;
    progress.Note(phase, keys, bytes);
    if (!ship_dirty(&dirty, &rescan)) return fail("shipping the keys written meanwhile");
    if (dirty <= kFewDirty && !rescan) break;
  }
  if (rescan) return fail("more keys were written during the copy than the dirty set holds");
  // Writes stay paused while the last keys are shipped: only a short tail may be left for it.
  if (dirty > kMaxPausedKeys)
    return fail("the slots' writes outpace the copy (" + std::to_string(dirty) +
                " keys written in the last round); not pausing them");
  // Pause the slots' writes and wait for the admitted ones; then the last dirty keys are exact.
  const auto deadline = SteadyClock::now() + std::chrono::milliseconds(kPauseWaitMs);
  for (uint32_t slot : rec.slots)
    if (!owners_->Pause(slot, deadline)) {
      for (uint32_t t : rec.slots) ResumeSlot(t);
      return fail(
          "writes admitted before the pause did not finish in time (or a map change "
          "released a slot)");
    }
  phase = MigrationProgress::kPaused;
  progress.Note(phase, keys, bytes);
  bool overflow = false;
  if (!ship_dirty(&dirty, &overflow) || overflow) {
    for (uint32_t t : rec.slots) ResumeSlot(t);
    return fail("shipping the last keys");
  }
  owners_->Track(rec.slots, false);
  // Paused and idle: no write runs in these slots, so none can keep a write until they resume
  // (after the commit, when every write also reaches the new backup).
  for (uint32_t slot : rec.slots)
    if (rec.CopiesToBackup() && o_.has_kept && o_.has_kept(slot)) {
      for (uint32_t t : rec.slots) ResumeSlot(t);
      return fail("slot " + std::to_string(slot) +
                  " holds a write of unknown outcome that this server's table has not taken yet");
    }
  // Nor a slot whose table lacks a write its backups hold (Replicator::LacksWrite, left when
  // settling could not revert it): the copy would carry the older value, and a later failover
  // that keeps both backups would leave them differing by a key no last-write record names
  // (the resync's premise, docs/design.md).
  for (uint32_t slot : rec.slots)
    if (rec.CopiesToBackup() && o_.lacks_write && o_.lacks_write(slot)) {
      for (uint32_t t : rec.slots) ResumeSlot(t);
      return fail("slot " + std::to_string(slot) +
                  " lacks a write its backups hold (not reverted: more than one backup, or "
                  "too many such keys); it is copied once that key is written again");
    }
  progress.Note(MigrationProgress::kCommit, keys, bytes);
  if (rec.CopiesToBackup()) return true;  // still this server's: MOVING
  for (uint32_t slot : rec.slots)
    owners_->Set(slot, OwnerWord(WordEpoch(owners_->Word(slot)), SlotState::kNotOwned));
  std::this_thread::sleep_for(std::chrono::milliseconds(kGraceMs));
  return true;
}

Migrator::Outcome Migrator::Commit(const MigrationRecord& rec, int64_t rec_revision) {
  using C = EtcdClient::Compare;
  MigrationRecord done = rec;
  done.state = MigrationRecord::kDone;
  for (int attempt = 0;; ++attempt) {
    if (attempt > 0) Pause(kRetryMs);
    if (Stopping()) return Outcome::kUnknown;
    bool found = false;
    EtcdKv rec_kv, map_kv;
    Status s = etcd_->Get(Key("migration"), &found, &rec_kv, nullptr);
    if (!s.ok()) continue;  // etcd unreachable: keep the writes paused and try again
    const bool record_changed = !found || rec_kv.mod_revision != rec_revision;
    s = etcd_->Get(Key("map"), &found, &map_kv, nullptr);
    SlotMap map;
    if (!s.ok() || !found || !SlotMap::Decode(map_kv.value, &map).ok()) continue;
    const uint16_t to = map.IndexOf(rec.to_id), me = map.IndexOf(o_.my_id);
    if (record_changed) {
      // The map decides, not the record: our commit may have been applied with its answer lost
      // (the record has moved on since). The commit changes every slot at once, so the first
      // slot tells.
      const Outcome o = OutcomeIn(rec, map);
      if (o == Outcome::kCommitted) committed_epoch_ = map.epoch();
      if (o == Outcome::kUnknown)
        LOG(ERROR) << "migration " << rec.nonce << ": slot " << rec.slots[0]
                   << " belongs to neither side now; leaving the slots NOT_OWNED";
      return o;
    }
    if (to == kUnassigned || me == kUnassigned || !EditMap(rec, &map))
      return Outcome::kCancelled;  // the map changed: not ours, or no place for the target
    map.set_epoch(map.epoch() + 1);
    committed_epoch_ = map.epoch();
    std::string value;
    map.Encode(&value);
    bool ok = false;
    // The target must be the very process that received the copy (its member record, under its
    // lease, is recreated by a restart and gone after a death): else the copy may be lost.
    s = etcd_->Txn({C{Key("map"), C::kModRevision, C::kEqual, map_kv.mod_revision, {}},
                    C{Key("migration"), C::kModRevision, C::kEqual, rec_revision, {}},
                    C{Key(("servers/" + std::to_string(rec.to_id)).c_str()),
                      C::kCreateRevision,
                      C::kEqual,
                      target_record_,
                      {}}},
                   {EtcdClient::Op::Put(Key("map"), value),
                    EtcdClient::Op::Put(Key("migration"), done.Encode())},
                   {}, &ok);
    if (s.ok() && ok) return Outcome::kCommitted;
    if (s.ok()) {  // a compare failed: is the target the process that got the copy?
      bool live = false;
      EtcdKv t;
      if (etcd_->Get(Key(("servers/" + std::to_string(rec.to_id)).c_str()), &live, &t, nullptr)
              .ok() &&
          (!live || t.create_revision != target_record_)) {
        LOG(WARNING) << "migration " << rec.nonce << ": target server " << rec.to_id
                     << " died or restarted before the hand-over";
        // The commit cannot have happened with this target record: cancel our record first,
        // so that no retry of ours can commit, then resume.
        MigrationRecord failed = rec;
        failed.state = MigrationRecord::kFailed;
        bool cancelled = false;
        if (etcd_
                ->Txn({C{Key("migration"), C::kModRevision, C::kEqual, rec_revision, {}}},
                      {EtcdClient::Op::Put(Key("migration"), failed.Encode())}, {}, &cancelled)
                .ok() &&
            cancelled)
          return Outcome::kCancelled;
      }
    }
  }
}

void Migrator::Resume(const MigrationRecord& rec, int64_t rec_revision, const std::string& why) {
  // Nothing was handed over (the commit did not happen), so the map still names this server.
  for (uint32_t slot : rec.slots) {
    if (slot >= owners_->num_slots() || !owners_->HandingOver(slot)) continue;
    ResumeSlot(slot);
  }
  owners_->SetHandingOver(rec.slots, false);
  Fail(rec, rec_revision, why);
}

void Migrator::Fail(const MigrationRecord& rec, int64_t rec_revision, const std::string& why) {
  failed_.fetch_add(1);
  LOG(WARNING) << "migration " << rec.nonce << " failed: " << why;
  MigrationRecord failed = rec;
  failed.state = MigrationRecord::kFailed;
  using C = EtcdClient::Compare;
  bool ok = false;
  (void)etcd_->Txn({C{Key("migration"), C::kModRevision, C::kEqual, rec_revision, {}}},
                   {EtcdClient::Op::Put(Key("migration"), failed.Encode())}, {}, &ok);
}

void Migrator::Purge(const std::vector<uint32_t>& slots) {
  // Only while a slot keeps the NOT_OWNED word the hand-over left: a slot moved straight back
  // here (MIGRATE_BEGIN: IMPORTING) keeps what its new copy brings.
  std::vector<bool> in_set(owners_->num_slots(), false);
  std::map<uint32_t, uint64_t> words;
  for (uint32_t slot : slots) {
    const uint64_t w = owners_->Word(slot);
    if (WordState(w) != SlotState::kNotOwned) continue;
    in_set[slot] = true;
    words[slot] = w;
  }
  size_t deleted = 0;
  for (const auto& [slot, keys] : KeysBySlot(*table_, *owners_, in_set)) {
    const uint32_t v = slot;
    const uint64_t w = words[slot];
    deleted += DeleteHeld(
        table_, keys, [&] { return owners_->BeginReclaim(v, w); }, [&] { owners_->EndReclaim(v); });
  }
  LOG(INFO) << "migration: purged " << deleted << " entries of the slots handed over";
}

}  // namespace rkv::cluster
