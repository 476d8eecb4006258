// SPDX-License-Identifier: Apache-2.0
// The coordinator's rebalance of a replicated cluster (docs/cluster.md, "Rebalancing
// replicated slots"): rounds of role changes planned by PlanReplicaBalance, each batch (one
// primary, one target, one kind and replaced backup) a MigrationRecord that the slots'
// primary carries out (server/cluster/migrator_roles.cc). Failures are handled while a batch
// runs (MoveBatch runs the failover upkeep); a batch that fails ends the request with its
// error (the cluster stays consistent: a batch changes the map in one transaction or not at
// all), and `cluster rebalance` may simply be asked again.
#include <glog/logging.h>

#include <map>
#include <string>
#include <tuple>
#include <vector>

#include "common/cluster/replica_balance_plan.h"
#include "common/cluster/slot_map.h"
#include "server/cluster/coordinator.h"

namespace rkv::cluster {

namespace {
constexpr int kBalanceRounds = 32;  // rounds end by themselves well before (the plan's measure)
constexpr size_t kBalanceBatch = 512;
}  // namespace

Status Coordinator::BalanceReplicas(Election* e, uint32_t* replaced, uint32_t* handed) {
  for (int round = 0; round < kBalanceRounds; ++round) {
    bool found = false;
    EtcdKv kv;
    Status s = etcd_->Get(Key("map"), &found, &kv, nullptr);
    if (!s.ok()) return s;
    SlotMap map;
    if (!found) return Status(Code::kNotFound, "the cluster's map is gone");
    s = SlotMap::Decode(kv.value, &map);
    if (!s.ok()) return s;
    std::vector<EtcdKv> members;
    std::vector<LiveServer> live;
    std::map<uint32_t, int64_t> leases;
    s = ReadLive(true, &members, &live, &leases);
    if (!s.ok()) return s;
    std::vector<Avoid> avoid;                       // pairs a primary reported: never its backup
    (void)ReadReports(&suspects_, leases, &avoid);  // on a failed read, the last answer
    const std::vector<RoleStep> steps = PlanReplicaBalance(map, live, avoid);
    if (steps.empty()) return Status::Ok();
    // (kind, primary, target, replaced) -> slots, in slot order.
    std::map<std::tuple<int, uint32_t, uint32_t, uint32_t>, std::vector<uint32_t>> batches;
    for (const RoleStep& st : steps)
      batches[{st.kind, st.primary_id, st.to_id, st.replaced_id}].push_back(st.slot);
    LOG(INFO) << "cluster coordinator: replica balance round " << round + 1 << ": " << steps.size()
              << " step(s) in " << batches.size() << " batch(es)";
    for (const auto& [key, slots] : batches) {
      const auto& [kind, primary, to, gone] = key;
      for (size_t i = 0; i < slots.size(); i += kBalanceBatch) {
        const std::vector<uint32_t> batch(
            slots.begin() + long(i),
            slots.begin() + long(std::min(slots.size(), i + kBalanceBatch)));
        bool retry = false;
        s = MoveBatch(e, primary, to, batch,
                      kind == RoleStep::kHandover ? MigrationRecord::kHandover
                                                  : MigrationRecord::kReplaceBackup,
                      &retry, gone);
        if (!s.ok()) return s;
        (kind == RoleStep::kHandover ? *handed : *replaced) += uint32_t(batch.size());
      }
    }
  }
  return Status(Code::kTimeout,
                "the replicas did not balance in " + std::to_string(kBalanceRounds) + " rounds");
}

}  // namespace rkv::cluster
