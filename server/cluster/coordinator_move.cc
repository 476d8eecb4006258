// SPDX-License-Identifier: Apache-2.0
// The coordinator's slot moves (rebalance, remove without replicas): batches of one (source,
// target) pair, each a MigrationRecord the source's migrator carries out (server/cluster/
// migrator.h), waited for with a deadline, cancelled when a side's registration is gone, and
// tried again (kBatchTries in all) with the slots the source still owns.
#include <glog/logging.h>

#include <algorithm>
#include <chrono>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "common/cluster/migration_progress.h"
#include "common/cluster/migration_record.h"
#include "common/cluster/slot_map.h"
#include "common/secure_random.h"
#include "server/cluster/coordinator.h"
#include "server/cluster/progress_watch.h"

namespace rkv::cluster {

namespace {
constexpr int kRetryMs = 200;        // after an etcd error or lost compare
constexpr uint64_t kJudgeEvery = 5;  // a running batch's progress and sides: every 5th look
constexpr size_t kBatchSlots = 512;
constexpr int kBatchTries = 3;          // a move batch that failed while both sides live
constexpr int kBothLiveWaitMs = 10000;  // for both sides of a failed batch to be registered
}  // namespace

Status Coordinator::Move(Election* e, const std::vector<SlotMove>& moves,
                         MigrationRecord::Kind kind, uint32_t* moved) {
  // Batches of one (from, to) pair, at most kBatchSlots slots each, in slot order.
  std::map<std::pair<uint32_t, uint32_t>, std::vector<uint32_t>> by_pair;
  for (const SlotMove& m : moves) by_pair[{m.from_id, m.to_id}].push_back(m.slot);
  for (auto& [pair, slots] : by_pair) {
    for (size_t i = 0; i < slots.size(); i += kBatchSlots) {
      std::vector<uint32_t> batch(slots.begin() + i,
                                  slots.begin() + std::min(slots.size(), i + kBatchSlots));
      // A batch that failed while both sides are live again (a lease that lapsed under load
      // and was renewed, a copy cut short) is tried again, with the slots the source still
      // owns, up to kBatchTries times; a move only (re-replication plans again by itself).
      for (int attempt = 1;; ++attempt) {
        bool retry = false;
        Status s = MoveBatch(e, pair.first, pair.second, batch, kind, &retry);
        if (s.ok()) break;
        if (!retry || kind != MigrationRecord::kMove || attempt >= kBatchTries ||
            !BothLive(pair.first, pair.second, &batch))
          return s;
        if (batch.empty()) break;  // the source owns none of them now
        LOG(WARNING) << "cluster coordinator: " << s.message() << "; trying again (attempt "
                     << attempt + 1 << " of " << kBatchTries << ")";
      }
      *moved += uint32_t(batch.size());
      LOG(INFO) << "cluster coordinator: " << *moved << " of " << moves.size() << " slots moved";
    }
  }
  return Status::Ok();
}

bool Coordinator::BothLive(uint32_t from, uint32_t to, std::vector<uint32_t>* slots) {
  // Both registered within a few lease TTLs (a lapsed lease is renewed at once by the server).
  for (int i = 0; i < kBothLiveWaitMs / kRetryMs; ++i) {
    if (Stopping()) return false;
    bool from_live = false, to_live = false;
    EtcdKv m;
    if (etcd_->Get(Key(("servers/" + std::to_string(from)).c_str()), &from_live, &m, nullptr)
            .ok() &&
        etcd_->Get(Key(("servers/" + std::to_string(to)).c_str()), &to_live, &m, nullptr).ok() &&
        from_live && to_live)
      break;
    if (i + 1 == kBothLiveWaitMs / kRetryMs) return false;
    Pause(kRetryMs);
  }
  bool found = false;
  EtcdKv kv;
  SlotMap map;
  if (!etcd_->Get(Key("map"), &found, &kv, nullptr).ok() || !found ||
      !SlotMap::Decode(kv.value, &map).ok())
    return false;
  const uint16_t index = map.IndexOf(from);
  std::vector<uint32_t> still;
  for (uint32_t slot : *slots)
    if (index != kUnassigned && map.OwnerIndex(slot) == index) still.push_back(slot);
  *slots = std::move(still);
  return true;
}

Status Coordinator::MoveBatch(Election* e, uint32_t from, uint32_t to,
                              const std::vector<uint32_t>& slots, MigrationRecord::Kind kind,
                              bool* retry, uint32_t replaced) {
  using C = EtcdClient::Compare;
  *retry = false;
  MigrationRecord rec;
  rec.from_id = from;
  rec.to_id = to;
  rec.kind = kind;
  rec.replaced_id = replaced;
  rec.slots = slots;
  Status s = SecureRandom::Fill(&rec.nonce, sizeof rec.nonce);
  if (!s.ok()) return s;
  bool ok = false;
  int64_t revision = 0;
  // Replaces any earlier record (a former coordinator's): its source can no longer commit.
  s = etcd_->Txn({e->StillLeader()}, {EtcdClient::Op::Put(Key("migration"), rec.Encode())}, {}, &ok,
                 &revision);
  if (!s.ok()) return s;
  if (!ok) return Status(Code::kUnauthenticated, "no longer the coordinator");
  // Wait for the source to finish: DONE or FAILED. No progress reported for the watch's limit
  // (the source died, hangs or cannot reach etcd): cancel it.
  ProgressWatch watch(rec.nonce, std::chrono::steady_clock::now());
  MigrationRecord now;
  // The record is read every kRetryMs (a finished batch is seen soon); the progress report and
  // the two sides' liveness only every kJudgeEvery passes (they change on a scale of seconds:
  // etcd's load from a long migration stays small).
  for (uint64_t pass = 0;; ++pass) {
    if (Stopping()) return Status(Code::kUnavailable, "coordinator stopping");
    bool found = false;
    EtcdKv kv;
    s = etcd_->Get(Key("migration"), &found, &kv, nullptr);
    if (s.ok() && found && MigrationRecord::Decode(kv.value, &now).ok() && now.nonce == rec.nonce &&
        now.state != MigrationRecord::kCopy)
      break;
    if (s.ok() && (!found || now.nonce != rec.nonce))
      return Status(Code::kUnavailable, "the migration record was replaced");
    if (kind != MigrationRecord::kMove) {  // failures are handled while a replicated batch runs
      bool replicated = false, changed = false;
      Status u = Upkeep(e, false, &replicated, &changed);
      if (u.code() == Code::kUnauthenticated) return u;
    }
    if (pass % kJudgeEvery != 0) {
      Pause(kRetryMs);
      continue;
    }
    EtcdKv p;
    MigrationProgress reported;
    const bool read_ok = etcd_->Get(Key("progress"), &found, &p, nullptr).ok();
    const bool has_report = read_ok && found && MigrationProgress::Decode(p.value, &reported).ok();
    watch.Saw(read_ok, has_report ? &reported : nullptr, std::chrono::steady_clock::now());
    // A side that died cannot finish (its lease expired): cancel at once.
    bool from_live = true, to_live = true;
    EtcdKv m;
    const bool dead =
        etcd_->Get(Key(("servers/" + std::to_string(rec.from_id)).c_str()), &from_live, &m, nullptr)
            .ok() &&
        etcd_->Get(Key(("servers/" + std::to_string(rec.to_id)).c_str()), &to_live, &m, nullptr)
            .ok() &&
        (!from_live || !to_live);
    const bool stalled = watch.Stalled(std::chrono::steady_clock::now());
    if (dead || stalled) {
      MigrationRecord failed = rec;
      failed.state = MigrationRecord::kFailed;
      s = etcd_->Txn(
          {e->StillLeader(), {Key("migration"), C::kModRevision, C::kEqual, revision, {}}},
          {EtcdClient::Op::Put(Key("migration"), failed.Encode())}, {}, &ok);
      if (!s.ok() || !ok) {  // the source finished meanwhile (or etcd is away): look again
        Pause(kRetryMs);
        continue;
      }
      *retry = dead;
      return Status(
          Code::kTimeout,
          "server " + std::to_string(rec.from_id) + " did not finish moving " +
              std::to_string(rec.slots.size()) + " slot(s) " +
              (dead ? "(a side is down)"
                    : "(no progress for " + std::to_string(watch.limit().count() / 1000) + " s)") +
              "; cancelled");
    }
    Pause(kRetryMs);
  }
  *retry = now.state != MigrationRecord::kDone;
  if (now.state != MigrationRecord::kDone)
    return Status(Code::kUnavailable, "server " + std::to_string(rec.from_id) +
                                          " could not move slots to server " +
                                          std::to_string(rec.to_id) + " (see its log)");
  return Status::Ok();
}

}  // namespace rkv::cluster
