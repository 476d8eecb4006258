// SPDX-License-Identifier: Apache-2.0
#include "server/cluster/migrator.h"

#include <glog/logging.h>

#include <chrono>
#include <map>

#include "common/cluster/map_lease.h"
#include "common/cluster/slot_map.h"
#include "server/cluster/slot_scan.h"

namespace rkv::cluster {

namespace {
using SteadyClock = std::chrono::steady_clock;
constexpr int kWaitMs = 1000;
constexpr int kRetryMs = 200;
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
        [&](const std::vector<EtcdEvent>& ev, int64_t) { return !ev.empty() || Stopping(); },
        [this] { return Stopping(); });
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
