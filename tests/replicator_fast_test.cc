// SPDX-License-Identifier: Apache-2.0
// Replicator's fast-path steps (server/cluster/replicator_fast.cc) without a network: the
// worker's side posts and gathers the backups' answers; these tests hand BeginFast's write the
// answers directly. What they pin down:
//  - a write every backup applied is applied here, numbered, counted, and the slot's lock
//    given back (the next write takes the next number);
//  - BeginFast declines while the slot's lock is held, and while a pool thread waits for it
//    (the fast path never overtakes a waiting Write: it would starve it);
//  - FailFast (shutdown): a write no backup can hold leaves its number unused; one a backup
//    may hold uses it up and is kept, and the slot's next write is then Write's (BeginFast
//    declines a slot holding a kept write);
//  - AbortFast gives the lock back and the number stays unused.
#include <gtest/gtest.h>

#include <chrono>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "common/cluster/ownership_word.h"
#include "common/cluster/slot_map.h"
#include "common/table/layout.h"
#include "server/cluster/ownership_table.h"
#include "server/cluster/replicator.h"
#include "server/store/table.h"

namespace rkv::cluster {
namespace {

constexpr uint32_t kSlots = 16;

class ReplicatorFastTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_TRUE(layout::ComputeGeometry(mem_.size(), 0, 0.25, 1234, &geo_));
    table_ = std::make_unique<Table>(mem_.data(), geo_);
    owners_ = std::make_unique<OwnershipTable>(words_, kSlots, 99);
    std::vector<uint32_t> ids(kSlots, 1);
    owners_->SetRouting(5, ids);
    for (uint32_t slot = 0; slot < kSlots; ++slot)
      owners_->Set(slot, OwnerWord(5, SlotState::kOwned));
    ReplicatorOptions o;
    o.max_wait_ms = 300;  // a pool write that cannot reach the (absent) backup gives up soon
    o.client.connect_timeout_ms = 100;
    o.client.rpc_timeout_ms = 100;
    r_ = std::make_unique<Replicator>(owners_.get(), table_.get(), o);
    r_->SetId(1);
    SlotMap m;
    ASSERT_TRUE(SlotMap::Create(kSlots, 2, 99, &m).ok());
    m.AddServer({1, "127.0.0.1", 1});
    m.AddServer({2, "127.0.0.1", 1});  // nothing listens: only Write would try it
    for (uint32_t slot = 0; slot < kSlots; ++slot) {
      ASSERT_TRUE(m.Assign(slot, 0, m.IndexOf(1)));
      ASSERT_TRUE(m.Assign(slot, 1, m.IndexOf(2)));
    }
    m.set_epoch(5);
    r_->SetMap(m);
  }
  // A key of `slot`.
  std::string KeyOf(uint32_t slot) {
    for (int i = 0;; ++i) {
      std::string k = "key-" + std::to_string(i);
      if (owners_->SlotOf(k) == slot) return k;
    }
  }
  Status Apply(const std::string& key, const std::string& value) { return table_->Put(key, value); }

  std::vector<uint8_t> mem_ = std::vector<uint8_t>(4 << 20);
  layout::Geometry geo_;
  std::unique_ptr<Table> table_;
  uint64_t words_[kSlots] = {};
  std::unique_ptr<OwnershipTable> owners_;
  std::unique_ptr<Replicator> r_;
};

TEST_F(ReplicatorFastTest, AWriteEveryBackupAppliedIsAppliedHereAndNumbered) {
  const std::string k = KeyOf(3);
  Replicator::FastWrite fw;
  ASSERT_TRUE(r_->BeginFast(3, true, k, "v1", &fw));
  EXPECT_EQ(fw.seq, 1u);
  ASSERT_EQ(fw.snap.backups.size(), 1u);
  EXPECT_EQ(fw.snap.backups[0].id, 2u);
  Replicator::FastWrite other;
  EXPECT_FALSE(r_->BeginFast(3, true, k, "v2", &other)) << "the slot's lock is held";
  Status ok[1] = {Status::Ok()};
  bool sent[1] = {true};
  EXPECT_TRUE(r_->EndFast(&fw, ok, sent, [&] { return Apply(k, "v1"); }).ok());
  std::string v;
  EXPECT_TRUE(table_->Get(k, &v).ok());
  EXPECT_EQ(v, "v1");
  EXPECT_EQ(owners_->Sequence(3), 1u);
  EXPECT_EQ(r_->fast_writes(), 1u);
  EXPECT_EQ(r_->writes(), 1u);
  ASSERT_TRUE(r_->BeginFast(3, true, k, "v2", &fw)) << "the lock was given back";
  EXPECT_EQ(fw.seq, 2u);
  r_->AbortFast(&fw);
  ASSERT_TRUE(r_->BeginFast(3, true, k, "v2", &fw));
  EXPECT_EQ(fw.seq, 2u) << "an aborted write leaves its number unused";
  r_->AbortFast(&fw);
}

TEST_F(ReplicatorFastTest, TheFastPathNeverOvertakesAWaitingPoolWrite) {
  const std::string k = KeyOf(5);
  Replicator::FastWrite fw;
  ASSERT_TRUE(r_->BeginFast(5, true, k, "v1", &fw));
  std::thread pool([&] {  // a pool thread's Write of the same slot: waits for the lock
    (void)r_->Write(5, true, k, "p", [&] { return Apply(k, "p"); });
  });
  std::this_thread::sleep_for(std::chrono::milliseconds(100));  // let it wait
  r_->AbortFast(&fw);
  // The pool thread waits for the lock, or holds it: its Write cannot reach the backup
  // (nothing listens; an I/O error is asked again every 50 ms), so it keeps the lock until its
  // 300 ms deadline. Either way the fast path must decline; before the fix it took the lock
  // from under the woken waiter.
  Replicator::FastWrite next;
  const bool began = r_->BeginFast(5, true, k, "v2", &next);
  EXPECT_FALSE(began) << "the fast path took the lock a waiting Write was promised";
  if (began) r_->AbortFast(&next);
  pool.join();
}

TEST_F(ReplicatorFastTest, FailFastUsesTheNumberOnlyIfABackupMayHoldTheWrite) {
  const std::string k = KeyOf(7);
  Replicator::FastWrite fw;
  ASSERT_TRUE(r_->BeginFast(7, true, k, "v1", &fw));
  Status full[1] = {Status(Code::kTableFull, "no room")};
  bool sent[1] = {true};
  r_->FailFast(&fw, full, sent);  // the backup said it did not apply it
  EXPECT_EQ(r_->kept(), 0u);
  ASSERT_TRUE(r_->BeginFast(7, true, k, "v1", &fw));
  EXPECT_EQ(fw.seq, 1u) << "nothing holds number 1: it is not used up";
  Status due[1] = {Status(Code::kBusy, "the server is stopping")};  // a reply still due
  r_->FailFast(&fw, due, sent);
  EXPECT_EQ(r_->kept(), 1u) << "the backup may hold it: kept as outcome unknown";
  EXPECT_EQ(owners_->Sequence(7), 1u);
  std::string v;
  EXPECT_TRUE(table_->Get(k, &v).IsNotFound()) << "never applied here";
  Replicator::FastWrite next;
  EXPECT_FALSE(r_->BeginFast(7, true, k, "v2", &next)) << "a kept write is Write's to resolve";
  EXPECT_TRUE(r_->BeginFast(8, true, KeyOf(8), "x", &next)) << "other slots are not held up";
  r_->AbortFast(&next);
}

// The fast path's map-change hook: a reply wait ends once the applied map no longer wants the
// backup's ack, and the end then goes on per the new map, as SendOnce's wait does.
TEST_F(ReplicatorFastTest, AWaitForABackupTheMapDroppedEndsAndTheWriteGoesOn) {
  const std::string k = KeyOf(3);
  Replicator::FastWrite fw;
  ASSERT_TRUE(r_->BeginFast(3, true, k, "v1", &fw));
  uint64_t seen = fw.snap.epoch;
  EXPECT_FALSE(r_->FastDropped(fw, 2, &seen)) << "the map did not move";
  EXPECT_EQ(seen, 5u);
  SlotMap m;  // epoch 6: server 3 replaces server 2 as slot 3's backup, others unchanged
  ASSERT_TRUE(SlotMap::Create(kSlots, 2, 99, &m).ok());
  m.AddServer({1, "127.0.0.1", 1});
  m.AddServer({2, "127.0.0.1", 1});
  m.AddServer({3, "127.0.0.1", 1});
  for (uint32_t slot = 0; slot < kSlots; ++slot) {
    ASSERT_TRUE(m.Assign(slot, 0, m.IndexOf(1)));
    ASSERT_TRUE(m.Assign(slot, 1, m.IndexOf(slot == 3 ? 3 : 2)));
  }
  m.set_epoch(6);
  r_->SetMap(m);
  uint64_t other_seen = 5;
  Replicator::FastWrite other;  // slot 4 still has server 2: its wait goes on
  ASSERT_TRUE(r_->BeginFast(4, true, KeyOf(4), "x", &other));
  EXPECT_FALSE(r_->FastDropped(other, 2, &other_seen));
  EXPECT_EQ(other_seen, 6u);
  r_->AbortFast(&other);
  EXPECT_TRUE(r_->FastDropped(fw, 2, &seen)) << "slot 3 no longer wants server 2's ack";
  EXPECT_EQ(seen, 6u);
  // The wait ended as a lost link (maybe sent); server 2 is no longer listed, so the end does
  // not ask it again and the write is applied (server 3 is the resync's to bring up to date).
  Status lost[1] = {Status(Code::kConnectionLost, "the map dropped server 2")};
  bool sent[1] = {true};
  EXPECT_TRUE(r_->EndFast(&fw, lost, sent, [&] { return Apply(k, "v1"); }).ok());
  std::string v;
  EXPECT_TRUE(table_->Get(k, &v).ok());
  EXPECT_EQ(v, "v1");
  // Deposed: this server is no longer slot 3's primary; the wait ends and the write fails.
  ASSERT_TRUE(r_->BeginFast(3, true, k, "v2", &fw));
  seen = fw.snap.epoch;
  m.set_epoch(7);
  ASSERT_TRUE(m.Assign(3, 0, m.IndexOf(2)));  // server 2 the primary, server 3 still backup
  r_->SetMap(m);
  EXPECT_TRUE(r_->FastDropped(fw, 3, &seen)) << "this server is no longer the primary";
  EXPECT_FALSE(r_->FastDropped(fw, 3, &seen)) << "the same epoch is not looked at twice";
  lost[0] = Status(Code::kConnectionLost, "deposed");
  EXPECT_FALSE(r_->EndFast(&fw, lost, sent, [&] { return Apply(k, "v2"); }).ok());
  EXPECT_TRUE(table_->Get(k, &v).ok());
  EXPECT_EQ(v, "v1") << "a write whose primary was deposed is not applied";
}

TEST_F(ReplicatorFastTest, NotThePrimaryNoBackupsOrAnUnknownSlotAreDeclined) {
  Replicator::FastWrite fw;
  EXPECT_FALSE(r_->BeginFast(kSlots, true, "k", "v", &fw));
  owners_->Set(2, OwnerWord(5, SlotState::kMoving));
  EXPECT_TRUE(r_->BeginFast(2, true, KeyOf(2), "v", &fw)) << "MOVING still replicates";
  r_->AbortFast(&fw);
  owners_->Set(2, OwnerWord(5, SlotState::kBackup));
  EXPECT_FALSE(r_->BeginFast(2, true, KeyOf(2), "v", &fw));
  SlotMap solo;
  ASSERT_TRUE(SlotMap::Create(kSlots, 2, 99, &solo).ok());
  solo.AddServer({1, "127.0.0.1", 1});
  for (uint32_t slot = 0; slot < kSlots; ++slot) ASSERT_TRUE(solo.Assign(slot, 0, 0));
  solo.set_epoch(6);
  r_->SetMap(solo);
  EXPECT_FALSE(r_->BeginFast(4, true, KeyOf(4), "v", &fw)) << "no backup: Write applies it";
}

}  // namespace
}  // namespace rkv::cluster
