// SPDX-License-Identifier: Apache-2.0
// SlotReclaimer (server/cluster/slot_reclaimer.h): the entries of a released slot are freed and
// no other slot's; a slot whose word changed after its release (made a backup again, or
// IMPORTING) keeps its entries; a slot released again after a new role is freed again; a
// deletion in flight holds an import's wait (BeginReclaim counts as a write in flight) and
// refuses writes and REPLICATEs to a slot a newer map gave back meanwhile; deletes a failing
// log refused are tried again later, once the log takes records again.
#include "server/cluster/slot_reclaimer.h"

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "common/cluster/ownership_word.h"
#include "common/table/layout.h"
#include "server/store/table.h"
#include "server/write_log.h"

namespace rkv::cluster {
namespace {

constexpr uint32_t kSlots = 8;

struct Fixture {
  Fixture() : mem(4 << 20), words(kSlots, 0) {
    EXPECT_TRUE(layout::ComputeGeometry(mem.size(), 0, 0.25, 7, &geo));
    table = std::make_unique<Table>(mem.data(), geo);
    owners = std::make_unique<OwnershipTable>(words.data(), kSlots, 3);
    for (int i = 0; i < 400; ++i) {
      const std::string k = "key-" + std::to_string(i);
      EXPECT_TRUE(table->Put(k, "value-" + std::to_string(i)).ok());
      ++per_slot[owners->SlotOf(k)];
    }
    for (uint32_t s = 0; s < kSlots; ++s) owners->Set(s, OwnerWord(4, SlotState::kBackup));
    reclaimer = std::make_unique<SlotReclaimer>(table.get(), owners.get());
  }
  // Releases `slot` as ClusterNode::Apply does.
  uint64_t Release(uint32_t slot) {
    const uint64_t w = OwnerWord(WordEpoch(owners->Word(slot)), SlotState::kNotOwned);
    owners->Set(slot, w);
    reclaimer->Released(slot, w);
    return w;
  }
  size_t Count(uint32_t slot) {
    size_t n = 0;
    std::string v;
    for (int i = 0; i < 400; ++i) {
      const std::string k = "key-" + std::to_string(i);
      if (owners->SlotOf(k) == slot && table->Get(k, &v).ok()) ++n;
    }
    return n;
  }
  std::vector<uint8_t> mem;
  std::vector<uint64_t> words;
  layout::Geometry geo;
  std::unique_ptr<Table> table;
  std::unique_ptr<OwnershipTable> owners;
  std::unique_ptr<SlotReclaimer> reclaimer;
  size_t per_slot[kSlots] = {};
};

TEST(SlotReclaimer, FreesTheReleasedSlotsEntriesOnly) {
  Fixture f;
  ASSERT_GT(f.per_slot[2], 0u);
  f.Release(2);
  f.Release(5);
  EXPECT_EQ(f.reclaimer->ReclaimNow(), f.per_slot[2] + f.per_slot[5]);
  EXPECT_EQ(f.Count(2), 0u);
  EXPECT_EQ(f.Count(5), 0u);
  for (uint32_t s : {0u, 1u, 3u, 4u, 6u, 7u}) EXPECT_EQ(f.Count(s), f.per_slot[s]) << s;
  EXPECT_EQ(f.reclaimer->reclaimed(), f.per_slot[2] + f.per_slot[5]);
  EXPECT_EQ(f.reclaimer->ReclaimNow(), 0u) << "nothing pending";
}

TEST(SlotReclaimer, ASlotThatChangedSinceItsReleaseKeepsItsEntries) {
  Fixture f;
  f.Release(1);
  f.owners->Set(1, OwnerWord(9, SlotState::kBackup));  // a newer map: a backup again
  f.Release(3);
  f.owners->Set(3, OwnerWord(WordEpoch(f.owners->Word(3)), SlotState::kImporting));
  EXPECT_EQ(f.reclaimer->ReclaimNow(), 0u);
  EXPECT_EQ(f.Count(1), f.per_slot[1]);
  EXPECT_EQ(f.Count(3), f.per_slot[3]);
  // Released again after the new role: freed.
  f.Release(1);
  EXPECT_EQ(f.reclaimer->ReclaimNow(), f.per_slot[1]);
  EXPECT_EQ(f.Count(1), 0u);
}

TEST(SlotReclaimer, ADeletionInFlightHoldsAnImportsWait) {
  Fixture f;
  const uint64_t w = f.Release(4);
  ASSERT_TRUE(f.owners->BeginReclaim(4, w));
  // MIGRATE_BEGIN stores IMPORTING, then waits for the slot's writes in flight.
  f.owners->Set(4, OwnerWord(WordEpoch(w), SlotState::kImporting));
  EXPECT_FALSE(f.owners->WaitIdle(4, std::chrono::steady_clock::now()));
  f.owners->EndReclaim(4);
  EXPECT_TRUE(f.owners->WaitIdle(4, std::chrono::steady_clock::now()));
  EXPECT_FALSE(f.owners->BeginReclaim(4, w)) << "the word changed: nothing counted";
  EXPECT_TRUE(f.owners->WaitIdle(4, std::chrono::steady_clock::now()));
}

// A newer map makes the slot a BACKUP (or OWNED) while a batch of its entries is deleted: its
// REPLICATEs and writes are refused until the batch ends, then admitted.
TEST(SlotReclaimer, ADeletionInFlightHoldsReplicatedAndClientWrites) {
  Fixture f;
  const uint64_t w = f.Release(2);
  ASSERT_TRUE(f.owners->BeginReclaim(2, w));
  f.owners->Set(2, OwnerWord(9, SlotState::kBackup));
  uint64_t word = 0;
  EXPECT_FALSE(f.owners->BeginReplicaWrite(2, &word));
  EXPECT_EQ(WordState(word), SlotState::kNotOwned) << "asked again";
  f.owners->Set(2, OwnerWord(9, SlotState::kOwned));
  EXPECT_FALSE(f.owners->BeginWrite(2, &word));
  EXPECT_EQ(WordState(word), SlotState::kMoving) << "TRY_AGAIN";
  f.owners->EndReclaim(2);
  ASSERT_TRUE(f.owners->BeginWrite(2, &word));
  f.owners->EndWrite(2);
  f.owners->Set(2, OwnerWord(9, SlotState::kBackup));
  ASSERT_TRUE(f.owners->BeginReplicaWrite(2, &word));
  f.owners->EndWrite(2);
}

TEST(SlotReclaimer, TheThreadReclaimsInTheBackground) {
  Fixture f;
  f.reclaimer->Start();
  f.Release(6);
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(30);
  while (f.Count(6) != 0 && std::chrono::steady_clock::now() < deadline)
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  EXPECT_EQ(f.Count(6), 0u);
  f.reclaimer.reset();  // stops the thread
  EXPECT_EQ(f.Count(7), f.per_slot[7]);
}

// A log that refuses every delete while `full` (a full disk).
class FullLog : public WriteLog {
 public:
  std::atomic<bool> full{true};
  Status LogPut(std::string_view, std::string_view) override { return Status::Ok(); }
  Status LogDelete(std::string_view) override {
    return full.load() ? Status(Code::kIoError, "write: No space left on device") : Status::Ok();
  }
  Status Ready() const override { return Status::Ok(); }
};

TEST(SlotReclaimer, DeletesAFailingLogRefusedAreTriedAgainLater) {
  Fixture f;
  FullLog log;
  f.table->SetWriteLog(&log);
  f.reclaimer->Start();
  f.Release(5);
  std::this_thread::sleep_for(std::chrono::milliseconds(2500));  // a pass (not a timing)
  EXPECT_EQ(f.Count(5), f.per_slot[5]);                          // every delete refused
  log.full.store(false);
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(30);
  while (f.Count(5) != 0 && std::chrono::steady_clock::now() < deadline)
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  EXPECT_EQ(f.Count(5), 0u);  // the retry, SlotReclaimer::kRetryMs later
  f.reclaimer.reset();
  f.table->SetWriteLog(nullptr);
  EXPECT_EQ(f.Count(4), f.per_slot[4]);
}

}  // namespace
}  // namespace rkv::cluster
