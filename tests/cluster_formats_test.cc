// SPDX-License-Identifier: Apache-2.0
// The cluster's coordinator arithmetic and etcd records (issue 24): PlanRebalance
// (common/cluster/rebalance_plan.h) gives every slot in play to the live servers at floor/ceil of
// the fair share while moving only surplus slots, drains a removed server and leaves the slots of
// servers that are not live alone; ClusterRequest/ClusterResult (cluster_request.h) and
// MigrationRecord (migration_record.h) round-trip and refuse every corruption and inconsistency;
// the ownership word (ownership_word.h) is readable only OWNED or MOVING at an epoch the reader's
// map already knows.
#include <gtest/gtest.h>

#include <algorithm>
#include <map>
#include <random>
#include <set>
#include <string>
#include <vector>

#include "common/cluster/cluster_request.h"
#include "common/cluster/le_bytes.h"
#include "common/cluster/migration_record.h"
#include "common/cluster/ownership_word.h"
#include "common/cluster/rebalance_plan.h"
#include "common/cluster/slot_map.h"
#include "common/printable.h"

namespace rkv::cluster {
namespace {

ServerEntry Server(uint32_t id) {
  return {id, "10.0.0." + std::to_string(id), uint16_t(7480 + id)};
}

SlotMap EmptyMap(uint32_t slots) {
  SlotMap m;
  EXPECT_TRUE(SlotMap::Create(slots, 1, 0x5eed, &m).ok());
  return m;
}

// Primary slots per server id in `m`, with the moves applied (slot -> to_id).
std::map<uint32_t, uint32_t> CountsAfter(const SlotMap& m, const std::vector<SlotMove>& moves) {
  std::map<uint32_t, uint32_t> moved_to;
  for (const SlotMove& mv : moves) moved_to[mv.slot] = mv.to_id;
  std::map<uint32_t, uint32_t> counts;
  for (uint32_t s = 0; s < m.num_slots(); ++s) {
    auto it = moved_to.find(s);
    if (it != moved_to.end()) {
      ++counts[it->second];
    } else if (const ServerEntry* o = m.Owner(s)) {
      ++counts[o->id];
    }
  }
  return counts;
}

// A map of `slots` slots spread over `ids` round-robin (balanced).
SlotMap BalancedMap(uint32_t slots, const std::vector<uint32_t>& ids) {
  SlotMap m = EmptyMap(slots);
  std::vector<uint16_t> idx;
  for (uint32_t id : ids) idx.push_back(m.AddServer(Server(id)));
  for (uint32_t s = 0; s < slots; ++s) EXPECT_TRUE(m.Assign(s, 0, idx[s % idx.size()]));
  m.set_epoch(5);
  return m;
}

TEST(RebalancePlan, EmptyMapGivesEverySlotEvenly) {
  for (uint32_t slots : {1u, 2u, 64u, 1024u, 16384u}) {
    RebalancePlan plan;
    ASSERT_TRUE(PlanRebalance(EmptyMap(slots), {Server(3), Server(1), Server(2)}, 0, &plan).ok());
    EXPECT_TRUE(plan.moves.empty());
    const SlotMap& m = plan.assigned;
    ASSERT_EQ(m.servers().size(), 3u);
    uint32_t lo = slots, hi = 0;
    for (uint16_t i = 0; i < 3; ++i) {
      lo = std::min(lo, m.SlotsOwnedBy(i));
      hi = std::max(hi, m.SlotsOwnedBy(i));
    }
    for (uint32_t s = 0; s < slots; ++s) EXPECT_NE(m.Owner(s), nullptr) << slots << " slot " << s;
    EXPECT_LE(hi - lo, 1u) << slots;
    EXPECT_EQ(m.SlotsOwnedBy(0) + m.SlotsOwnedBy(1) + m.SlotsOwnedBy(2), slots);
  }
}

TEST(RebalancePlan, NewServerTakesSurplusOnly) {
  for (uint32_t slots : {64u, 128u, 16384u}) {
    const SlotMap map = BalancedMap(slots, {1, 2, 3});
    RebalancePlan plan;
    ASSERT_TRUE(PlanRebalance(map, {Server(1), Server(2), Server(3), Server(4)}, 0, &plan).ok());
    EXPECT_EQ(plan.assigned.IndexOf(4), 3);
    std::set<uint32_t> seen;
    for (const SlotMove& mv : plan.moves) {
      EXPECT_EQ(mv.to_id, 4u) << "slot " << mv.slot;
      ASSERT_NE(map.Owner(mv.slot), nullptr);
      EXPECT_EQ(mv.from_id, map.Owner(mv.slot)->id);
      EXPECT_TRUE(seen.insert(mv.slot).second) << "slot " << mv.slot << " moved twice";
    }
    EXPECT_TRUE(
        std::is_sorted(plan.moves.begin(), plan.moves.end(),
                       [](const SlotMove& a, const SlotMove& b) { return a.slot < b.slot; }));
    const std::map<uint32_t, uint32_t> counts = CountsAfter(plan.assigned, plan.moves);
    ASSERT_EQ(counts.size(), 4u);
    for (const auto& [id, n] : counts) {
      EXPECT_GE(n, slots / 4) << slots << " server " << id;
      EXPECT_LE(n, (slots + 3) / 4) << slots << " server " << id;
    }
    // Only what the new server needs moves.
    EXPECT_EQ(plan.moves.size(), counts.at(4));
    // A second plan on the balanced result moves nothing.
    SlotMap after = plan.assigned;
    for (const SlotMove& mv : plan.moves) ASSERT_TRUE(after.Assign(mv.slot, 0, after.IndexOf(4)));
    RebalancePlan again;
    ASSERT_TRUE(PlanRebalance(after, {Server(1), Server(2), Server(3), Server(4)}, 0, &again).ok());
    EXPECT_TRUE(again.moves.empty());
  }
}

TEST(RebalancePlan, RemoveDrainsTheServer) {
  const SlotMap map = BalancedMap(64, {1, 2, 3, 4});
  RebalancePlan plan;
  ASSERT_TRUE(PlanRebalance(map, {Server(1), Server(2), Server(3), Server(4)}, 2, &plan).ok());
  std::set<uint32_t> drained;
  for (const SlotMove& mv : plan.moves) {
    EXPECT_NE(mv.to_id, 2u);
    EXPECT_EQ(mv.from_id, 2u) << "slot " << mv.slot << ": the others were balanced already";
    drained.insert(mv.slot);
  }
  for (uint32_t s = 0; s < 64; ++s)
    if (map.Owner(s)->id == 2) {
      EXPECT_EQ(drained.count(s), 1u) << "slot " << s << " not drained";
    }
  const std::map<uint32_t, uint32_t> counts = CountsAfter(plan.assigned, plan.moves);
  EXPECT_EQ(counts.count(2), 0u);
  for (uint32_t id : {1u, 3u, 4u}) {
    EXPECT_GE(counts.at(id), 64u / 3);
    EXPECT_LE(counts.at(id), 64u / 3 + 1);
  }
  // A removed server also takes none of the unassigned slots.
  RebalancePlan fresh;
  ASSERT_TRUE(PlanRebalance(EmptyMap(32), {Server(1), Server(2)}, 1, &fresh).ok());
  EXPECT_EQ(fresh.assigned.SlotsOwnedBy(fresh.assigned.IndexOf(1)), 0u);
  EXPECT_EQ(fresh.assigned.SlotsOwnedBy(fresh.assigned.IndexOf(2)), 32u);
}

TEST(RebalancePlan, SlotsOfServersNotLiveStay) {
  // Servers 1..4 own the map; 2 is down. Server 5 joins; 3 is being removed.
  SlotMap map = BalancedMap(64, {1, 2, 3, 4});
  for (uint32_t s = 60; s < 64; ++s) ASSERT_TRUE(map.Assign(s, 0, kUnassigned));
  RebalancePlan plan;
  ASSERT_TRUE(PlanRebalance(map, {Server(4), Server(1), Server(5), Server(3)}, 3, &plan).ok());
  for (const SlotMove& mv : plan.moves) {
    EXPECT_NE(mv.from_id, 2u) << "slot " << mv.slot;
    EXPECT_NE(mv.to_id, 2u) << "slot " << mv.slot;
  }
  for (uint32_t s = 0; s < 64; ++s) {
    const ServerEntry* before = map.Owner(s);
    const ServerEntry* after = plan.assigned.Owner(s);
    ASSERT_NE(after, nullptr) << "slot " << s << " left unassigned";
    if (before == nullptr) {
      EXPECT_NE(after->id, 2u) << "slot " << s << ": a dead server takes nothing";
    } else {
      EXPECT_EQ(after->id, before->id) << "slot " << s << " reassigned";
    }
  }
  // In play: 64 - 15 (server 2's) = 49 slots over servers 1, 4, 5.
  const std::map<uint32_t, uint32_t> counts = CountsAfter(plan.assigned, plan.moves);
  EXPECT_EQ(counts.at(2), 15u);
  EXPECT_EQ(counts.count(3), 0u);
  for (uint32_t id : {1u, 4u, 5u}) {
    EXPECT_GE(counts.at(id), 49u / 3) << id;
    EXPECT_LE(counts.at(id), 49u / 3 + 1) << id;
  }
}

TEST(RebalancePlan, NoLiveServerIsAnError) {
  const SlotMap map = BalancedMap(16, {1, 2});
  RebalancePlan plan;
  EXPECT_EQ(PlanRebalance(map, {}, 0, &plan).code(), Code::kInvalidArgument);
  EXPECT_EQ(PlanRebalance(map, {Server(1)}, 1, &plan).code(), Code::kInvalidArgument);
  EXPECT_EQ(PlanRebalance(EmptyMap(16), {}, 0, &plan).code(), Code::kInvalidArgument);
  // A live server whose id names another address in the map cannot enter it.
  EXPECT_EQ(PlanRebalance(map, {{1, "10.9.9.9", 1}}, 0, &plan).code(), Code::kInvalidArgument);
}

TEST(RebalancePlan, ServerTableOverflowIsAnError) {
  SlotMap map = EmptyMap(16);
  for (uint32_t id = 1; id <= kMaxServers; ++id)
    ASSERT_NE(map.AddServer({id, "h" + std::to_string(id), 1}), kUnassigned);
  RebalancePlan plan;
  EXPECT_EQ(PlanRebalance(map, {{kMaxServers + 1, "new", 1}}, 0, &plan).code(),
            Code::kInvalidArgument);
  EXPECT_TRUE(PlanRebalance(map, {{7, "h7", 1}}, 0, &plan).ok());
}

// Random maps (live, dead and unassigned owners, a removed server or none): the plan reaches
// floor/ceil with the fewest moves possible: each taker keeps min(held, target) with the
// larger targets given to those holding most, and the removed server's slots all move.
TEST(RebalancePlan, MovesAreMinimalOnRandomMaps) {
  std::mt19937 rng(24);
  for (int round = 0; round < 300; ++round) {
    const uint32_t slots = 1u << (rng() % 9);
    const uint32_t servers = 1 + rng() % 6;
    SlotMap map = EmptyMap(slots);
    std::vector<uint16_t> idx;
    for (uint32_t id = 1; id <= servers; ++id) idx.push_back(map.AddServer(Server(id)));
    for (uint32_t s = 0; s < slots; ++s) {
      const uint32_t pick = rng() % (servers + 1);
      if (pick < servers) {
        ASSERT_TRUE(map.Assign(s, 0, idx[pick]));
      }
    }
    std::vector<ServerEntry> live;
    std::set<uint32_t> live_ids;
    for (uint32_t id = 1; id <= servers + 2; ++id)
      if (rng() % 3 != 0) {
        live.push_back(Server(id));
        live_ids.insert(id);
      }
    const uint32_t remove = rng() % 2 ? 1 + rng() % (servers + 2) : 0;
    std::set<uint32_t> takers = live_ids;
    takers.erase(remove);
    RebalancePlan plan;
    const Status s = PlanRebalance(map, live, remove, &plan);
    if (takers.empty()) {
      EXPECT_EQ(s.code(), Code::kInvalidArgument) << round;
      continue;
    }
    ASSERT_TRUE(s.ok()) << round << ": " << s.ToString();

    std::map<uint32_t, uint32_t> held;  // live id -> slots before
    uint32_t in_play = 0;
    for (uint32_t sl = 0; sl < slots; ++sl) {
      const ServerEntry* o = map.Owner(sl);
      if (o == nullptr || live_ids.count(o->id)) ++in_play;
      if (o != nullptr && live_ids.count(o->id)) ++held[o->id];
    }
    std::vector<uint32_t> sizes;
    for (uint32_t id : takers) sizes.push_back(held[id]);
    std::sort(sizes.rbegin(), sizes.rend());
    const uint32_t n = uint32_t(takers.size()), base = in_play / n, extra = in_play % n;
    size_t minimal = live_ids.count(remove) ? held[remove] : 0;
    for (uint32_t i = 0; i < n; ++i) {
      const uint32_t t = base + (i < extra ? 1 : 0);
      if (sizes[i] > t) minimal += sizes[i] - t;
    }
    EXPECT_EQ(plan.moves.size(), minimal) << round;

    for (const SlotMove& mv : plan.moves) {
      const ServerEntry* o = map.Owner(mv.slot);
      ASSERT_NE(o, nullptr) << round;
      EXPECT_EQ(mv.from_id, o->id);
      EXPECT_TRUE(live_ids.count(mv.from_id)) << round << ": a slot of a dead server moves";
      EXPECT_TRUE(takers.count(mv.to_id)) << round;
      EXPECT_NE(mv.from_id, mv.to_id);
      EXPECT_EQ(plan.assigned.Owner(mv.slot)->id, o->id) << "moves are not applied to the map";
    }
    const std::map<uint32_t, uint32_t> counts = CountsAfter(plan.assigned, plan.moves);
    for (uint32_t sl = 0; sl < slots; ++sl) {
      const ServerEntry* before = map.Owner(sl);
      if (before == nullptr) {
        ASSERT_NE(plan.assigned.Owner(sl), nullptr) << round << " slot " << sl;
        EXPECT_TRUE(takers.count(plan.assigned.Owner(sl)->id)) << round;
      } else {
        EXPECT_EQ(plan.assigned.Owner(sl)->id, before->id) << round << " slot " << sl;
      }
    }
    for (uint32_t id : takers) {
      const uint32_t c = counts.count(id) ? counts.at(id) : 0;
      EXPECT_GE(c, base) << round << " server " << id;
      EXPECT_LE(c, base + (extra ? 1 : 0)) << round << " server " << id;
    }
    if (remove != 0 && live_ids.count(remove)) {
      EXPECT_EQ(counts.count(remove), 0u) << round;
    }
  }
}

TEST(ClusterRequest, RoundTrips) {
  for (const ClusterRequest& r :
       {ClusterRequest{ClusterRequest::kRebalance, 0x0123456789abcdefull, 0},
        ClusterRequest{ClusterRequest::kRemove, 1, 77}}) {
    const std::string bytes = r.Encode();
    ASSERT_EQ(bytes.size(), kRequestBytes);
    ClusterRequest d;
    ASSERT_TRUE(ClusterRequest::Decode(bytes, &d).ok());
    EXPECT_EQ(d.kind, r.kind);
    EXPECT_EQ(d.nonce, r.nonce);
    EXPECT_EQ(d.server_id, r.server_id);
    EXPECT_EQ(d.Encode(), bytes);
  }
}

TEST(ClusterRequest, EveryCorruptionIsRefused) {
  const std::string bytes = ClusterRequest{ClusterRequest::kRemove, 99, 3}.Encode();
  ClusterRequest d;
  for (size_t i = 0; i < bytes.size(); ++i)
    for (uint8_t x : {0x01, 0x40, 0xff}) {
      std::string bad = bytes;
      bad[i] = char(bad[i] ^ x);
      const Status s = ClusterRequest::Decode(bad, &d);
      EXPECT_EQ(s.code(), Code::kProtocolError) << "byte " << i << " ^ " << int(x);
    }
  for (size_t n : {size_t(0), size_t(31)})
    EXPECT_FALSE(ClusterRequest::Decode(bytes.substr(0, n), &d).ok()) << n;
  EXPECT_FALSE(ClusterRequest::Decode(bytes + '\0', &d).ok());
}

TEST(ClusterRequest, InconsistentRequestsAreRefused) {
  ClusterRequest d;
  Status s = ClusterRequest::Decode(ClusterRequest{ClusterRequest::kRemove, 5, 0}.Encode(), &d);
  EXPECT_EQ(s.code(), Code::kProtocolError) << "remove without a server";
  s = ClusterRequest::Decode(ClusterRequest{ClusterRequest::kRebalance, 5, 4}.Encode(), &d);
  EXPECT_EQ(s.code(), Code::kProtocolError) << "rebalance naming a server";
  for (uint16_t kind : {0, 3, 0xffff}) {
    ClusterRequest r{ClusterRequest::Kind(kind), 5, 4};
    EXPECT_EQ(ClusterRequest::Decode(r.Encode(), &d).code(), Code::kProtocolError) << kind;
  }
}

TEST(ClusterResult, RoundTrips) {
  ClusterResult r;
  r.code = Code::kUnavailable;
  r.nonce = 0xfeedface;
  r.assigned = 100;
  r.moved = 42;
  r.message = "12 unassigned slot(s) given, 42 moved";
  for (const std::string& msg : {std::string(), r.message, std::string(kMaxResultMessage, 'm')}) {
    r.message = msg;
    const std::string bytes = r.Encode();
    EXPECT_EQ(bytes.size(), kRequestBytes + msg.size());
    ClusterResult d;
    ASSERT_TRUE(ClusterResult::Decode(bytes, &d).ok());
    EXPECT_EQ(d.code, r.code);
    EXPECT_EQ(d.nonce, r.nonce);
    EXPECT_EQ(d.assigned, r.assigned);
    EXPECT_EQ(d.moved, r.moved);
    EXPECT_EQ(d.message, msg);
    EXPECT_EQ(d.Encode(), bytes);
  }
  // Longer messages are cut to the limit.
  r.message = std::string(kMaxResultMessage + 10, 'z');
  const std::string bytes = r.Encode();
  EXPECT_EQ(bytes.size(), kRequestBytes + kMaxResultMessage);
  ClusterResult d;
  ASSERT_TRUE(ClusterResult::Decode(bytes, &d).ok());
  EXPECT_EQ(d.message, std::string(kMaxResultMessage, 'z'));
}

// A message is stored as printable ASCII ('?' for any other byte), so a decoded result
// re-encodes to the same bytes (no escape level added per trip).
TEST(ClusterResult, EscapedMessagesRoundTripOnce) {
  ClusterResult r;
  r.message = "etcd said: a\nb \\ c";
  ClusterResult d;
  ASSERT_TRUE(ClusterResult::Decode(r.Encode(), &d).ok());
  EXPECT_EQ(d.message, "etcd said: a?b \\ c");
  EXPECT_EQ(d.Encode(), r.Encode());
}

TEST(ClusterResult, EveryCorruptionIsRefused) {
  ClusterResult r;
  r.code = Code::kOk;
  r.nonce = 7;
  r.assigned = 3;
  r.moved = 2;
  r.message = "done";
  const std::string bytes = r.Encode();
  ClusterResult d;
  for (size_t i = 0; i < bytes.size(); ++i)
    for (uint8_t x : {0x01, 0x40, 0xff}) {
      std::string bad = bytes;
      bad[i] = char(bad[i] ^ x);
      EXPECT_EQ(ClusterResult::Decode(bad, &d).code(), Code::kProtocolError)
          << "byte " << i << " ^ " << int(x);
    }
  for (size_t n : {size_t(0), size_t(31), bytes.size() - 1})
    EXPECT_FALSE(ClusterResult::Decode(bytes.substr(0, n), &d).ok()) << n;
  EXPECT_FALSE(ClusterResult::Decode(bytes + "x", &d).ok());
  // Too long even with a good checksum... the length is checked first.
  r.message = std::string(kMaxResultMessage, 'a');
  std::string longest = r.Encode();
  EXPECT_TRUE(ClusterResult::Decode(longest, &d).ok());
  EXPECT_EQ(ClusterResult::Decode(longest + "a", &d).code(), Code::kProtocolError);
  // A request is not a result, and the other way round.
  EXPECT_FALSE(ClusterResult::Decode(ClusterRequest{}.Encode(), &d).ok());
  ClusterRequest q;
  ClusterResult empty;
  EXPECT_FALSE(ClusterRequest::Decode(empty.Encode(), &q).ok());
}

MigrationRecord SampleRecord() {
  MigrationRecord r;
  r.state = MigrationRecord::kCopy;
  r.nonce = 0xabcdef0123456789ull;
  r.from_id = 3;
  r.to_id = 8;
  r.slots = {0, 5, 6, 1000, 65535};
  return r;
}

TEST(MigrationRecord, RoundTrips) {
  for (MigrationRecord::State st :
       {MigrationRecord::kCopy, MigrationRecord::kDone, MigrationRecord::kFailed}) {
    MigrationRecord r = SampleRecord();
    r.state = st;
    const std::string bytes = r.Encode();
    EXPECT_EQ(bytes.size(), 40 + 4 * r.slots.size());
    MigrationRecord d;
    ASSERT_TRUE(MigrationRecord::Decode(bytes, &d).ok());
    EXPECT_EQ(d.state, st);
    EXPECT_EQ(d.nonce, r.nonce);
    EXPECT_EQ(d.from_id, r.from_id);
    EXPECT_EQ(d.to_id, r.to_id);
    EXPECT_EQ(d.slots, r.slots);
    EXPECT_EQ(d.Encode(), bytes);
  }
  MigrationRecord full = SampleRecord();
  full.slots.clear();
  for (uint32_t s = 0; s < kMaxMigrationSlots; ++s) full.slots.push_back(s * 3);
  MigrationRecord d;
  ASSERT_TRUE(MigrationRecord::Decode(full.Encode(), &d).ok());
  EXPECT_EQ(d.slots, full.slots);
}

TEST(MigrationRecord, EveryCorruptionIsRefused) {
  const std::string bytes = SampleRecord().Encode();
  MigrationRecord d;
  for (size_t i = 0; i < bytes.size(); ++i)
    for (uint8_t x : {0x01, 0x40, 0xff}) {
      std::string bad = bytes;
      bad[i] = char(bad[i] ^ x);
      EXPECT_EQ(MigrationRecord::Decode(bad, &d).code(), Code::kProtocolError)
          << "byte " << i << " ^ " << int(x);
    }
  for (size_t n : {size_t(0), size_t(39), size_t(40), bytes.size() - 4, bytes.size() - 1})
    EXPECT_FALSE(MigrationRecord::Decode(bytes.substr(0, n), &d).ok()) << n;
  EXPECT_FALSE(MigrationRecord::Decode(bytes + "abcd", &d).ok());
  EXPECT_FALSE(MigrationRecord::Decode(bytes + "a", &d).ok());
}

TEST(MigrationRecord, InconsistentRecordsAreRefused) {
  MigrationRecord d;
  auto refused = [&](const MigrationRecord& r) {
    return MigrationRecord::Decode(r.Encode(), &d).code() == Code::kProtocolError;
  };
  MigrationRecord r = SampleRecord();
  r.slots = {1, 2, 2};
  EXPECT_TRUE(refused(r)) << "duplicate slot";
  r.slots = {5, 4};
  EXPECT_TRUE(refused(r)) << "descending slots";
  r = SampleRecord();
  r.to_id = r.from_id;
  EXPECT_TRUE(refused(r)) << "from == to";
  r = SampleRecord();
  r.slots.clear();
  EXPECT_TRUE(refused(r)) << "no slots";
  r.slots.resize(kMaxMigrationSlots + 1);
  for (uint32_t s = 0; s < r.slots.size(); ++s) r.slots[s] = s;
  EXPECT_TRUE(refused(r)) << "too many slots";
  for (uint16_t st : {0, 4, 0xffff}) {
    r = SampleRecord();
    r.state = MigrationRecord::State(st);
    EXPECT_TRUE(refused(r)) << "state " << st;
  }
}

// Version 2 (REPLACE_BACKUP, HANDOVER): a 48-byte header with the replaced server's id.
TEST(MigrationRecord, VersionTwoKindsRoundTripAndAreChecked) {
  MigrationRecord r = SampleRecord();
  r.kind = MigrationRecord::kReplaceBackup;
  r.replaced_id = 5;
  std::string bytes = r.Encode();
  EXPECT_EQ(bytes.size(), 48 + 4 * r.slots.size());
  EXPECT_EQ(uint8_t(bytes[4]), 2) << "version 2";
  MigrationRecord d;
  ASSERT_TRUE(MigrationRecord::Decode(bytes, &d).ok());
  EXPECT_EQ(d.kind, MigrationRecord::kReplaceBackup);
  EXPECT_EQ(d.replaced_id, 5u);
  EXPECT_EQ(d.slots, r.slots);
  EXPECT_TRUE(d.CopiesToBackup());
  EXPECT_EQ(d.Encode(), bytes);
  for (size_t i = 0; i < bytes.size(); ++i) {  // every byte flip refused
    std::string bad = bytes;
    bad[i] = char(bad[i] ^ 0x40);
    EXPECT_EQ(MigrationRecord::Decode(bad, &d).code(), Code::kProtocolError) << "byte " << i;
  }
  r.kind = MigrationRecord::kHandover;
  r.replaced_id = 0;
  ASSERT_TRUE(MigrationRecord::Decode(r.Encode(), &d).ok());
  EXPECT_EQ(d.kind, MigrationRecord::kHandover);
  EXPECT_FALSE(d.CopiesToBackup());
  // Version 1 kinds stay version 1 (40 bytes), readable by servers that predate version 2.
  r = SampleRecord();
  r.kind = MigrationRecord::kAddReplica;
  EXPECT_EQ(r.Encode().size(), 40 + 4 * r.slots.size());
  auto refused = [&](const MigrationRecord& x) {
    return MigrationRecord::Decode(x.Encode(), &d).code() == Code::kProtocolError;
  };
  r = SampleRecord();
  r.kind = MigrationRecord::kReplaceBackup;
  EXPECT_TRUE(refused(r)) << "REPLACE_BACKUP without a replaced server";
  r.replaced_id = r.from_id;
  EXPECT_TRUE(refused(r)) << "replacing the source";
  r.replaced_id = r.to_id;
  EXPECT_TRUE(refused(r)) << "replacing the target";
  r.kind = MigrationRecord::kHandover;
  r.replaced_id = 9;
  EXPECT_TRUE(refused(r)) << "a replaced server in a HANDOVER";
  r.kind = MigrationRecord::Kind(4);
  r.replaced_id = 0;
  EXPECT_TRUE(refused(r)) << "unknown kind";
  // A version 2 kind in a version 1 header, and the other way round.
  r = SampleRecord();
  r.kind = MigrationRecord::kHandover;
  bytes = r.Encode();
  std::string v1 = bytes.substr(0, 40) + bytes.substr(48);
  v1[4] = 1;
  for (int b = 32; b < 40; ++b) v1[b] = 0;
  PutLE(&v1, 32, ChecksumWithFieldZeroed(v1, 32), 8);
  EXPECT_EQ(MigrationRecord::Decode(v1, &d).code(), Code::kProtocolError);
  std::string reserved = bytes;
  reserved[44] = 1;
  for (int b = 32; b < 40; ++b) reserved[b] = 0;
  PutLE(&reserved, 32, ChecksumWithFieldZeroed(reserved, 32), 8);
  EXPECT_EQ(MigrationRecord::Decode(reserved, &d).code(), Code::kProtocolError);
}

TEST(OwnershipWord, FieldsAndNames) {
  const uint64_t w = OwnerWord(kMaxWordEpoch, SlotState::kMoving);
  EXPECT_EQ(WordEpoch(w), kMaxWordEpoch);
  EXPECT_EQ(WordState(w), SlotState::kMoving);
  EXPECT_EQ(w & 0xff, 0u);
  EXPECT_EQ(OwnerWord(0, SlotState::kNotOwned), 0u) << "zeroed memory is NOT_OWNED";
  EXPECT_EQ(OwnerWord(1, SlotState::kOwned), 0x10100u);
  EXPECT_STREQ(SlotStateName(SlotState::kNotOwned), "NOT_OWNED");
  EXPECT_STREQ(SlotStateName(SlotState::kOwned), "OWNED");
  EXPECT_STREQ(SlotStateName(SlotState::kMoving), "MOVING");
  EXPECT_STREQ(SlotStateName(SlotState::kImporting), "IMPORTING");
  EXPECT_STREQ(SlotStateName(SlotState(9)), "INVALID");
}

TEST(OwnershipWord, ReadableOnlyOwnedOrMovingAtAKnownEpoch) {
  for (uint64_t epoch : {uint64_t{0}, uint64_t{1}, uint64_t{7}, kMaxWordEpoch}) {
    for (SlotState st : {SlotState::kOwned, SlotState::kMoving}) {
      const uint64_t w = OwnerWord(epoch, st);
      EXPECT_TRUE(Readable(w, epoch)) << epoch;
      EXPECT_TRUE(Readable(w, epoch + 1)) << epoch;
      EXPECT_TRUE(Readable(w, ~uint64_t{0})) << epoch;
      if (epoch > 0) {
        EXPECT_FALSE(Readable(w, epoch - 1)) << "the word is newer than the map";
      }
      for (uint64_t low = 1; low < 256; low <<= 1)
        EXPECT_FALSE(Readable(w | low, epoch)) << "low byte " << low;
    }
    for (SlotState st :
         {SlotState::kNotOwned, SlotState::kImporting, SlotState(4), SlotState(0xff)})
      for (uint64_t map_epoch : {epoch, epoch + 1, ~uint64_t{0}})
        EXPECT_FALSE(Readable(OwnerWord(epoch, st), map_epoch))
            << SlotStateName(st) << " " << epoch;
  }
}

}  // namespace
}  // namespace rkv::cluster
