// SPDX-License-Identifier: Apache-2.0
// Replica planning (common/cluster/replica_plan.h): failover promotes a slot's first live backup
// and clears its other replicas, drops dead backups of live primaries and compacts the rest,
// counts stranded slots and changes nothing when all are live; replica adds pick servers that
// hold no replica of the slot, other zones first, then the least loaded, within the limit, only
// for slots whose primary is live, never onto a server the slot's primary reported, and put new
// live servers in the server table; a reported backup leaves its reporter's slots only.
#include "common/cluster/replica_plan.h"

#include <gtest/gtest.h>

#include <map>
#include <set>
#include <string>
#include <vector>

namespace rkv::cluster {
namespace {

ServerEntry Server(uint32_t id) {
  return {id, "10.0.0." + std::to_string(id), uint16_t(7480 + id)};
}

// A map of `slots` slots, `replicas` per slot, with servers 1..`servers` in the table (index
// id - 1) and each slot's replicas set from `owners` (ids; 0: unassigned) by slot index.
SlotMap MakeMap(uint32_t slots, uint16_t replicas, uint32_t servers,
                const std::map<uint32_t, std::vector<uint32_t>>& owners) {
  SlotMap m;
  EXPECT_TRUE(SlotMap::Create(slots, replicas, 0x5eed, &m).ok());
  for (uint32_t id = 1; id <= servers; ++id) EXPECT_EQ(m.AddServer(Server(id)), id - 1);
  for (const auto& [slot, ids] : owners)
    for (size_t r = 0; r < ids.size(); ++r)
      if (ids[r] != 0) {
        EXPECT_TRUE(m.Assign(slot, uint16_t(r), m.IndexOf(ids[r]))) << slot << " " << r;
      }
  m.set_epoch(7);
  return m;
}

// Slot's replicas as ids (0: unassigned).
std::vector<uint32_t> Ids(const SlotMap& m, uint32_t slot) {
  std::vector<uint32_t> ids;
  for (uint16_t r = 0; r < m.replicas(); ++r) {
    const ServerEntry* o = m.Owner(slot, r);
    ids.push_back(o ? o->id : 0);
  }
  return ids;
}

std::vector<LiveServer> Live(const std::vector<uint32_t>& ids, const std::string& zone = "") {
  std::vector<LiveServer> live;
  for (uint32_t id : ids) live.push_back({Server(id), zone});
  return live;
}

using V = std::vector<uint32_t>;

TEST(ReplicaPlan, FailoverPromotesFirstLiveBackupAndKeepsTheLiveOthers) {
  const SlotMap map = MakeMap(
      8, 3, 4, {{0, {1, 2, 3}}, {1, {1, 2, 3}}, {2, {1, 0, 3}}, {3, {2, 1, 3}}, {4, {4, 1, 2}}});
  FailoverPlan plan;
  ASSERT_TRUE(PlanFailover(map, {3, 4, 2}, &plan).ok());  // 1 is down
  // 3 is live: kept as the promoted server's backup (resynced by it: Replicator::Resync), so
  // R = 3 keeps two copies after one failure.
  EXPECT_EQ(Ids(plan.map, 0), (V{2, 3, 0}));
  EXPECT_EQ(Ids(plan.map, 1), (V{2, 3, 0}));
  EXPECT_EQ(Ids(plan.map, 2), (V{3, 0, 0}));  // a hole before the first live backup
  EXPECT_EQ(Ids(plan.map, 3), (V{2, 3, 0}));  // live primary: dead backup out, 3 moves up
  EXPECT_EQ(Ids(plan.map, 4), (V{4, 2, 0}));
  EXPECT_EQ(plan.promoted, (V{0, 1, 2}));
  EXPECT_EQ(plan.backups_dropped, 0u + 0u + 0u + 1u + 1u);  // only the dead server's roles
  EXPECT_EQ(plan.stranded, 0u);
  EXPECT_EQ(plan.map.epoch(), 7u);
  // With 2 down too, the promoted backup is the first live one, past a dead one.
  ASSERT_TRUE(PlanFailover(map, {3, 4}, &plan).ok());
  EXPECT_EQ(Ids(plan.map, 0), (V{3, 0, 0}));
  EXPECT_EQ(Ids(plan.map, 3), (V{3, 0, 0}));
  EXPECT_EQ(Ids(plan.map, 4), (V{4, 0, 0}));
  EXPECT_EQ(plan.promoted, (V{0, 1, 2, 3}));
  // Applied again to its own output with the same live servers: nothing changes.
  const SlotMap once = plan.map;
  ASSERT_TRUE(PlanFailover(once, {3, 4}, &plan).ok());
  EXPECT_TRUE(plan.promoted.empty());
  EXPECT_EQ(plan.backups_dropped, 0u);
  // Nor does the first plan's output (kept backups included) with its live servers.
  ASSERT_TRUE(PlanFailover(map, {3, 4, 2}, &plan).ok());
  const SlotMap kept = plan.map;
  ASSERT_TRUE(PlanFailover(kept, {3, 4, 2}, &plan).ok());
  EXPECT_TRUE(plan.promoted.empty());
  EXPECT_EQ(plan.backups_dropped, 0u);
  for (uint32_t slot = 0; slot < 5; ++slot) EXPECT_EQ(Ids(plan.map, slot), Ids(kept, slot));
}

TEST(ReplicaPlan, FailoverDropsDeadBackupsAndCompacts) {
  const SlotMap map = MakeMap(4, 3, 4, {{0, {1, 2, 3}}, {1, {1, 0, 3}}, {2, {4, 2, 3}}});
  FailoverPlan plan;
  ASSERT_TRUE(PlanFailover(map, {1, 3, 4}, &plan).ok());
  EXPECT_EQ(Ids(plan.map, 0), (V{1, 3, 0}));
  EXPECT_EQ(Ids(plan.map, 1), (V{1, 3, 0}));  // nothing dropped, but compacted
  EXPECT_EQ(Ids(plan.map, 2), (V{4, 3, 0}));
  EXPECT_EQ(Ids(plan.map, 3), (V{0, 0, 0}));
  EXPECT_TRUE(plan.promoted.empty());
  EXPECT_EQ(plan.backups_dropped, 2u);
  EXPECT_EQ(plan.stranded, 0u);
}

TEST(ReplicaPlan, FailoverCountsStrandedSlots) {
  const SlotMap map = MakeMap(4, 2, 3, {{0, {1, 2}}, {1, {1, 0}}, {2, {3, 1}}});
  FailoverPlan plan;
  ASSERT_TRUE(PlanFailover(map, {3}, &plan).ok());
  EXPECT_EQ(Ids(plan.map, 0), (V{1, 2}));  // unchanged
  EXPECT_EQ(Ids(plan.map, 1), (V{1, 0}));
  EXPECT_EQ(Ids(plan.map, 2), (V{3, 0}));
  EXPECT_EQ(Ids(plan.map, 3), (V{0, 0}));  // no primary: not stranded, just unassigned
  EXPECT_EQ(plan.stranded, 2u);
  EXPECT_TRUE(plan.promoted.empty());
  EXPECT_EQ(plan.backups_dropped, 1u);
  // Without replicas, every slot of a dead server is stranded.
  ASSERT_TRUE(PlanFailover(MakeMap(4, 1, 2, {{0, {1}}, {1, {2}}, {2, {1}}}), {2}, &plan).ok());
  EXPECT_EQ(plan.stranded, 2u);
  EXPECT_EQ(Ids(plan.map, 0), (V{1}));
}

TEST(ReplicaPlan, FailoverWithAllLiveChangesNothing) {
  const SlotMap map = MakeMap(16, 3, 5, {{0, {1, 2, 3}}, {5, {4, 5, 0}}, {9, {2, 0, 0}}});
  FailoverPlan plan;
  ASSERT_TRUE(PlanFailover(map, {1, 2, 3, 4, 5, 99}, &plan).ok());  // 99: not in the map
  std::string before, after;
  map.Encode(&before);
  plan.map.Encode(&after);
  EXPECT_EQ(before, after);
  EXPECT_TRUE(plan.promoted.empty());
  EXPECT_EQ(plan.backups_dropped, 0u);
  EXPECT_EQ(plan.stranded, 0u);
}

TEST(ReplicaPlan, AddsChooseDistinctServersAndBalanceCounts) {
  std::map<uint32_t, std::vector<uint32_t>> owners;
  for (uint32_t s = 0; s < 16; ++s) owners[s] = {s % 4 + 1};
  const SlotMap map = MakeMap(16, 3, 4, owners);
  ReplicaPlan plan;
  ASSERT_TRUE(PlanReplicaAdds(map, Live({4, 3, 2, 1}), 0, &plan).ok());
  ASSERT_EQ(plan.adds.size(), 32u);
  SlotMap applied = plan.map;
  std::map<uint32_t, uint32_t> count;  // replicas per id after the adds
  for (const ReplicaAdd& a : plan.adds) {
    EXPECT_EQ(a.from_id, map.Owner(a.slot)->id);
    EXPECT_EQ(plan.map.Owner(a.slot, 1), nullptr) << "the plan must not assign " << a.slot;
    const uint16_t r = uint16_t(ReplicasOf(applied, a.slot));
    ASSERT_TRUE(applied.Assign(a.slot, r, applied.IndexOf(a.to_id))) << "slot " << a.slot;
  }
  for (uint32_t s = 0; s < 16; ++s) {
    EXPECT_EQ(ReplicasOf(applied, s), 3u);
    for (uint32_t id : Ids(applied, s)) ++count[id];
  }
  // 48 replicas over 4 servers: the greedy choice ends near 12 each, not exactly (the last
  // slots' primaries cannot take their own backups).
  for (uint32_t id = 1; id <= 4; ++id) {
    EXPECT_GE(count[id], 11u) << "server " << id;
    EXPECT_LE(count[id], 13u) << "server " << id;
  }
  // Ties go to the lowest id: slot 0 (primary 1) takes 2 then 3.
  EXPECT_EQ(plan.adds[0].to_id, 2u);
  EXPECT_EQ(plan.adds[1].to_id, 3u);
}

TEST(ReplicaPlan, AddsPreferOtherZones) {
  // Server 2 holds nothing but shares zone a with the primary; 3 (zone b) is busier.
  const SlotMap map = MakeMap(4, 3, 5, {{0, {1}}, {1, {3}}, {2, {3}}});
  std::vector<LiveServer> live = {{Server(1), "a"}, {Server(2), "a"}, {Server(3), "b"}};
  ReplicaPlan plan;
  ASSERT_TRUE(PlanReplicaAdds(map, live, 0, &plan).ok());
  ASSERT_GE(plan.adds.size(), 2u);
  EXPECT_EQ(plan.adds[0].slot, 0u);
  EXPECT_EQ(plan.adds[0].to_id, 3u);  // another zone first
  EXPECT_EQ(plan.adds[1].to_id, 2u);  // then no new zone is left: 2 only remains
  // A server with no zone is never taken to share one: preferred over zone a's server 2.
  live.push_back({Server(4), ""});
  ASSERT_TRUE(PlanReplicaAdds(map, live, 1, &plan).ok());
  ASSERT_EQ(plan.adds.size(), 1u);
  EXPECT_EQ(plan.adds[0].to_id, 4u);  // a new zone like 3's, and fewer replicas
  // Only servers without a zone besides zone a: 5 is no more in 4's zone than 2 is in 1's.
  live = {{Server(1), "a"}, {Server(2), "a"}, {Server(4), ""}, {Server(5), ""}};
  ASSERT_TRUE(PlanReplicaAdds(map, live, 2, &plan).ok());
  ASSERT_EQ(plan.adds.size(), 2u);
  EXPECT_EQ(plan.adds[0].to_id, 4u);
  EXPECT_EQ(plan.adds[1].to_id, 5u);  // "" is not equal to "": 5 is a new zone too
}

TEST(ReplicaPlan, AddsRespectLimit) {
  std::map<uint32_t, std::vector<uint32_t>> owners;
  for (uint32_t s = 0; s < 8; ++s) owners[s] = {s % 2 + 1};
  const SlotMap map = MakeMap(8, 2, 3, owners);
  ReplicaPlan plan;
  ASSERT_TRUE(PlanReplicaAdds(map, Live({1, 2, 3}), 3, &plan).ok());
  ASSERT_EQ(plan.adds.size(), 3u);
  for (uint32_t i = 0; i < 3; ++i) EXPECT_EQ(plan.adds[i].slot, i);
  ASSERT_TRUE(PlanReplicaAdds(map, Live({1, 2, 3}), 0, &plan).ok());
  EXPECT_EQ(plan.adds.size(), 8u);
  ASSERT_TRUE(PlanReplicaAdds(map, Live({1, 2, 3}), 100, &plan).ok());
  EXPECT_EQ(plan.adds.size(), 8u);
}

TEST(ReplicaPlan, AddsSkipSlotsWhosePrimaryIsDown) {
  const SlotMap map = MakeMap(4, 2, 3, {{0, {1}}, {1, {2}}, {2, {1, 3}}});
  ReplicaPlan plan;
  ASSERT_TRUE(PlanReplicaAdds(map, Live({2, 3}), 0, &plan).ok());  // 1 is down
  ASSERT_EQ(plan.adds.size(), 1u);  // slots 0 and 2: primary down; 3: no primary
  EXPECT_EQ(plan.adds[0].slot, 1u);
  EXPECT_EQ(plan.adds[0].from_id, 2u);
  EXPECT_EQ(plan.adds[0].to_id, 3u);
}

TEST(ReplicaPlan, AddsNeverChooseAHolderOfTheSlot) {
  // Slot 0 lacks one replica; its holders 1 and 2 are the least loaded servers.
  const SlotMap map = MakeMap(4, 3, 3, {{0, {1, 2}}, {1, {3, 0, 0}}, {2, {3}}, {3, {3}}});
  ReplicaPlan plan;
  ASSERT_TRUE(PlanReplicaAdds(map, Live({1, 2}), 0, &plan).ok());
  EXPECT_TRUE(plan.adds.empty());  // no eligible server for slot 0; 3 is down
  ASSERT_TRUE(PlanReplicaAdds(map, Live({1, 2, 3}), 0, &plan).ok());
  std::map<uint32_t, std::set<uint32_t>> chosen;
  for (const ReplicaAdd& a : plan.adds) {
    for (uint32_t id : Ids(map, a.slot)) EXPECT_NE(a.to_id, id) << "slot " << a.slot;
    EXPECT_TRUE(chosen[a.slot].insert(a.to_id).second) << "slot " << a.slot;
  }
  EXPECT_EQ(chosen[0], (std::set<uint32_t>{3}));
  EXPECT_EQ(chosen[1], (std::set<uint32_t>{1, 2}));
}

TEST(ReplicaPlan, AddsPutNewLiveServersInTheTable) {
  const SlotMap map = MakeMap(2, 2, 2, {{0, {1}}, {1, {2}}});
  ReplicaPlan plan;
  ASSERT_TRUE(PlanReplicaAdds(map, Live({1, 2, 9}), 0, &plan).ok());
  ASSERT_NE(plan.map.IndexOf(9), kUnassigned);
  EXPECT_EQ(plan.map.servers().size(), 3u);
  EXPECT_EQ(plan.map.epoch(), 7u);
  ASSERT_EQ(plan.adds.size(), 2u);
  EXPECT_EQ(plan.adds[0].to_id, 9u);  // holds nothing
  EXPECT_EQ(plan.adds[1].to_id, 1u);  // 9 now holds one, like 1: lower id
  // An id that names another address cannot enter the map.
  std::vector<LiveServer> bad = Live({1, 2});
  bad[1].entry.port = 1;
  const Status st = PlanReplicaAdds(map, bad, 0, &plan);
  EXPECT_EQ(st.code(), Code::kInvalidArgument);
  EXPECT_NE(st.message().find("server 2"), std::string::npos) << st.ToString();
}

TEST(ReplicaPlan, SuspectBackupsLeaveOnlyTheirReportersSlots) {
  // Primary 1 reported server 2; slot 3's primary (4) did not, so 2 stays its backup.
  const SlotMap map = MakeMap(
      8, 3, 4, {{0, {1, 2, 3}}, {1, {1, 3, 2}}, {2, {1, 3}}, {3, {4, 2, 1}}, {4, {2, 1, 3}}});
  SlotMap out;
  uint32_t dropped = 0;
  ASSERT_TRUE(DropSuspectBackups(map, {{1, 2}}, &out, &dropped).ok());
  EXPECT_EQ(dropped, 2u);
  EXPECT_EQ(Ids(out, 0), (V{1, 3, 0}));  // the later backup moved forward
  EXPECT_EQ(Ids(out, 1), (V{1, 3, 0}));
  EXPECT_EQ(Ids(out, 2), (V{1, 3, 0}));
  EXPECT_EQ(Ids(out, 3), (V{4, 2, 1}));
  EXPECT_EQ(Ids(out, 4), (V{2, 1, 3}));  // 2 is the primary here: a report never demotes one
  EXPECT_EQ(Ids(out, 5), (V{0, 0, 0}));
  EXPECT_EQ(out.epoch(), map.epoch());
  // Pairs naming servers not in the map, or no pair at all, change nothing.
  ASSERT_TRUE(DropSuspectBackups(map, {{9, 2}, {1, 9}}, &out, &dropped).ok());
  EXPECT_EQ(dropped, 0u);
  ASSERT_TRUE(DropSuspectBackups(map, {}, &out, &dropped).ok());
  EXPECT_EQ(dropped, 0u);
  std::string a, b;
  map.Encode(&a);
  out.Encode(&b);
  EXPECT_EQ(a, b);
}

TEST(ReplicaPlan, AddsNeverChooseAServerThePrimaryReported) {
  // Slots 0 and 1 (primary 1) and slot 2 (primary 2) lack their backup; 3 is least loaded.
  const SlotMap map = MakeMap(4, 2, 3, {{0, {1}}, {1, {1}}, {2, {2}}, {3, {3, 1}}});
  ReplicaPlan plan;
  ASSERT_TRUE(PlanReplicaAdds(map, Live({1, 2, 3}), 0, &plan, {{1, 3}, {1, 2}}).ok());
  std::map<uint32_t, uint32_t> to;
  for (const ReplicaAdd& a : plan.adds) to[a.slot] = a.to_id;
  EXPECT_EQ(to.count(0), 0u);  // 1 reported both others: no eligible server
  EXPECT_EQ(to.count(1), 0u);
  EXPECT_EQ(to[2], 3u);  // the pairs are 1's only
  ASSERT_TRUE(PlanReplicaAdds(map, Live({1, 2, 3}), 0, &plan, {{1, 3}}).ok());
  to.clear();
  for (const ReplicaAdd& a : plan.adds) to[a.slot] = a.to_id;
  EXPECT_EQ(to[0], 2u);
  EXPECT_EQ(to[1], 2u);
}

TEST(ReplicaPlan, RingLossTakesTheReporterOutOfThatSlotOnly) {
  const SlotMap map = MakeMap(8, 3, 4,
                              {{0, {1, 2, 3}},
                               {1, {1, 2, 3}},
                               {2, {1, 3, 2}},
                               {3, {2, 1, 3}},
                               {4, {2, 3, 4}},
                               {5, {4, 2, 3}}});
  SlotMap out;
  uint32_t dropped = 0, promoted = 0;
  const V live{1, 2, 3, 4};
  // 2 lacks a write of slots 0, 2, 3 and 4 (a backup; a backup; the primary: a promotion that
  // found the mark; the primary again); 3 lacks one of slot 4 too; slot 1 and slot 5 (server
  // 9 is in no map, slot 99 in no table) stay.
  ASSERT_TRUE(DropRingLossReplicas(map, {{2, 0}, {2, 2}, {2, 3}, {3, 4}, {2, 4}, {9, 5}, {2, 99}},
                                   live, &out, &dropped, &promoted)
                  .ok());
  EXPECT_EQ(Ids(out, 0), (V{1, 3, 0}));  // the later backup moved forward
  EXPECT_EQ(Ids(out, 1), (V{1, 2, 3}));  // another slot: 2 stays
  EXPECT_EQ(Ids(out, 2), (V{1, 3, 0}));
  EXPECT_EQ(Ids(out, 3), (V{1, 3, 0}));  // 2 gave way to its first clean live backup
  EXPECT_EQ(Ids(out, 4), (V{4, 0, 0}));  // 4 is its only clean backup
  EXPECT_EQ(Ids(out, 5), (V{4, 2, 3}));
  EXPECT_EQ(promoted, 2u);
  EXPECT_EQ(dropped, 5u);
  EXPECT_EQ(out.epoch(), map.epoch());
}

TEST(ReplicaPlan, RingLossNeverPromotesAReplicaThatLacksAWrite) {
  const SlotMap map = MakeMap(4, 3, 4, {{0, {1, 2, 3}}, {1, {1, 2, 3}}, {2, {1, 2}}});
  SlotMap out;
  uint32_t dropped = 0, promoted = 0;
  // Slot 0: primary 1 and backup 2 lack a write, 3 is down: nothing clean and live (its
  // backup 2 lacks one too), unchanged. Slot 1: primary 1 lacks one, its clean backups 2 and 3
  // are down: unchanged. Slot 2: every replica lacks one: unchanged.
  ASSERT_TRUE(DropRingLossReplicas(map, {{1, 0}, {2, 0}, {1, 1}, {1, 2}, {2, 2}}, {1, 4}, &out,
                                   &dropped, &promoted)
                  .ok());
  EXPECT_EQ(Ids(out, 0), (V{1, 2, 3}));
  EXPECT_EQ(Ids(out, 1), (V{1, 2, 3}));
  EXPECT_EQ(Ids(out, 2), (V{1, 2, 0}));
  EXPECT_EQ(promoted, 0u);
  // Only 3 of slot 1's clean backups is live: it leads, 2 (down) kept behind it for failover.
  ASSERT_TRUE(DropRingLossReplicas(map, {{1, 1}}, {1, 3}, &out, &dropped, &promoted).ok());
  EXPECT_EQ(Ids(out, 1), (V{3, 2, 0}));
  EXPECT_EQ(promoted, 1u);
  EXPECT_EQ(dropped, 1u);
  // A dead primary that lacks a write is left to PlanFailover; its lacking backup goes first,
  // so the failover promotes the clean one.
  ASSERT_TRUE(DropRingLossReplicas(map, {{1, 1}, {2, 1}}, {2, 3}, &out, &dropped, &promoted).ok());
  EXPECT_EQ(Ids(out, 1), (V{1, 3, 0}));
  FailoverPlan fp;
  ASSERT_TRUE(PlanFailover(out, {2, 3}, &fp).ok());
  EXPECT_EQ(Ids(fp.map, 1), (V{3, 0, 0}));
}

TEST(ReplicaPlan, RingLossNeverStrandsASlotItsReportedReplicasStillHold) {
  // Primary 1 is down and both backups reported a loss: dropping them would release (free)
  // the only live copies; the slot stays as it is (unavailable, never wrong).
  const SlotMap map = MakeMap(4, 3, 3, {{0, {1, 2, 3}}, {1, {1, 2, 3}}});
  SlotMap out;
  uint32_t dropped = 0, promoted = 0;
  ASSERT_TRUE(
      DropRingLossReplicas(map, {{2, 0}, {3, 0}, {2, 1}}, {2, 3}, &out, &dropped, &promoted).ok());
  EXPECT_EQ(Ids(out, 0), (V{1, 2, 3}));
  EXPECT_EQ(Ids(out, 1), (V{1, 3, 0}));  // 3 is clean and live here: 2 goes
  EXPECT_EQ(dropped, 1u);
  EXPECT_EQ(promoted, 0u);
}

TEST(ReplicaPlan, AddsNeverChooseAServerThatReportedALossOfTheSlot) {
  const SlotMap map = MakeMap(4, 2, 3, {{0, {1}}, {1, {1}}});
  ReplicaPlan plan;
  ASSERT_TRUE(PlanReplicaAdds(map, Live({1, 2, 3}), 0, &plan, {}, {{2, 0}, {3, 0}, {2, 1}}).ok());
  std::map<uint32_t, uint32_t> to;
  for (const ReplicaAdd& a : plan.adds) to[a.slot] = a.to_id;
  EXPECT_EQ(to.count(0), 0u);
  EXPECT_EQ(to[1], 3u);
  // A primary that reported a loss of its slot is copied from by no one.
  ASSERT_TRUE(PlanReplicaAdds(map, Live({1, 2, 3}), 0, &plan, {}, {{1, 1}}).ok());
  to.clear();
  for (const ReplicaAdd& a : plan.adds) to[a.slot] = a.to_id;
  EXPECT_EQ(to.count(1), 0u);
  EXPECT_EQ(to.count(0), 1u);
}

}  // namespace
}  // namespace rkv::cluster
