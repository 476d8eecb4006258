// SPDX-License-Identifier: Apache-2.0
// A HANDOVER migration record (server/cluster/migrator_roles.cc) carried out by a Migrator
// against the real etcd cluster of tests/etcd/etcd_client.sh, with an ownership table but no
// kvserver (a hand-over copies nothing, so no RDMA is needed): three servers, R=2, every slot's
// primary on server s % 3 + 1 and its backup on the next one; this process is server 1.
//  - handed over: the record ends DONE, the map (one epoch newer) names the backup as primary
//    and server 1 in its place, every other slot unchanged; server 1's words end BACKUP once
//    the map is applied (ClusterNode::Apply's part, done here by the test's applied_epoch);
//  - refused, the slots resumed (OWNED) and the map unchanged, the record FAILED: a slot whose
//    table lacks a write its backups hold (Replicator::LacksWrite), one with a kept write, a
//    target that is not the slots' backup, a target that is not live.
// Waits have deadlines; nothing asserts a timing.
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <memory>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "common/cluster/migration_record.h"
#include "common/cluster/ownership_word.h"
#include "common/cluster/slot_map.h"
#include "server/cluster/migrator.h"
#include "server/cluster/ownership_table.h"
#include "tests/etcd/replicated_cluster_test.h"

namespace rkv::cluster {
namespace {

class MigratorHandoverTest : public ReplicatedClusterTest {
 protected:
  void SetUp() override {
    ReplicatedClusterTest::SetUp();
    if (HasFatalFailure()) return;
    std::vector<uint32_t> owners(kSlots);
    for (uint32_t slot = 0; slot < kSlots; ++slot) owners[slot] = slot % 3 + 1;
    owners_ = std::make_unique<OwnershipTable>(words_, kSlots, 99);
    owners_->SetRouting(5, owners);
    for (uint32_t slot = 0; slot < kSlots; ++slot)
      owners_->Set(slot, OwnerWord(5, owners[slot] == 1   ? SlotState::kOwned
                                      : owners[slot] == 3 ? SlotState::kBackup
                                                          : SlotState::kNotOwned));
    for (uint32_t id : {1u, 2u}) Join(id);
  }
  void TearDown() override {
    migrator_.reset();
    ReplicatedClusterTest::TearDown();
  }
  // Starts server 1's migrator, puts a HANDOVER of `slots` to `to` and waits (up to 30 s) for
  // the record's final state.
  MigrationRecord::State Handover(const std::vector<uint32_t>& slots, uint32_t to) {
    MigratorOptions o;
    o.cluster = addr_;
    o.my_id = 1;
    o.has_kept = [this](uint32_t slot) { return kept_.count(slot) != 0; };
    o.settle_kept = [](uint32_t) { return true; };
    o.lacks_write = [this](uint32_t slot) { return lacking_.count(slot) != 0; };
    // What ClusterNode::Apply does for server 1 when the committed map arrives.
    o.applied_epoch = [this]() -> uint64_t {
      const SlotMap m = Map();
      if (m.epoch() == 5) return 5;
      std::vector<uint32_t> ids(kSlots);
      for (uint32_t slot = 0; slot < kSlots; ++slot) ids[slot] = m.Owner(slot)->id;
      owners_->SetRouting(m.epoch(), ids);
      for (uint32_t slot = 0; slot < kSlots; ++slot)
        if (owners_->HandingOver(slot) && m.Owner(slot, 1)->id == 1 &&
            WordState(owners_->Word(slot)) == SlotState::kMoving)
          owners_->Set(slot, OwnerWord(m.epoch(), SlotState::kBackup));
      return m.epoch();
    };
    migrator_ = std::make_unique<Migrator>(etcd_.get(), nullptr, owners_.get(), o);
    migrator_->Start();
    MigrationRecord rec;
    rec.kind = MigrationRecord::kHandover;
    rec.nonce = 77;
    rec.from_id = 1;
    rec.to_id = to;
    rec.slots = slots;
    EXPECT_TRUE(etcd_->Put(addr_.Prefix() + "migration", rec.Encode()).ok());
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(30);
    while (std::chrono::steady_clock::now() < deadline) {
      bool found = false;
      EtcdKv kv;
      MigrationRecord now;
      if (etcd_->Get(addr_.Prefix() + "migration", &found, &kv, nullptr).ok() && found &&
          MigrationRecord::Decode(kv.value, &now).ok() && now.state != MigrationRecord::kCopy) {
        migrator_.reset();  // its last steps (after the record) done
        return now.state;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
    return MigrationRecord::kCopy;
  }
  void ExpectUnchanged() {
    const SlotMap m = Map();
    EXPECT_EQ(m.epoch(), 5u);
    std::string a, b;
    m.Encode(&a);
    initial_.Encode(&b);
    EXPECT_EQ(a, b) << "the map changed";
    for (uint32_t slot : {0u, 3u, 6u})
      EXPECT_EQ(WordState(owners_->Word(slot)), SlotState::kOwned) << "slot " << slot;
  }

  alignas(8) uint64_t words_[kSlots] = {};
  std::unique_ptr<OwnershipTable> owners_;
  std::unique_ptr<Migrator> migrator_;
  std::set<uint32_t> kept_, lacking_;
};

// Server 1 is primary of slots 0, 3, 6, 9, 12, 15, whose backup is server 2.
TEST_F(MigratorHandoverTest, TheBackupBecomesPrimaryAndThePrimaryItsBackup) {
  ASSERT_EQ(Handover({0, 3, 6}, 2), MigrationRecord::kDone);
  const SlotMap m = Map();
  EXPECT_EQ(m.epoch(), 6u);
  for (uint32_t slot = 0; slot < kSlots; ++slot) {
    const bool moved = slot == 0 || slot == 3 || slot == 6;
    EXPECT_EQ(m.Owner(slot)->id, moved ? 2u : slot % 3 + 1) << slot;
    EXPECT_EQ(m.Owner(slot, 1)->id, moved ? 1u : (slot + 1) % 3 + 1) << slot;
  }
  for (uint32_t slot : {0u, 3u, 6u}) {
    EXPECT_EQ(WordState(owners_->Word(slot)), SlotState::kBackup) << slot;
    EXPECT_FALSE(owners_->HandingOver(slot));
  }
  EXPECT_EQ(WordState(owners_->Word(9)), SlotState::kOwned) << "not in the batch";
}

TEST_F(MigratorHandoverTest, ASlotLackingAWriteItsBackupsHoldIsNotHandedOver) {
  lacking_ = {3};
  EXPECT_EQ(Handover({0, 3, 6}, 2), MigrationRecord::kFailed);
  ExpectUnchanged();
}

TEST_F(MigratorHandoverTest, ASlotWithAKeptWriteIsNotHandedOver) {
  kept_ = {6};
  EXPECT_EQ(Handover({0, 3, 6}, 2), MigrationRecord::kFailed);
  ExpectUnchanged();
}

TEST_F(MigratorHandoverTest, OnlyToTheSlotsBackupAndOnlyToALiveServer) {
  EXPECT_EQ(Handover({0, 3}, 3), MigrationRecord::kFailed) << "server 3 is not their backup";
  ExpectUnchanged();
  ASSERT_TRUE(etcd_->Delete(addr_.Prefix() + "servers/2").ok());
  EXPECT_EQ(Handover({0, 3}, 2), MigrationRecord::kFailed) << "server 2 is not live";
  ExpectUnchanged();
}

}  // namespace
}  // namespace rkv::cluster
