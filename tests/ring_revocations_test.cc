// SPDX-License-Identifier: Apache-2.0
// RingWritersToRevoke (server/cluster/ring_revocations.h): the primaries whose log rings a
// backup revokes before it applies a map: none when nothing it backs changed; a failed-over
// primary; both primaries of a hand-over; the primary of a slot it joins or leaves as a
// backup; every server when maps were skipped or none came before; never itself.
#include "server/cluster/ring_revocations.h"

#include <gtest/gtest.h>

namespace rkv::cluster {
namespace {

constexpr uint32_t kSlots = 4;

// Slot s: primary primaries[s], backup backups[s] (0: none).
SlotMap Map(uint64_t epoch, std::vector<uint32_t> primaries, std::vector<uint32_t> backups) {
  SlotMap m;
  EXPECT_TRUE(SlotMap::Create(kSlots, 2, 7, &m).ok());
  for (uint32_t id = 1; id <= 4; ++id) m.AddServer({id, "10.0.0." + std::to_string(id), 1});
  for (uint32_t s = 0; s < kSlots; ++s) {
    EXPECT_TRUE(m.Assign(s, 0, m.IndexOf(primaries[s])));
    if (backups[s] != 0) EXPECT_TRUE(m.Assign(s, 1, m.IndexOf(backups[s])));
  }
  m.set_epoch(epoch);
  return m;
}

using V = std::vector<uint32_t>;

TEST(RingRevocations, NothingThisServerBacksChanged) {
  const SlotMap a = Map(5, {1, 1, 3, 4}, {2, 2, 4, 3});
  const SlotMap b = Map(6, {1, 1, 4, 3}, {2, 2, 3, 4});  // slots 2, 3 changed: not backed by 2
  EXPECT_EQ(RingWritersToRevoke(&a, b, 2), V{});
}

TEST(RingRevocations, AFailedOverPrimary) {
  const SlotMap a = Map(5, {1, 1, 3, 4}, {2, 2, 4, 3});
  const SlotMap b = Map(6, {2, 2, 3, 4}, {0, 0, 4, 3});  // 1 died: 2 promoted
  EXPECT_EQ(RingWritersToRevoke(&a, b, 2), V{1});
}

// Three replicas: slot s has rows[s] = {primary, backup, backup}.
SlotMap Map3(uint64_t epoch, const std::vector<std::vector<uint32_t>>& rows) {
  SlotMap m;
  EXPECT_TRUE(SlotMap::Create(kSlots, 3, 7, &m).ok());
  for (uint32_t id = 1; id <= 4; ++id) m.AddServer({id, "10.0.0." + std::to_string(id), 1});
  for (uint32_t s = 0; s < kSlots; ++s)
    for (uint16_t r = 0; r < 3; ++r) EXPECT_TRUE(m.Assign(s, r, m.IndexOf(rows[s][r])));
  m.set_epoch(epoch);
  return m;
}

TEST(RingRevocations, BothPrimariesOfAHandOverThisServerStillBacks) {
  const SlotMap a = Map3(5, {{1, 2, 3}, {1, 2, 3}, {1, 2, 3}, {1, 2, 3}});
  const SlotMap b = Map3(6, {{3, 2, 1}, {1, 2, 3}, {1, 2, 3}, {1, 2, 3}});  // slot 0: 1 -> 3
  EXPECT_EQ(RingWritersToRevoke(&a, b, 2), (V{1, 3}));
}

TEST(RingRevocations, APrimaryOfASlotThisServerJoinsOrLeaves) {
  const SlotMap a = Map(5, {1, 1, 3, 4}, {2, 2, 4, 0});
  const SlotMap joined = Map(6, {1, 1, 3, 4}, {2, 2, 4, 2});
  EXPECT_EQ(RingWritersToRevoke(&a, joined, 2), V{4});
  const SlotMap left = Map(6, {1, 1, 3, 4}, {2, 3, 4, 0});
  EXPECT_EQ(RingWritersToRevoke(&a, left, 2), V{1});
}

TEST(RingRevocations, EveryServerWhenMapsWereSkippedOrNoneCameBefore) {
  const SlotMap a = Map(5, {1, 1, 3, 4}, {2, 2, 4, 3});
  const SlotMap c = Map(7, {1, 1, 3, 4}, {2, 2, 4, 3});  // the same, two epochs on
  EXPECT_EQ(RingWritersToRevoke(&a, c, 2), (V{1, 3, 4}));
  EXPECT_EQ(RingWritersToRevoke(nullptr, a, 2), (V{1, 3, 4}));
}

}  // namespace
}  // namespace rkv::cluster
