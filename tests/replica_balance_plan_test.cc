// SPDX-License-Identifier: Apache-2.0
// Replica balance planning (common/cluster/replica_balance_plan.h): rounds of REPLACE_BACKUP
// and HANDOVER steps, applied as the migrator's commits apply them, bring a new server to an
// even share of replicas and of primaries; never put two replicas of a slot on one server;
// never narrow a slot's zones; leave slots with a down or missing replica alone; plan nothing
// for a balanced or unreplicated map; and always end (random maps).
#include "common/cluster/replica_balance_plan.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <map>
#include <random>
#include <set>
#include <string>
#include <vector>

namespace rkv::cluster {
namespace {

ServerEntry Entry(uint32_t id) { return {id, "10.1.0." + std::to_string(id), 7480}; }

// `servers` servers (ids 1..), slot s's replicas on ids (s + r * stride) % first + 1 for the
// first `first` servers: an even spread over them.
SlotMap Spread(uint32_t slots, uint16_t replicas, uint32_t servers, uint32_t first) {
  SlotMap m;
  EXPECT_TRUE(SlotMap::Create(slots, replicas, 1, &m).ok());
  for (uint32_t id = 1; id <= servers; ++id) m.AddServer(Entry(id));
  for (uint32_t s = 0; s < slots; ++s)
    for (uint16_t r = 0; r < replicas; ++r) EXPECT_TRUE(m.Assign(s, r, uint16_t((s + r) % first)));
  return m;
}

// What the migrator's commit does for each step (migrator_roles.cc, EditMap).
void Apply(const RoleStep& st, SlotMap* m) {
  const uint16_t to = m->IndexOf(st.to_id);
  for (uint16_t r = 1; r < m->replicas(); ++r) {
    const uint16_t o = m->OwnerIndex(st.slot, r);
    if (st.kind == RoleStep::kReplaceBackup && o == m->IndexOf(st.replaced_id)) {
      ASSERT_TRUE(m->Assign(st.slot, r, kUnassigned));
      ASSERT_TRUE(m->Assign(st.slot, r, to)) << "a server twice in slot " << st.slot;
      return;
    }
    if (st.kind == RoleStep::kHandover && o == to) {
      const uint16_t p = m->OwnerIndex(st.slot);
      ASSERT_EQ(m->servers()[p].id, st.primary_id);
      ASSERT_TRUE(m->Assign(st.slot, r, kUnassigned));
      ASSERT_TRUE(m->Assign(st.slot, 0, to));
      ASSERT_TRUE(m->Assign(st.slot, r, p));
      return;
    }
  }
  FAIL() << "step for slot " << st.slot << " does not fit the map";
}

// Rounds until one plans nothing; the number of rounds.
int Converge(SlotMap* m, const std::vector<LiveServer>& live, size_t* steps = nullptr,
             const std::vector<Avoid>& avoid = {}) {
  for (int round = 0; round < 32; ++round) {  // the coordinator's bound (kBalanceRounds)
    const std::vector<RoleStep> plan = PlanReplicaBalance(*m, live, avoid);
    if (plan.empty()) return round;
    std::set<uint32_t> slots;
    for (const RoleStep& st : plan) {
      EXPECT_TRUE(slots.insert(st.slot).second) << "two steps for slot " << st.slot;
      EXPECT_EQ(m->Owner(st.slot)->id, st.primary_id);
      Apply(st, m);
    }
    if (steps) *steps += plan.size();
  }
  ADD_FAILURE() << "no end after 32 rounds";
  return 32;
}

std::map<uint32_t, int> Count(const SlotMap& m, bool primaries) {
  std::map<uint32_t, int> c;
  for (uint32_t s = 0; s < m.num_slots(); ++s)
    for (uint16_t r = 0; r < (primaries ? 1 : m.replicas()); ++r)
      if (const ServerEntry* o = m.Owner(s, r)) ++c[o->id];
  return c;
}

std::vector<LiveServer> Live(uint32_t n, const std::vector<std::string>& zones = {}) {
  std::vector<LiveServer> l;
  for (uint32_t id = 1; id <= n; ++id)
    l.push_back({Entry(id), zones.empty() ? std::string() : zones[(id - 1) % zones.size()]});
  return l;
}

TEST(ReplicaBalancePlan, ANewServerGetsAnEvenShareOfReplicasAndPrimaries) {
  for (uint16_t R : {2, 3}) {
    SlotMap m = Spread(64, R, 4, 3);  // server 4 joined, holds nothing
    size_t steps = 0;
    Converge(&m, Live(4), &steps);
    const auto rep = Count(m, false), prim = Count(m, true);
    for (uint32_t id = 1; id <= 4; ++id) {
      EXPECT_EQ(rep.at(id), 16 * R) << "R=" << R << " server " << id;
      EXPECT_EQ(prim.at(id), 16) << "R=" << R << " server " << id;
    }
    // Only what must move moved: server 4's share of the replicas, and its primaries.
    EXPECT_LE(steps, size_t(16 * R + 16)) << "R=" << R;
    for (uint32_t s = 0; s < 64; ++s) {
      std::set<uint32_t> ids;
      for (uint16_t r = 0; r < R; ++r) ids.insert(m.Owner(s, r)->id);
      EXPECT_EQ(ids.size(), R) << "slot " << s;
    }
  }
}

// Server 1 is primary of slots backed up only by server 2, which is primary of slots backed
// up only by server 3: no backup of server 1's slots is primary of too few, so the primary
// role goes 1 -> 2 in one slot and 2 -> 3 in another.
TEST(ReplicaBalancePlan, PrimariesMoveAlongAChainOfHandovers) {
  SlotMap m;
  ASSERT_TRUE(SlotMap::Create(8, 2, 1, &m).ok());
  for (uint32_t id = 1; id <= 3; ++id) m.AddServer(Entry(id));
  const uint32_t layout[8][2] = {{1, 2}, {1, 2}, {1, 2}, {1, 2}, {2, 3}, {2, 3}, {3, 1}, {3, 1}};
  for (uint32_t s = 0; s < 8; ++s)
    for (uint16_t r = 0; r < 2; ++r) ASSERT_TRUE(m.Assign(s, r, m.IndexOf(layout[s][r])));
  // Replicas: 1 has 6, 2 has 6, 3 has 4 (lo 5, hi 6): evened first; primaries 4/2/2 after.
  Converge(&m, Live(3));
  const auto prim = Count(m, true), rep = Count(m, false);
  for (uint32_t id = 1; id <= 3; ++id) {
    EXPECT_GE(prim.at(id), 2) << id;
    EXPECT_LE(prim.at(id), 3) << id;
    EXPECT_GE(rep.at(id), 5) << id;
    EXPECT_LE(rep.at(id), 6) << id;
  }
}

TEST(ReplicaBalancePlan, ABalancedOrUnreplicatedMapGetsNoStep) {
  EXPECT_TRUE(PlanReplicaBalance(Spread(64, 2, 4, 4), Live(4)).empty());
  EXPECT_TRUE(PlanReplicaBalance(Spread(64, 3, 3, 3), Live(3)).empty());
  EXPECT_TRUE(PlanReplicaBalance(Spread(64, 1, 4, 3), Live(4)).empty()) << "R=1: moves, not roles";
  EXPECT_TRUE(PlanReplicaBalance(Spread(64, 2, 2, 2), Live(1)).empty()) << "one live server";
}

TEST(ReplicaBalancePlan, SlotsWithADownOrMissingReplicaAreLeftAlone) {
  SlotMap m = Spread(64, 2, 4, 3);
  ASSERT_TRUE(m.Assign(5, 1, kUnassigned));  // short of a backup: re-replication's
  std::vector<LiveServer> live = Live(4);
  live.erase(live.begin() + 1);  // server 2 down: failover's
  const std::vector<RoleStep> plan = PlanReplicaBalance(m, live);
  ASSERT_FALSE(plan.empty());
  for (const RoleStep& st : plan) {
    EXPECT_NE(st.slot, 5u);
    for (uint16_t r = 0; r < 2; ++r) EXPECT_NE(m.Owner(st.slot, r)->id, 2u) << st.slot;
  }
}

TEST(ReplicaBalancePlan, ZonesStaySpread) {
  // Servers 1, 3 in zone a; 2, 4 in zone b; every slot starts on both zones (1+2 or 2+3).
  SlotMap m = Spread(64, 2, 4, 3);
  for (uint32_t s = 0; s < 64; ++s)
    if (m.Owner(s, 0)->id == 3 && m.Owner(s, 1)->id == 1) {  // 3+1: both in a; make it 3+2
      ASSERT_TRUE(m.Assign(s, 1, kUnassigned));
      ASSERT_TRUE(m.Assign(s, 1, m.IndexOf(2)));
    }
  const std::vector<LiveServer> live = Live(4, {"a", "b"});
  Converge(&m, live);
  for (uint32_t s = 0; s < 64; ++s)
    EXPECT_NE((m.Owner(s, 0)->id + 1) % 2, (m.Owner(s, 1)->id + 1) % 2)
        << "slot " << s << " has both replicas in one zone";
  const auto rep = Count(m, false);
  EXPECT_GT(rep.at(4), 0) << "the new server took replicas";
}

// Server 1 reported server 4 unreachable (the pair (1, 4)): server 4 never becomes a backup of
// a slot whose primary is server 1, by a replaced backup place or by a hand-over; it still
// takes its share under the other primaries.
TEST(ReplicaBalancePlan, AReportedPairIsNeverMadePrimaryAndBackup) {
  for (uint16_t R : {2, 3}) {
    SlotMap m = Spread(64, R, 4, 3);
    const std::vector<Avoid> avoid = {{1, 4}};
    Converge(&m, Live(4), nullptr, avoid);
    for (uint32_t s = 0; s < 64; ++s) {
      if (m.Owner(s)->id != 1) continue;
      for (uint16_t r = 1; r < R; ++r)
        EXPECT_NE(m.Owner(s, r)->id, 4u) << "R=" << R << " slot " << s;
    }
    EXPECT_GT(Count(m, false).at(4), 0) << "server 4 still took replicas of other primaries";
  }
}

TEST(ReplicaBalancePlan, RandomMapsEndBalancedWithDistinctReplicas) {
  std::mt19937 rng(7);
  for (int trial = 0; trial < 200; ++trial) {
    const uint16_t R = uint16_t(2 + rng() % 2);
    const uint32_t n = R + rng() % 5, slots = 1u << (rng() % 7);
    SlotMap m;
    ASSERT_TRUE(SlotMap::Create(slots, R, 1, &m).ok());
    for (uint32_t id = 1; id <= n; ++id) m.AddServer(Entry(id));
    for (uint32_t s = 0; s < slots; ++s) {
      std::vector<uint16_t> ids(n);
      for (uint32_t i = 0; i < n; ++i) ids[i] = uint16_t(i);
      std::shuffle(ids.begin(), ids.end(), rng);
      for (uint16_t r = 0; r < R; ++r) ASSERT_TRUE(m.Assign(s, r, ids[r]));
    }
    Converge(&m, Live(n));
    const auto rep = Count(m, false);
    int lo = 1 << 30, hi = 0;
    for (uint32_t id = 1; id <= n; ++id) {
      const int c = rep.count(id) ? rep.at(id) : 0;
      lo = std::min(lo, c);
      hi = std::max(hi, c);
    }
    EXPECT_LE(hi - lo, 1) << "trial " << trial << ": replicas not even";
    const auto prim = Count(m, true);
    lo = 1 << 30, hi = 0;
    for (uint32_t id = 1; id <= n; ++id) {
      const int c = prim.count(id) ? prim.at(id) : 0;
      lo = std::min(lo, c);
      hi = std::max(hi, c);
    }
    EXPECT_LE(hi - lo, 1) << "trial " << trial << ": primaries not even";
    for (uint32_t s = 0; s < slots; ++s) {
      std::set<uint32_t> ids;
      for (uint16_t r = 0; r < R; ++r) ids.insert(m.Owner(s, r)->id);
      EXPECT_EQ(ids.size(), R) << "trial " << trial << " slot " << s;
    }
  }
}

}  // namespace
}  // namespace rkv::cluster
