// SPDX-License-Identifier: Apache-2.0
// A cluster server's OwnershipTable (server/cluster/ownership_table.h): the write gate admits
// writes only to OWNED slots and Pause waits for every admitted write (no write is admitted
// after Pause returned, also under concurrent writers), migration's dirty-key tracking hands each
// key back once and reports an overflow, and the routing answers MOVED replies.
#include "server/cluster/ownership_table.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "common/cluster/slot_map.h"
#include "common/wire.h"

namespace rkv::cluster {
namespace {

using Clock = std::chrono::steady_clock;
using std::chrono::milliseconds;

TEST(OwnershipTable, StartsNotOwnedAndStoresWords) {
  std::vector<uint64_t> words(64);
  OwnershipTable t(words.data(), 64, 0x77);
  EXPECT_EQ(t.num_slots(), 64u);
  EXPECT_EQ(t.CountOwned(), 0u);
  t.Set(3, OwnerWord(9, SlotState::kOwned));
  EXPECT_EQ(words[3], OwnerWord(9, SlotState::kOwned)) << "the words are the caller's memory";
  EXPECT_EQ(t.Word(3), words[3]);
  t.Set(4, OwnerWord(9, SlotState::kMoving));
  t.Set(5, OwnerWord(9, SlotState::kImporting));
  EXPECT_EQ(t.CountOwned(), 2u) << "OWNED and MOVING are this server's";
  for (const std::string& key : std::vector<std::string>{"a", "user:1", "", std::string(1000, 'k')})
    EXPECT_EQ(t.SlotOf(key), SlotMap::SlotOf(key, 0x77, 64)) << key;
}

TEST(OwnershipTable, BeginWriteAdmitsOnlyOwned) {
  std::vector<uint64_t> words(8);
  OwnershipTable t(words.data(), 8, 1);
  t.Set(0, OwnerWord(4, SlotState::kOwned));
  t.Set(1, OwnerWord(4, SlotState::kMoving));
  t.Set(2, OwnerWord(0, SlotState::kNotOwned));
  t.Set(3, OwnerWord(4, SlotState::kImporting));
  uint64_t w = 0;
  ASSERT_TRUE(t.BeginWrite(0, &w));
  EXPECT_EQ(w, OwnerWord(4, SlotState::kOwned));
  t.EndWrite(0);
  for (uint32_t slot : {1u, 2u, 3u}) {
    w = 12345;
    EXPECT_FALSE(t.BeginWrite(slot, &w)) << slot;
    EXPECT_EQ(w, words[slot]) << "the refusal says why";
  }
  // Refused writes leave nothing in flight: a pause of a MOVING slot returns at once; a slot
  // that is neither OWNED nor MOVING (a map change released it) is not paused, and unchanged.
  EXPECT_TRUE(t.Pause(1, Clock::now()));
  for (uint32_t slot : {2u, 3u}) {
    const uint64_t before = t.Word(slot);
    EXPECT_FALSE(t.Pause(slot, Clock::now())) << slot;
    EXPECT_EQ(t.Word(slot), before) << slot;
  }
  // Resume: MOVING or NOT_OWNED back to OWNED at the same epoch; nothing else.
  EXPECT_TRUE(t.Resume(1));
  EXPECT_EQ(t.Word(1), OwnerWord(4, SlotState::kOwned));
  EXPECT_FALSE(t.Resume(1)) << "already OWNED";
  EXPECT_FALSE(t.Resume(3)) << "IMPORTING is not this server's to take";
  t.Set(1, OwnerWord(4, SlotState::kMoving));
  // A pause of an idle OWNED slot too, keeping its epoch.
  EXPECT_TRUE(t.Pause(0, Clock::now()));
  EXPECT_EQ(t.Word(0), OwnerWord(4, SlotState::kMoving));
  EXPECT_FALSE(t.BeginWrite(0, &w));
  EXPECT_EQ(WordState(w), SlotState::kMoving);
}

TEST(OwnershipTable, PauseWaitsForAnAdmittedWrite) {
  std::vector<uint64_t> words(4);
  OwnershipTable t(words.data(), 4, 1);
  t.Set(2, OwnerWord(11, SlotState::kOwned));
  uint64_t w = 0;
  ASSERT_TRUE(t.BeginWrite(2, &w));  // held by this thread
  EXPECT_FALSE(t.Pause(2, Clock::now() + milliseconds(50)));
  EXPECT_EQ(t.Word(2), OwnerWord(11, SlotState::kMoving)) << "the slot stays MOVING";
  uint64_t refused = 0;
  EXPECT_FALSE(t.BeginWrite(2, &refused)) << "no new write while MOVING";
  EXPECT_EQ(WordState(refused), SlotState::kMoving);
  // Another slot is not held up by this one.
  t.Set(3, OwnerWord(11, SlotState::kOwned));
  EXPECT_TRUE(t.Pause(3, Clock::now()));

  // A pause with time to spare returns once the write ends, not before.
  std::atomic<bool> ended{false}, paused{false};
  std::thread pauser([&] {
    EXPECT_TRUE(t.Pause(2, Clock::now() + std::chrono::seconds(30)));
    EXPECT_TRUE(ended.load()) << "Pause returned while a write was in flight";
    paused = true;
  });
  std::this_thread::sleep_for(milliseconds(30));
  EXPECT_FALSE(paused.load());
  ended = true;
  t.EndWrite(2);
  pauser.join();
  EXPECT_TRUE(paused.load());
  EXPECT_TRUE(t.Pause(2, Clock::now()));
}

// Writers race pauses: a write admitted by BeginWrite must never see its slot's "paused" flag,
// which the pauser sets right after Pause returned true (the write is still in flight until
// EndWrite, so Pause must have waited for it).
TEST(OwnershipTable, NoWriteIsAdmittedAfterPauseReturns) {
  constexpr uint32_t kSlots = 32;
  constexpr int kWriters = 4;
  constexpr int kRounds = 20;
  for (int round = 0; round < kRounds; ++round) {
    std::vector<uint64_t> words(kSlots);
    OwnershipTable t(words.data(), kSlots, 5);
    for (uint32_t s = 0; s < kSlots; ++s) t.Set(s, OwnerWord(round + 1, SlotState::kOwned));
    std::unique_ptr<std::atomic<bool>[]> paused(new std::atomic<bool>[kSlots]);
    for (uint32_t s = 0; s < kSlots; ++s) paused[s] = false;
    std::atomic<bool> stop{false};
    std::atomic<uint64_t> admitted{0}, late{0};
    std::vector<std::thread> writers;
    for (int i = 0; i < kWriters; ++i)
      writers.emplace_back([&, i] {
        uint32_t s = uint32_t(i) * 7;
        while (!stop.load(std::memory_order_relaxed)) {
          s = (s + 1) % kSlots;
          uint64_t w;
          if (!t.BeginWrite(s, &w)) continue;
          admitted.fetch_add(1, std::memory_order_relaxed);
          // Applying the write: the pause must wait for all of it.
          if (paused[s].load()) late.fetch_add(1);
          std::this_thread::yield();
          if (paused[s].load()) late.fetch_add(1);
          t.EndWrite(s);
        }
      });
    for (uint32_t s = 0; s < kSlots; ++s) {
      std::this_thread::sleep_for(std::chrono::microseconds(200));
      // EXPECT, not ASSERT: returning would leave the writer threads joinable.
      EXPECT_TRUE(t.Pause(s, Clock::now() + std::chrono::seconds(30))) << s;
      paused[s] = true;
    }
    std::this_thread::sleep_for(milliseconds(2));  // writers keep trying the paused slots
    stop = true;
    for (std::thread& th : writers) th.join();
    EXPECT_EQ(late.load(), 0u) << "round " << round;
    EXPECT_GT(admitted.load(), 0u) << "round " << round;
    EXPECT_EQ(t.CountOwned(), kSlots);
    for (uint32_t s = 0; s < kSlots; ++s)
      EXPECT_EQ(t.Word(s), OwnerWord(round + 1, SlotState::kMoving)) << s;
  }
}

TEST(OwnershipTable, DirtyKeysComeBackOnce) {
  std::vector<uint64_t> words(16);
  OwnershipTable t(words.data(), 16, 1);
  EXPECT_FALSE(t.Tracked(3));
  t.Track({3, 4}, true);
  EXPECT_TRUE(t.Tracked(3));
  EXPECT_TRUE(t.Tracked(4));
  EXPECT_FALSE(t.Tracked(5));
  t.MarkDirty("a");
  t.MarkDirty("b");
  t.MarkDirty("a");
  t.MarkDirty(std::string("z\0z", 3));
  std::vector<std::string> out = {"stale"};
  bool overflowed = true;
  t.TakeDirty(&out, &overflowed);
  std::sort(out.begin(), out.end());
  EXPECT_EQ(out, (std::vector<std::string>{"a", "b", std::string("z\0z", 3)}));
  EXPECT_FALSE(overflowed);
  t.TakeDirty(&out, &overflowed);
  EXPECT_TRUE(out.empty()) << "each key comes back once";
  EXPECT_FALSE(overflowed);
  t.MarkDirty("c");
  t.TakeDirty(&out, &overflowed);
  EXPECT_EQ(out, std::vector<std::string>{"c"});
  // Tracking off forgets what was recorded.
  t.MarkDirty("d");
  t.Track({3, 4}, false);
  EXPECT_FALSE(t.Tracked(3));
  t.TakeDirty(&out, &overflowed);
  EXPECT_TRUE(out.empty());
}

TEST(OwnershipTable, DirtyOverflowIsReported) {
  std::vector<uint64_t> words(1);
  OwnershipTable t(words.data(), 1, 1);
  t.Track({0}, true);
  for (size_t i = 0; i < OwnershipTable::kMaxDirty; ++i) t.MarkDirty(std::to_string(i));
  std::vector<std::string> out;
  bool overflowed = false;
  t.MarkDirty("one too many");
  t.TakeDirty(&out, &overflowed);
  EXPECT_TRUE(overflowed);
  EXPECT_EQ(out.size(), OwnershipTable::kMaxDirty);
  EXPECT_EQ(std::count(out.begin(), out.end(), "one too many"), 0);
  // The overflow is reported once; the set is empty and takes keys again.
  t.MarkDirty("x");
  t.TakeDirty(&out, &overflowed);
  EXPECT_FALSE(overflowed);
  EXPECT_EQ(out, std::vector<std::string>{"x"});
}

TEST(OwnershipTable, HandingOverFlags) {
  std::vector<uint64_t> words(8);
  OwnershipTable t(words.data(), 8, 1);
  EXPECT_FALSE(t.HandingOver(2));
  t.SetHandingOver({2, 5}, true);
  EXPECT_TRUE(t.HandingOver(2));
  EXPECT_TRUE(t.HandingOver(5));
  EXPECT_FALSE(t.HandingOver(3));
  t.SetHandingOver({2}, false);
  EXPECT_FALSE(t.HandingOver(2));
  EXPECT_TRUE(t.HandingOver(5));
}

TEST(OwnershipTable, RouteAnswersFromTheLastRouting) {
  std::vector<uint64_t> words(4);
  OwnershipTable t(words.data(), 4, 1);
  uint64_t epoch = 99;
  uint32_t owner = 99;
  t.Route(1, &epoch, &owner);
  EXPECT_EQ(epoch, 0u);
  EXPECT_EQ(owner, wire::kNoOwner) << "no routing yet";
  t.SetRouting(7, {10, 11, 12, 13});
  t.Route(2, &epoch, &owner);
  EXPECT_EQ(epoch, 7u);
  EXPECT_EQ(owner, 12u);
  t.SetRouting(8, {20, 21});  // a shorter table: the other slots have no owner
  t.Route(1, &epoch, &owner);
  EXPECT_EQ(epoch, 8u);
  EXPECT_EQ(owner, 21u);
  t.Route(3, &epoch, &owner);
  EXPECT_EQ(owner, wire::kNoOwner);
}

// Replicas (issue 25): a backup admits REPLICATE writes only while BACKUP, and a promotion
// (WaitIdle) waits for the admitted ones; a promoted slot refuses client writes until its fence
// (reported as MOVING: TRY_AGAIN) and admits them after; BACKUP is never readable.
TEST(OwnershipTable, BackupWritesAndThePromotionFence) {
  std::vector<uint64_t> words(8);
  OwnershipTable t(words.data(), 8, 1);
  uint64_t w = 0;
  EXPECT_FALSE(t.BeginReplicaWrite(2, &w)) << "NOT_OWNED is no backup";
  t.Set(2, OwnerWord(5, SlotState::kBackup));
  EXPECT_FALSE(Readable(t.Word(2), 9)) << "clients never read a backup";
  EXPECT_EQ(t.CountBackups(), 1u);
  EXPECT_FALSE(t.BeginWrite(2, &w)) << "a backup takes no client write";
  ASSERT_TRUE(t.BeginReplicaWrite(2, &w));
  // Promotion: fence, OWNED, then wait for the replicated write admitted as a backup.
  t.FenceWrites(2, Clock::now() + milliseconds(300));
  t.Set(2, OwnerWord(6, SlotState::kOwned));
  EXPECT_FALSE(t.BeginReplicaWrite(2, &w)) << "no REPLICATE after the promotion";
  EXPECT_FALSE(t.WaitIdle(2, Clock::now() + milliseconds(20))) << "the admitted one is running";
  std::thread ender([&] {
    std::this_thread::sleep_for(milliseconds(30));
    t.EndWrite(2);
  });
  EXPECT_TRUE(t.WaitIdle(2, Clock::now() + milliseconds(5000)));
  ender.join();
  EXPECT_FALSE(t.BeginWrite(2, &w)) << "fenced";
  EXPECT_EQ(WordState(w), SlotState::kMoving) << "a fenced slot answers TRY_AGAIN";
  EXPECT_EQ(WordEpoch(w), 6u);
  std::this_thread::sleep_for(milliseconds(350));
  ASSERT_TRUE(t.BeginWrite(2, &w)) << "past the fence";
  t.EndWrite(2);
  EXPECT_EQ(t.Sequence(2), 0u);
  t.SetSequence(2, OwnershipTable::kSequenceUnset);
  EXPECT_EQ(t.Sequence(2), OwnershipTable::kSequenceUnset);
}

}  // namespace
}  // namespace rkv::cluster
