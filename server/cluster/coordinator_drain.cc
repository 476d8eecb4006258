// SPDX-License-Identifier: Apache-2.0
// The coordinator's `cluster remove` in a replicated cluster (docs/cluster.md, "Removing a
// server with replicas"). No data is moved: every slot of a replicated cluster already has its
// acknowledged writes on all of its replicas, so the removed server's roles are handed over the
// way a failure's are, without waiting for one:
//  1. a DrainRecord is put at NAME/draining/ID under the server's own membership lease (in a
//     transaction that checks this coordinator still leads);
//  2. Upkeep (coordinator_replicas.cc) counts a draining server as down for failover: its
//     primaries go to their first live backup and it leaves every slot's backups, in one fenced
//     map transaction (the server, alive, is fenced as a failed-over primary is: its backups
//     refuse its epoch, and it stops serving the slots once it applied the map); it stays live
//     for re-replication, as a primary only: a slot it alone holds gets a backup copied from it
//     first (never onto a draining server), and is then failed over the same way;
//  3. the request is answered once the server holds no replica of any slot.
// Re-replication then restores R replicas of the failed-over slots on the other servers.
#include <glog/logging.h>

#include <chrono>

#include "common/cluster/drain_record.h"
#include "common/cluster/leased_records.h"
#include "common/cluster/member_record.h"
#include "server/cluster/coordinator.h"

namespace rkv::cluster {

namespace {
// NAME/draining/ is read at most this often (an etcd range read; upkeep may run on every change).
// A live server's slots (copies may be needed first): less than kvctl's default --wait_ms
// (10 minutes), so that the answer, even a failure, reaches a kvctl that waits the default.
constexpr int kDrainLiveMs = 540000;
constexpr int kDrainDownMs = 15000;  // a down server's: failover only

uint32_t RolesOf(const SlotMap& map, uint32_t id) {
  const uint16_t index = map.IndexOf(id);
  if (index == kUnassigned) return 0;
  uint32_t n = 0;
  for (uint32_t slot = 0; slot < map.num_slots(); ++slot)
    for (uint16_t r = 0; r < map.replicas(); ++r)
      if (map.OwnerIndex(slot, r) == index) ++n;
  return n;
}
}  // namespace

Status Coordinator::Drain(Election* e, const SlotMap& map, const std::vector<EtcdKv>& members,
                          uint32_t id, ClusterResult* res) {
  int64_t lease = 0;
  for (const EtcdKv& kv : members) {
    MemberRecord r;
    if (MemberRecord::Decode(kv.value, &r).ok() && r.id == id) lease = kv.lease;
  }
  const uint32_t roles = RolesOf(map, id);
  // Put even when it holds nothing now: re-replication must not give it backups afterwards.
  if (lease != 0) {
    DrainRecord d;
    d.server = id;
    d.map_epoch = map.epoch();
    std::string value;
    Status s = d.Encode(&value);
    if (!s.ok()) return s;
    bool ok = false;
    s = etcd_->Txn({e->StillLeader()},
                   {EtcdClient::Op::Put(Key(d.KeySuffix().c_str()), value, lease)}, {}, &ok);
    if (!s.ok()) return s;
    if (!ok) return Status(Code::kUnauthenticated, "no longer the coordinator");
    draining_.Invalidate();  // seen by the next Upkeep
    LOG(INFO) << "cluster coordinator: server " << id << " drains (" << roles
              << " replica role(s)): its primaries fail over to their backups";
  }
  const auto deadline = std::chrono::steady_clock::now() +
                        std::chrono::milliseconds(lease != 0 ? kDrainLiveMs : kDrainDownMs);
  uint32_t left = roles;
  while (left > 0) {
    if (Stopping()) return Status(Code::kUnavailable, "the coordinator is stopping");
    if (std::chrono::steady_clock::now() >= deadline)
      return Status(Code::kUnavailable,
                    "server " + std::to_string(id) + " still holds " + std::to_string(left) +
                        " replica role(s)" +
                        (lease == 0 ? ": it is down and some of its slots have no other live "
                                      "replica; start it again first"
                                    : ": their backups are not all copied yet; ask again"));
    bool replicated = false, changed = false;
    Status s = Upkeep(e, true, &replicated, &changed);
    if (s.code() == Code::kUnauthenticated) return s;
    if (!s.ok()) LOG(WARNING) << "cluster coordinator: remove: " << s.ToString();
    bool found = false;
    EtcdKv kv;
    SlotMap now;
    s = etcd_->Get(Key("map"), &found, &kv, nullptr);
    if (!s.ok()) return s;
    if (!found || !SlotMap::Decode(kv.value, &now).ok())
      return Status(Code::kProtocolError, "the cluster's map is gone or does not decode");
    left = RolesOf(now, id);
    if (left > 0 && !changed) Pause(100);
  }
  res->moved = roles;
  if (roles == 0) {
    res->message =
        "server " + std::to_string(id) + " already holds no replica" +
        (lease != 0 ? std::string("; it is kept out of new backups while it runs") : std::string());
    return Status::Ok();
  }
  res->message = "server " + std::to_string(id) + " holds no replica: " + std::to_string(roles) +
                 " replica role(s) handed to the other servers (primaries failed over to their "
                 "backups; re-replication restores the missing backups)";
  return Status::Ok();
}

}  // namespace rkv::cluster
