// SPDX-License-Identifier: Apache-2.0
#include "server/cluster/coordinator.h"

#include <glog/logging.h>

#include <algorithm>
#include <chrono>
#include <map>
#include <memory>
#include <vector>

#include "common/cluster/member_record.h"
#include "common/cluster/migration_record.h"
#include "common/cluster/rebalance_plan.h"
#include "common/cluster/replica_plan.h"
#include "common/cluster/slot_map.h"

namespace rkv::cluster {

namespace {
constexpr int kWaitMs = 1000;  // one wait for a request; bounds the destructor
constexpr int kRetryMs = 200;  // after an etcd error or lost compare
constexpr int kCommitTries = 16;
constexpr int kNoEtcdMs = 2000;  // the default --cluster_lease_ttl
}  // namespace

Coordinator::Coordinator(EtcdClient* etcd, ClusterAddress cluster, uint32_t my_id,
                         std::function<int64_t()> lease, LivenessProbe* probe)
    : etcd_(etcd),
      cluster_(std::move(cluster)),
      my_id_(my_id),
      lease_(std::move(lease)),
      probe_(probe) {}

void Coordinator::Start() {
  thread_ = std::thread([this] { Loop(); });
}

Coordinator::~Coordinator() {
  {
    std::lock_guard<std::mutex> l(mu_);
    stop_ = true;
  }
  cv_.notify_all();
  if (thread_.joinable()) thread_.join();
}

bool Coordinator::Stopping() {
  std::lock_guard<std::mutex> l(mu_);
  return stop_;
}

void Coordinator::Pause(int ms) {
  std::unique_lock<std::mutex> l(mu_);
  cv_.wait_for(l, std::chrono::milliseconds(ms), [this] { return stop_; });
}

void Coordinator::Loop() {
  // One candidacy per lease: a Campaign that timed out goes on waiting where it left off.
  std::unique_ptr<Election> candidacy;
  int64_t candidacy_lease = 0;
  while (!Stopping()) {
    const int64_t lease = lease_();
    if (lease == 0) {
      candidacy.reset();
      Pause(kRetryMs);
      continue;
    }
    if (!candidacy || candidacy_lease != lease) {
      candidacy = std::make_unique<Election>(etcd_, Key("coordinator/"), lease);
      candidacy_lease = lease;
    }
    Election& e = *candidacy;
    // With a probe (a replicated cluster), a wait ends as soon as the probe finds the leader
    // dead (looked at every 20 ms, no etcd call); then ProbeLeader revokes its lease. Between
    // waits ProbeLeader reads who leads (at most once a second).
    Status s = e.Campaign(std::to_string(my_id_), kWaitMs,
                          [this] { return LeaderFoundDead() || Stopping(); });
    if (s.code() == Code::kTimeout) {
      ProbeLeader();
      continue;
    }
    if (!s.ok()) {
      LOG_EVERY_N(WARNING, 20) << "cluster coordinator: campaign: " << s.ToString();
      candidacy.reset();
      Pause(kRetryMs);
      continue;
    }
    leading_.store(true);
    watch_from_ = 0;  // a new leadership reads everything again (ServeOnce)
    LOG(INFO) << "cluster coordinator: server " << my_id_ << " leads (fencing token "
              << e.fencing_token() << ")";
    auto last_ok = std::chrono::steady_clock::now();
    while (!Stopping() && lease_() == lease) {
      s = ServeOnce(&e);
      if (s.ok()) {
        last_ok = std::chrono::steady_clock::now();
        continue;
      }
      LOG(WARNING) << "cluster coordinator: " << s.ToString();
      if (s.code() == Code::kUnauthenticated) break;  // no longer the leader
      // Cut off from etcd for longer than a lease: another may lead by now, and this one could
      // act on no verdict anyway. The probe stops until an upkeep succeeds again.
      if (std::chrono::steady_clock::now() - last_ok > std::chrono::milliseconds(kNoEtcdMs) &&
          !targets_.empty()) {
        if (probe_ != nullptr) probe_->SetTargets({});
        targets_.clear();
        LOG(WARNING) << "cluster coordinator: no etcd answer for " << kNoEtcdMs
                     << " ms; the liveness probe stops until etcd answers";
      }
      Pause(kRetryMs);
    }
    leading_.store(false);
    if (probe_ != nullptr) probe_->SetTargets({});  // only the leader probes
    targets_.clear();
    next_leader_read_ = {};  // who leads now is read at the next ProbeLeader
    if (Stopping()) (void)e.Resign();
    candidacy.reset();  // the next candidacy reads the line afresh
  }
}

Status Coordinator::ServeOnce(Election* e) {
  bool found = false;
  EtcdKv req_kv;
  bool request_read = false;
  // A new leadership, after a request or a failed watch, and on every safety round
  // (kFullUpkeepMs): NAME/request is read, and the watch goes on after that read's revision
  // (a watch from an old revision would make etcd replay history, and compaction would pass
  // it). Every change after `revision` reaches the watch; the upkeep's reads see at least it.
  if (watch_from_ == 0 || std::chrono::steady_clock::now() >= next_full_upkeep_) {
    int64_t revision = 0;
    Status s = etcd_->Get(Key("request"), &found, &req_kv, &revision);
    if (!s.ok()) return s;
    watch_from_ = revision;
    dirty_ = true;
    request_maybe_ = false;
    request_read = true;
  }
  bool replicated = false;
  Status s = Maintain(e, &replicated);
  if (!s.ok()) return s;
  if (!request_read && request_maybe_) {
    request_maybe_ = false;
    s = etcd_->Get(Key("request"), &found, &req_kv, nullptr);
    if (!s.ok()) {
      request_maybe_ = true;
      return s;
    }
  }
  if (!found) {
    // Asleep until something changes under the cluster's prefix: a request (NAME/request), or
    // what the upkeep reads (the map, members, reports), or a probe verdict (looked at every
    // 20 ms without reading etcd: the watch is cut short), or the safety round.
    s = etcd_->Watch(
        cluster_.Prefix(), true, watch_from_ + 1, replicated ? kFullUpkeepMs : kWaitMs,
        [&](const std::vector<EtcdEvent>& ev, int64_t) {
          for (const EtcdEvent& x : ev) {
            watch_from_ = std::max(watch_from_, x.kv.mod_revision);
            if (x.kv.key == Key("request")) {
              if (!x.deleted) request_maybe_ = true;
            } else if (x.kv.key != Key("result")) {
              dirty_ = true;
            }
          }
          return request_maybe_ || dirty_ || Stopping();
        },
        [this] { return Stopping() || ProbeNews(); });
    if (s.code() == Code::kTimeout) return Status::Ok();
    if (!s.ok()) watch_from_ = 0;  // e.g. compacted past it: read everything again
    return s;
  }
  watch_from_ = 0;  // the request's work changed much: read everything again next time
  ClusterRequest req;
  ClusterResult res;
  s = ClusterRequest::Decode(req_kv.value, &req);
  if (!s.ok()) {
    res.code = s.code();
    res.message = "request refused: " + s.message();
  } else {
    res.nonce = req.nonce;
    s = Carry(e, req, &res);
    if (s.code() == Code::kUnauthenticated) return s;
    if (!s.ok()) {
      res.code = s.code();
      res.message = s.message();
    }
  }
  bool ok = false;
  s = etcd_->Txn(
      {e->StillLeader(),
       {Key("request"),
        EtcdClient::Compare::kModRevision,
        EtcdClient::Compare::kEqual,
        req_kv.mod_revision,
        {}}},
      {EtcdClient::Op::Delete(Key("request")), EtcdClient::Op::Put(Key("result"), res.Encode())},
      {}, &ok);
  if (!s.ok()) return s;
  // The request was replaced meanwhile (served next), or this leader was deposed.
  if (!ok) return CheckStillLeader(*e);
  requests_done_.fetch_add(1);
  LOG(INFO) << "cluster coordinator: request " << req.nonce << " done: " << CodeName(res.code)
            << " " << res.message;
  return Status::Ok();
}

Status Coordinator::CheckStillLeader(const Election& e) {
  std::string leader;
  int64_t token = 0;
  bool any = false;
  Status s = Election::Leader(etcd_, Key("coordinator/"), &leader, &token, &any);
  if (s.ok() && (!any || token != e.fencing_token()))
    return Status(Code::kUnauthenticated, "no longer the coordinator");
  return s;
}

Status Coordinator::ReadLive(bool replicated, std::vector<EtcdKv>* members,
                             std::vector<LiveServer>* live, std::map<uint32_t, int64_t>* leases) {
  bool more = false;
  members->clear();
  live->clear();
  Status s = etcd_->GetPrefix(Key("servers/"), members, nullptr, false, &more);
  if (!s.ok()) return s;
  std::map<uint32_t, int64_t> own;
  if (leases == nullptr) leases = &own;
  for (const EtcdKv& kv : *members) {
    MemberRecord r;
    if (MemberRecord::Decode(kv.value, &r).ok()) (*leases)[r.id] = kv.lease;
  }
  // A server being removed (its DrainRecord) takes no slot and no backup.
  std::vector<uint32_t> draining;
  if (replicated) (void)ReadReports(&draining_, *leases, &draining);  // failed: the last answer
  for (const EtcdKv& kv : *members) {
    MemberRecord r;
    if (!MemberRecord::Decode(kv.value, &r).ok()) {
      LOG(WARNING) << "cluster coordinator: ignoring " << kv.key << ": not a member record";
      continue;
    }
    if (std::find(draining.begin(), draining.end(), r.id) != draining.end()) continue;
    live->push_back({{r.id, r.host, r.port}, r.zone});
  }
  return Status::Ok();
}

Status Coordinator::Carry(Election* e, const ClusterRequest& req, ClusterResult* res) {
  for (int attempt = 0; attempt < kCommitTries; ++attempt) {
    bool found = false;
    EtcdKv map_kv;
    int64_t revision = 0;
    Status s = etcd_->Get(Key("map"), &found, &map_kv, &revision);
    if (!s.ok()) return s;
    if (!found) return Status(Code::kNotFound, "the cluster's map is gone");
    SlotMap map;
    s = SlotMap::Decode(map_kv.value, &map);
    if (!s.ok())
      return Status(Code::kProtocolError, "the cluster's map does not decode: " + s.message());
    std::vector<EtcdKv> members;
    std::vector<ServerEntry> live;
    std::vector<LiveServer> live_zoned;
    s = ReadLive(map.replicas() > 1, &members, &live_zoned);
    if (!s.ok()) return s;
    for (const LiveServer& l : live_zoned) live.push_back(l.entry);
    if (req.kind == ClusterRequest::kRemove && map.IndexOf(req.server_id) == kUnassigned)
      return Status(Code::kNotFound,
                    "server " + std::to_string(req.server_id) + " is not in the map");
    if (req.kind == ClusterRequest::kRemove && map.replicas() > 1)
      return Drain(e, map, members, req.server_id, res);
    if (req.kind == ClusterRequest::kRemove) {
      bool is_live = false;
      for (const ServerEntry& l : live) is_live = is_live || l.id == req.server_id;
      const uint32_t held = map.SlotsOwnedBy(map.IndexOf(req.server_id));
      if (!is_live && held > 0)
        return Status(Code::kUnavailable,
                      "server " + std::to_string(req.server_id) + " is down and holds " +
                          std::to_string(held) +
                          " slot(s): without replicas only it has their data; start it again "
                          "first");
    }
    RebalancePlan plan;
    s = PlanRebalance(map, live, req.kind == ClusterRequest::kRemove ? req.server_id : 0, &plan);
    if (!s.ok()) return s;
    uint32_t assigned = 0;
    for (uint32_t slot = 0; slot < map.num_slots(); ++slot)
      if (map.OwnerIndex(slot) == kUnassigned && plan.assigned.OwnerIndex(slot) != kUnassigned)
        ++assigned;
    if (map.replicas() > 1 && assigned > 0) {
      // Slots given now hold no data yet: their backups are named at once, no copy needed.
      ReplicaPlan rp;
      s = PlanReplicaAdds(plan.assigned, live_zoned, 0, &rp);
      if (!s.ok()) return s;
      for (const ReplicaAdd& a : rp.adds) {
        if (map.OwnerIndex(a.slot) != kUnassigned) continue;  // has data: re-replication copies
        uint16_t r = 1;
        while (r < plan.assigned.replicas() && plan.assigned.OwnerIndex(a.slot, r) != kUnassigned)
          ++r;
        if (r < plan.assigned.replicas())
          (void)plan.assigned.Assign(a.slot, r, plan.assigned.IndexOf(a.to_id));
      }
    }
    const bool changed = assigned > 0 || plan.assigned.servers().size() != map.servers().size();
    if (changed) {
      plan.assigned.set_epoch(map.epoch() + 1);
      std::string value;
      plan.assigned.Encode(&value);
      bool ok = false;
      s = etcd_->Txn({e->StillLeader(),
                      {Key("map"),
                       EtcdClient::Compare::kModRevision,
                       EtcdClient::Compare::kEqual,
                       map_kv.mod_revision,
                       {}}},
                     {EtcdClient::Op::Put(Key("map"), value)}, {}, &ok);
      if (!s.ok()) return s;
      if (!ok) {
        // The map changed under us, or we no longer lead: find out which.
        s = CheckStillLeader(*e);
        if (s.code() == Code::kUnauthenticated) return s;
        Pause(kRetryMs);
        continue;
      }
    }
    res->assigned = assigned;
    uint32_t moved = 0;
    if (map.replicas() > 1) {  // roles move: backups replaced, primaries handed over
      uint32_t replaced = 0, handed = 0;
      s = BalanceReplicas(e, &replaced, &handed);
      res->moved = replaced + handed;
      const std::string done = std::to_string(assigned) + " unassigned slot(s) given, " +
                               std::to_string(replaced) + " backup(s) moved, " +
                               std::to_string(handed) + " primary role(s) handed over";
      if (!s.ok()) return Status(s.code(), done + "; then: " + s.message());
      res->message = done + "; " + std::to_string(live.size()) + " live server(s)";
      return Status::Ok();
    }
    s = Move(e, plan.moves, MigrationRecord::kMove, &moved);
    res->moved = moved;
    if (!s.ok())
      return Status(s.code(), std::to_string(assigned) + " unassigned slot(s) given, " +
                                  std::to_string(moved) + " of " +
                                  std::to_string(plan.moves.size()) +
                                  " moved; then: " + s.message());
    res->message = std::to_string(assigned) + " unassigned slot(s) given, " +
                   std::to_string(moved) + " slot(s) moved; " + std::to_string(live.size()) +
                   " live server(s)";
    return Status::Ok();
  }
  return Status(Code::kTimeout, "the map kept changing during the request");
}

}  // namespace rkv::cluster
