// SPDX-License-Identifier: Apache-2.0
// The coordinator's upkeep of a replicated cluster (docs/cluster.md, "Failover" and
// "Re-replication"; the argument in docs/design.md, "Replicas and failover"). While it leads,
// whenever something may have changed (Maintain: a change under the cluster's prefix, a probe
// verdict, work left, or a safety round a second), the coordinator compares the map with the
// live members
// (their records live under their leases: a dead server's goes when its lease expires):
//  1. failover (common/cluster/replica_plan.h, PlanFailover): a slot whose primary is down gets
//     its first live backup as primary and keeps its other live backups (the promoted server
//     resyncs them: Replicator::Resync); dead backups leave their slots.
//     One transaction puts the map at epoch + 1, comparing the map's mod revision and this
//     coordinator's election key (a deposed coordinator commits nothing);
//     Before it, a replica whose server reported that it may lack an acknowledged write of the
//     slot (a RingLossRecord at NAME/ringloss/SERVER: it refused a log ring record of it;
//     server/cluster/ring_loss_reporter.h) leaves the slot (DropRingLossReplicas), in the
//     same transaction: as a backup it is dropped, as a promoted primary that never served it
//     gives way to the first clean live backup;
//  2. otherwise, if a live primary reported a backup it cannot reach (a SuspectRecord at
//     NAME/suspects/BACKUP/PRIMARY: a partial partition; server/cluster/suspect_reporter.h),
//     that backup leaves the primary's slots (DropSuspectBackups), in the same kind of
//     transaction;
//  3. otherwise re-replication (PlanReplicaAdds, never onto a server the primary reported nor
//     onto one being removed): slots short of backups get a copy on a live server, one
//     ADD_REPLICA batch (NAME/migration) at a time, run by the slot's primary
//     (server/cluster/migrator.h), which adds the backup to the map when the copy is complete.
// A server being removed (NAME/draining/ID, coordinator_drain.cc) counts as down in step 1.
#include <glog/logging.h>

#include <algorithm>
#include <charconv>
#include <chrono>
#include <map>
#include <vector>

#include "common/cluster/leased_records.h"
#include "common/cluster/member_record.h"
#include "common/cluster/replica_plan.h"
#include "common/cluster/ring_loss_record.h"
#include "common/cluster/slot_map.h"
#include "common/cluster/suspect_record.h"
#include "server/cluster/coordinator.h"

namespace rkv::cluster {

namespace {
constexpr size_t kAddBatch = 512;
// NAME/suspects/ is read at most this often (an etcd range read; upkeep may run on every change).
bool InMap(const SlotMap& map, uint32_t id) {
  for (const ServerEntry& e : map.servers())
    if (e.id == id) return true;
  return false;
}
}  // namespace

bool Coordinator::LeaderFoundDead() const {
  return probe_ != nullptr && leader_.lease != 0 && probe_->FoundDead(leader_.id, leader_.lease);
}

void Coordinator::ProbeLeader() {
  if (probe_ == nullptr) return;
  const auto now = std::chrono::steady_clock::now();
  // Between reads (every kLeaderReadMs) only the probe's verdict on the leader last read is
  // looked at: no etcd read. A new leader is probed from the next read on.
  if (now < next_leader_read_) {
    if (leader_.lease != 0 && probe_->FoundDead(leader_.id, leader_.lease)) {
      MemberRecord r;
      r.id = leader_.id;
      r.host = leader_.host;
      r.port = leader_.port;
      RevokeDead(r, leader_.lease, "the coordinator");
      leader_ = {};            // acted on: the campaign's wait is not cut short again for it
      next_leader_read_ = {};  // who leads now is read next time
    }
    return;
  }
  leader_ = {};  // read again below; until a read succeeds, every call reads
  std::string leader;
  int64_t token = 0;
  bool any = false;
  Status s = Election::Leader(etcd_, Key("coordinator/"), &leader, &token, &any);
  uint32_t id = 0;
  // The leader's value is its server id in decimal (Loop's Campaign).
  if (!s.ok() || !any) return;
  const auto [end, ec] = std::from_chars(leader.data(), leader.data() + leader.size(), id);
  if (ec != std::errc() || end != leader.data() + leader.size() || id == 0 || id == my_id_) return;
  bool found = false;
  EtcdKv kv;
  s = etcd_->Get(Key(("servers/" + std::to_string(id)).c_str()), &found, &kv, nullptr);
  MemberRecord r;
  if (!s.ok() || !found || !MemberRecord::Decode(kv.value, &r).ok() || kv.lease == 0) return;
  leader_ = {r.id, kv.lease, r.host, r.port};
  probe_->SetTargets({leader_});
  if (!probe_->FoundDead(r.id, kv.lease)) {
    next_leader_read_ = now + std::chrono::milliseconds(kLeaderReadMs);
    return;
  }
  RevokeDead(r, kv.lease, "the coordinator");
  leader_ = {};  // acted on (see above); the next call reads who leads
}

void Coordinator::RevokeDead(const MemberRecord& r, int64_t lease, const char* who) {
  if (revoked_.size() > 1024) revoked_.clear();  // leases are never reused: only a memo
  if (lease == 0 || revoked_.count(lease) != 0) return;
  Status s = etcd_->RevokeLease(lease);
  // Done, or already gone (expired meanwhile): not asked again. Else the next round.
  if (s.ok() || s.message().find("lease not found") != std::string::npos) revoked_.insert(lease);
  LOG(WARNING) << "cluster coordinator: " << who << ", server " << r.id << " (" << r.host << ":"
               << r.port << "), found dead by the probe; its lease revoked: " << s.ToString();
}

void Coordinator::LogIgnored(const char* dir, const std::vector<std::string>& malformed,
                             size_t unleased, bool more) {
  for (const std::string& m : malformed) {
    LOG_EVERY_N(WARNING, 100) << "cluster coordinator: ignoring " << m;
  }
  if (unleased > 0) {
    LOG_EVERY_N(WARNING, 100) << "cluster coordinator: ignoring " << unleased << " record(s) under "
                              << Key(dir) << ": not under their server's live membership lease";
  }
  if (more) {
    LOG_EVERY_N(WARNING, 100) << "cluster coordinator: more records under " << Key(dir)
                              << " than one read returns; the rest are not read";
  }
}

bool Coordinator::ProbeNews() const {
  if (probe_ == nullptr) return false;
  for (const LivenessProbe::Target& t : targets_)
    if (noticed_.count(t.lease) == 0 && probe_->FoundDead(t.id, t.lease)) return true;
  return false;
}

Status Coordinator::Maintain(Election* e, bool* replicated) {
  const auto now = std::chrono::steady_clock::now();
  if (upkeep_idle_ && !dirty_ && now < next_full_upkeep_ && !ProbeNews()) {
    *replicated = replicated_;
    return Status::Ok();
  }
  // Changes from here on mark it again (the watch goes on from watch_from_). The cached
  // reports are read afresh: a change may be one of them.
  dirty_ = false;
  suspects_.Invalidate();
  ring_losses_.Invalidate();
  draining_.Invalidate();
  // Verdicts in before this upkeep are acted on by it (their leases revoked, or tried: the
  // safety round tries again) and no longer cut the watch short; one that comes during it
  // still does.
  std::vector<int64_t> dead_before;
  if (probe_ != nullptr)
    for (const LivenessProbe::Target& t : targets_)
      if (probe_->FoundDead(t.id, t.lease)) dead_before.push_back(t.lease);
  bool changed = false;
  Status s = Upkeep(e, true, replicated, &changed);
  replicated_ = *replicated;
  if (noticed_.size() > 1024) noticed_.clear();  // leases are never reused: only a memo
  noticed_.insert(dead_before.begin(), dead_before.end());
  next_full_upkeep_ = now + std::chrono::milliseconds(kFullUpkeepMs);
  if (!s.ok() || changed) upkeep_idle_ = false;
  return s;
}

Status Coordinator::Upkeep(Election* e, bool rereplicate, bool* replicated, bool* changed) {
  using C = EtcdClient::Compare;
  *replicated = false;
  *changed = false;
  upkeep_idle_ = false;  // set where it ends with nothing left to do
  bool found = false;
  EtcdKv map_kv;
  Status s = etcd_->Get(Key("map"), &found, &map_kv, nullptr);
  if (!s.ok()) return s;
  SlotMap map;
  if (!found || !SlotMap::Decode(map_kv.value, &map).ok() || map.replicas() <= 1) {
    upkeep_idle_ = true;
    targets_.clear();  // nothing to probe (a stale verdict would keep ProbeNews true)
    if (probe_ != nullptr) probe_->SetTargets({});
    return Status::Ok();
  }
  *replicated = true;
  std::vector<EtcdKv> members;
  bool more = false;
  s = etcd_->GetPrefix(Key("servers/"), &members, nullptr, false, &more);
  if (!s.ok()) return s;
  std::vector<uint32_t> live_ids;
  std::map<uint32_t, int64_t> leases;  // live member id -> its record's lease
  std::vector<LiveServer> live;
  std::vector<LivenessProbe::Target> targets;
  for (const EtcdKv& kv : members) {
    MemberRecord r;
    if (!MemberRecord::Decode(kv.value, &r).ok()) continue;
    // A server of the map that the probe found gone is down now, not when its lease expires:
    // its record goes (the lease revoked; a wrong verdict costs it its roles, never safety).
    if (probe_ != nullptr && r.id != my_id_ && InMap(map, r.id)) {
      // Still a target while its record lives: the verdict holds until the record goes.
      targets.push_back({r.id, kv.lease, r.host, r.port});
      if (probe_->FoundDead(r.id, kv.lease)) {
        RevokeDead(r, kv.lease, "a member of the map");
        continue;
      }
    }
    live_ids.push_back(r.id);
    leases[r.id] = kv.lease;
    live.push_back({{r.id, r.host, r.port}, r.zone});
  }
  if (probe_ != nullptr) probe_->SetTargets(targets);
  targets_ = std::move(targets);
  auto commit = [&](SlotMap next, const char* what) -> Status {
    next.set_epoch(map.epoch() + 1);
    std::string value;
    next.Encode(&value);
    bool ok = false;
    Status t = etcd_->Txn(
        {e->StillLeader(), {Key("map"), C::kModRevision, C::kEqual, map_kv.mod_revision, {}}},
        {EtcdClient::Op::Put(Key("map"), value)}, {}, &ok);
    if (!t.ok()) return t;
    if (!ok) {  // the map changed meanwhile (look again next time), or we were deposed
      t = CheckStillLeader(*e);
      return t.code() == Code::kUnauthenticated ? t : Status::Ok();
    }
    LOG(INFO) << "cluster coordinator: " << what << "; map epoch " << next.epoch();
    *changed = true;
    return Status::Ok();
  };
  // A server being removed (`cluster remove`: its DrainRecord) counts as down for failover and
  // is never a new backup, but stays a live primary for re-replication (coordinator_drain.cc).
  std::vector<uint32_t> draining;
  s = ReadReports(&draining_, leases, &draining);
  if (!s.ok()) {  // the last answer: a failed range read must not hold failover up
    LOG_EVERY_N(WARNING, 20) << "cluster coordinator: reading NAME/draining/: " << s.ToString();
  }
  std::vector<uint32_t> serving;
  for (uint32_t id : live_ids)
    if (std::find(draining.begin(), draining.end(), id) == draining.end()) serving.push_back(id);
  // Replicas that may lack an acknowledged write (NAME/ringloss/) leave those slots first, in
  // the same transaction as a failover: a promotion never picks one.
  std::vector<SlotLoss> losses;
  if (s = ReadReports(&ring_losses_, leases, &losses); !s.ok()) {  // the last answer, as above
    LOG_EVERY_N(WARNING, 20) << "cluster coordinator: reading NAME/ringloss/: " << s.ToString();
  }
  SlotMap base = map;
  uint32_t loss_dropped = 0, loss_promoted = 0;
  if (!losses.empty()) {
    s = DropRingLossReplicas(map, losses, serving, &base, &loss_dropped, &loss_promoted);
    if (!s.ok()) return s;
  }
  FailoverPlan fp;
  s = PlanFailover(base, serving, &fp);
  if (!s.ok()) return s;
  std::string before, after;
  map.Encode(&before);
  fp.map.Encode(&after);
  if (before != after) {
    failovers_.fetch_add(fp.promoted.size() + loss_promoted);
    const std::string what =
        std::to_string(fp.promoted.size()) + " slot(s) failed over, " +
        std::to_string(fp.backups_dropped) + " backup(s) dropped, " + std::to_string(fp.stranded) +
        " slot(s) with no live replica, " + std::to_string(loss_dropped) +
        " replica(s) that may lack a write taken out (" + std::to_string(loss_promoted) +
        " slot(s) given another primary; NAME/ringloss/)";
    s = commit(fp.map, what.c_str());
    if (s.ok() && *changed) ring_loss_drops_.fetch_add(loss_dropped);
    return s;
  }
  std::vector<Avoid> avoid;
  s = ReadReports(&suspects_, leases, &avoid);
  if (!s.ok()) return s;
  if (!avoid.empty()) {
    SlotMap next;
    uint32_t dropped = 0;
    s = DropSuspectBackups(map, avoid, &next, &dropped);
    if (!s.ok()) return s;
    if (dropped > 0) {
      const std::string what = std::to_string(dropped) +
                               " backup(s) dropped: their primary reported them unreachable "
                               "(NAME/suspects/)";
      s = commit(next, what.c_str());
      if (s.ok() && *changed) suspect_drops_.fetch_add(dropped);
      return s;
    }
  }
  if (Stopping() || !rereplicate || std::chrono::steady_clock::now() < next_rereplication_)
    return Status::Ok();
  ReplicaPlan rp;
  // New backups keep both ways apart: a backup the primary cannot reach is likely unable to
  // reach it either, as the primary of its own slots.
  std::vector<Avoid> apart = avoid;
  for (const Avoid& a : avoid) apart.push_back({a.server, a.primary});
  for (uint32_t d : draining) {
    for (const ServerEntry& x : map.servers()) apart.push_back({x.id, d});
    for (const LiveServer& x : live) apart.push_back({x.entry.id, d});
  }
  s = PlanReplicaAdds(map, live, kAddBatch, &rp, apart, losses);
  if (!s.ok()) return s;
  if (rp.adds.empty()) {
    upkeep_idle_ = true;  // nothing to do until something changes
    return s;
  }
  if (rp.map.servers().size() != map.servers().size())  // new servers enter the map first
    return commit(rp.map, "live servers added to the map");
  // One batch: the adds of one (primary, new backup) pair, taken in turn (a pair that keeps
  // failing does not hold the others up).
  std::vector<std::pair<uint32_t, uint32_t>> pairs;
  for (const ReplicaAdd& a : rp.adds)
    if (std::find(pairs.begin(), pairs.end(), std::make_pair(a.from_id, a.to_id)) == pairs.end())
      pairs.emplace_back(a.from_id, a.to_id);
  const ReplicaAdd pick{0, pairs[rotation_ % pairs.size()].first,
                        pairs[rotation_ % pairs.size()].second};
  ++rotation_;
  std::vector<SlotMove> batch;
  for (const ReplicaAdd& a : rp.adds)
    if (a.from_id == pick.from_id && a.to_id == pick.to_id)
      batch.push_back({a.slot, a.from_id, a.to_id});
  uint32_t copied = 0;
  s = Move(e, batch, MigrationRecord::kAddReplica, &copied);
  if (s.code() == Code::kUnauthenticated) return s;
  if (!s.ok()) {
    LOG(WARNING) << "cluster coordinator: re-replication: " << s.ToString();
    // The next batch waits a second; failover checks go on meanwhile.
    next_rereplication_ = std::chrono::steady_clock::now() + std::chrono::seconds(1);
    return Status::Ok();
  }
  LOG(INFO) << "cluster coordinator: " << copied << " slot(s) copied to server " << batch[0].to_id
            << " (re-replication)";
  return Status::Ok();
}

}  // namespace rkv::cluster
