// SPDX-License-Identifier: Apache-2.0
// Tests of server/store/heap.h with a fake owner: a byte region, a map of live blocks, and a Mover
// that relocates a block's bytes the way the table does. Every block holds a pattern derived from
// its id, verified after every phase (catches overlapping allocations or moves and lost blocks).
#include "server/store/heap.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <future>
#include <map>
#include <random>
#include <thread>
#include <vector>

#include "common/mutex.h"
#include "common/wire.h"

namespace rkv {
namespace {

using Result = Heap::Result;
using std::chrono::milliseconds;

static_assert(Heap::kMaxBlock == 32 + wire::kMaxKeySize + wire::kMaxValueSize);
static_assert(Heap::kFullSlack <= 4 * uint64_t{Heap::kMaxBlock}, "target: reserve <= 4 blocks");

uint64_t PatternWord(uint64_t id, uint64_t k) {
  uint64_t x = (id << 24) ^ (k * 0x9E3779B97F4A7C15ull);
  x ^= x >> 29;
  x *= 0xBF58476D1CE4E5B9ull;
  return x ^ (x >> 32);
}

// The target: a request is refused as full only when live + s + reserve > capacity.
bool FullIsJustified(const Heap& heap, uint32_t bytes) {
  return heap.live_bytes() + Heap::RoundUp(bytes) + Heap::kFullSlack > heap.capacity();
}

class FakeOwner {
 public:
  struct Block {
    uint64_t id;
    uint32_t bytes;  // requested size
  };

  FakeOwner(uint64_t begin, uint64_t end, milliseconds pending_wait = milliseconds(1000))
      : region_(end + 8), heap_(begin, end, pending_wait) {
    heap_.set_mover([this](uint64_t offset, uint32_t size) { Move(offset, size); });
  }

  Heap& heap() { return heap_; }
  uint8_t* at(uint64_t offset) { return region_.data() + offset; }

  // The PUT path: TryAllocate under the owner's lock, write the block without it (pending),
  // publish and Commit under the lock; on kNeedsRoom, MakeRoom without the lock and retry.
  // `strict`: no other thread uses the heap, so room made must be there on the retry.
  Result Put(uint32_t bytes, uint64_t* out, bool strict = true) {
    for (int attempt = 0; attempt < 8; ++attempt) {
      uint64_t offset = 0, id = 0;
      Result r = Begin(bytes, &offset, &id);
      if (r == Result::kOk) {
        Publish(offset, id, bytes);
        if (out) *out = offset;
        return r;
      }
      if (r == Result::kFull) {
        EXPECT_TRUE(!strict || FullIsJustified(heap_, bytes))
            << "kFull with live " << heap_.live_bytes() << " of " << heap_.capacity();
        return r;
      }
      EXPECT_EQ(r, Result::kNeedsRoom);
      EXPECT_TRUE(!strict || attempt == 0) << "MakeRoom said OK but TryAllocate failed";
      r = heap_.MakeRoom(bytes);
      EXPECT_TRUE(r != Result::kFull || !strict || FullIsJustified(heap_, bytes));
      if (r != Result::kOk) return r;
    }
    EXPECT_FALSE(strict) << "no room after 8 cleanings";
    return Result::kBusy;
  }

  // A PUT in two halves: allocate and write (the block is pending), then publish and Commit.
  Result Begin(uint32_t bytes, uint64_t* offset, uint64_t* id) {
    Result r;
    {
      MutexLock l(&mu_);
      r = heap_.TryAllocate(bytes, offset);
    }
    if (r == Result::kOk) {
      *id = next_id_.fetch_add(1);
      Fill(*offset, *id, bytes);
    }
    return r;
  }
  void Publish(uint64_t offset, uint64_t id, uint32_t bytes) {
    MutexLock l(&mu_);
    heap_.Commit(offset);
    EXPECT_TRUE(live_.emplace(offset, Block{id, bytes}).second) << "offset reused " << offset;
  }

  // Frees the block at `offset`, or (offset == kAny) one picked by `rng`. False if none.
  static constexpr uint64_t kAny = ~uint64_t{0};
  bool Remove(uint64_t offset, std::mt19937_64* rng = nullptr) {
    MutexLock l(&mu_);
    if (live_.empty()) return false;
    auto it = live_.end();
    if (offset == kAny) {
      it = live_.lower_bound(heap_.begin() + (*rng)() % heap_.capacity());
      if (it == live_.end()) it = live_.begin();
    } else {
      it = live_.find(offset);
      if (it == live_.end()) return false;
    }
    EXPECT_TRUE(heap_.IsLive(it->first));
    heap_.Free(it->first, it->second.bytes);
    live_.erase(it);
    return true;
  }

  void RemoveAll() {
    MutexLock l(&mu_);
    for (const auto& [offset, b] : live_) heap_.Free(offset, b.bytes);
    live_.clear();
  }

  // Fills until a request for `bytes` is refused; returns how it was refused.
  Result FillWith(uint32_t bytes) {
    for (;;) {
      const Result r = Put(bytes, nullptr);
      if (r != Result::kOk) return r;
    }
  }

  // Every live block's bytes, disjointness, bounds, and the heap's accounting.
  void Verify() {
    MutexLock l(&mu_);
    uint64_t live = 0, prev_end = heap_.begin();
    for (const auto& [offset, b] : live_) {
      ASSERT_EQ(offset % Heap::kAlign, 0u);
      ASSERT_GE(offset, prev_end) << "blocks overlap at " << offset;
      prev_end = offset + Heap::RoundUp(b.bytes);
      ASSERT_LE(prev_end, heap_.end());
      ASSERT_TRUE(Holds(offset, b.id, b.bytes)) << "block at " << offset << " lost its bytes";
      ASSERT_TRUE(heap_.IsLive(offset));
      live += Heap::RoundUp(b.bytes);
    }
    EXPECT_EQ(heap_.live_bytes(), live);
    EXPECT_GE(heap_.log_bytes(), heap_.live_bytes());
    EXPECT_EQ(heap_.Validate(), "");
  }

  size_t blocks() {
    MutexLock l(&mu_);
    return live_.size();
  }
  uint64_t moves_skipped() const { return moves_skipped_.load(); }

 private:
  void Fill(uint64_t offset, uint64_t id, uint32_t bytes) {
    uint64_t k = 0;
    for (; (k + 1) * 8 <= bytes; ++k) {
      const uint64_t w = PatternWord(id, k);
      std::memcpy(at(offset + k * 8), &w, 8);
    }
    const uint64_t w = PatternWord(id, k);
    std::memcpy(at(offset + k * 8), &w, bytes - k * 8);
  }

  bool Holds(uint64_t offset, uint64_t id, uint32_t bytes) {
    uint64_t k = 0;
    for (; (k + 1) * 8 <= bytes; ++k) {
      const uint64_t w = PatternWord(id, k);
      if (std::memcmp(at(offset + k * 8), &w, 8) != 0) return false;
    }
    const uint64_t w = PatternWord(id, k);
    return std::memcmp(at(offset + k * 8), &w, bytes - k * 8) == 0;
  }

  // The Mover, as the table does it: under the owner's lock, re-check, copy, publish, Commit,
  // Free.
  void Move(uint64_t offset, uint32_t size) {
    MutexLock l(&mu_);
    if (!heap_.IsLive(offset)) {  // freed by its owner since the cleaner looked
      EXPECT_EQ(live_.count(offset), 0u);
      ++moves_skipped_;
      return;
    }
    auto it = live_.find(offset);
    ASSERT_NE(it, live_.end()) << "asked to move a block nobody published: " << offset;
    const Block b = it->second;
    ASSERT_EQ(Heap::RoundUp(b.bytes), size) << "asked to move with the wrong size";
    ASSERT_TRUE(Holds(offset, b.id, b.bytes)) << "block to move at " << offset << " is corrupt";
    uint64_t to = 0;
    ASSERT_TRUE(heap_.AllocateForMove(size, &to));
    ASSERT_TRUE(to + size <= offset || offset + size <= to) << "move onto itself";
    std::memcpy(at(to), at(offset), b.bytes);
    live_.erase(it);
    live_.emplace(to, b);
    heap_.Commit(to);
    heap_.Free(offset, b.bytes);
  }

  std::vector<uint8_t> region_;
  Heap heap_;
  Mutex mu_;  // the owner's lock (the table's stripes): taken before the heap's
  std::map<uint64_t, Block> live_ GUARDED_BY(mu_);
  std::atomic<uint64_t> next_id_{1};
  std::atomic<uint64_t> moves_skipped_{0};
};

constexpr uint64_t kMiB = 1 << 20;

double Fraction(const Heap& heap) {
  return static_cast<double>(heap.live_bytes()) / static_cast<double>(heap.capacity());
}

TEST(Heap, RoundUpWasteAtMostTwelvePercent) {
  double worst = 0;
  for (uint32_t s = 129; s <= Heap::kMaxBlock; ++s) {
    const uint32_t r = Heap::RoundUp(s);
    ASSERT_EQ(r % Heap::kAlign, 0u);
    ASSERT_GE(r, s);
    ASSERT_LE(r - s, Heap::kAlign - 1);
    worst = std::max(worst, static_cast<double>(r - s) / r);
  }
  EXPECT_LE(worst, 0.12);
  std::printf("worst internal waste %.2f%% (129 B -> %u B)\n", 100 * worst, Heap::RoundUp(129));
  EXPECT_EQ(Heap::RoundUp(Heap::kMaxBlock), Heap::kMaxBlock);

  Heap heap(0, 16 * kMiB);
  uint64_t offset;
  EXPECT_EQ(heap.TryAllocate(0, &offset), Result::kFull);
  EXPECT_EQ(heap.TryAllocate(Heap::kMaxBlock + 1, &offset), Result::kFull);
  EXPECT_EQ(heap.MakeRoom(Heap::kMaxBlock + 1), Result::kFull);
}

TEST(Heap, BlockStatesAndCounters) {
  FakeOwner o(0, 4 * kMiB);
  Heap& h = o.heap();
  uint64_t a, b;
  ASSERT_EQ(h.TryAllocate(1000, &a), Result::kOk);
  EXPECT_TRUE(h.IsPending(a));
  EXPECT_FALSE(h.IsLive(a));  // pending is not live (committed)
  EXPECT_EQ(h.live_bytes(), 1000u);
  ASSERT_EQ(h.TryAllocate(129, &b), Result::kOk);
  EXPECT_EQ(b, a + 1000);
  h.Commit(b);
  EXPECT_TRUE(h.IsLive(b));
  EXPECT_FALSE(h.IsLive(b + 8));
  h.Free(a, 1000);  // a failed PUT frees its pending block
  EXPECT_FALSE(h.IsPending(a));
  EXPECT_EQ(h.live_bytes(), 136u);
  EXPECT_EQ(h.log_bytes(), 1136u);
  EXPECT_EQ(h.pending_blocks(), 0u);
  h.Free(b, 136);  // the rounded size is accepted too
  EXPECT_EQ(h.live_bytes(), 0u);
  EXPECT_EQ(h.Validate(), "");
  // Dead blocks leave the log only by cleaning, which is done only when needed.
  EXPECT_EQ(h.log_bytes(), 1136u);
  EXPECT_EQ(h.MakeRoom(100), Result::kOk);  // fits already: nothing to do
  EXPECT_EQ(h.log_bytes(), 1136u);
  EXPECT_EQ(h.moves(), 0u);
  EXPECT_EQ(h.clean_calls(), 1u);
}

using HeapDeathTest = ::testing::Test;
TEST(HeapDeathTest, BrokenContractsAreCaught) {
  Heap h(0, 1 * kMiB);
  uint64_t a;
  ASSERT_EQ(h.TryAllocate(200, &a), Result::kOk);
  EXPECT_DEATH(h.Commit(a + 8), "not pending");
  EXPECT_DEATH(h.Free(a, 300), "wrong size");
  uint64_t to;
  EXPECT_DEATH((void)h.AllocateForMove(200, &to), "outside a Mover");
  h.Free(a, 200);
  EXPECT_DEATH(h.Free(a, 200), "not allocated");
  // A Mover that leaves the block live breaks the cleaner's invariant.
  EXPECT_DEATH(
      {
        Heap g(0, 1 * kMiB);
        g.set_mover([](uint64_t, uint32_t) {});
        uint64_t x;
        std::vector<uint64_t> blocks;
        while (g.TryAllocate(4000, &x) == Result::kOk) {
          g.Commit(x);
          blocks.push_back(x);
        }
        for (size_t i = 1; i < blocks.size(); i += 2) g.Free(blocks[i], 4000);
        (void)g.MakeRoom(4000);
      },
      "still allocated");
}

// Fill with A until full, free everything, refill with B: both fills end only at the target.
TEST(Heap, FillFreeRefillWithAnotherSize) {
  const std::pair<uint32_t, uint32_t> cases[] = {{150, 16000},
                                                 {16000, 150},
                                                 {3000, 1000},
                                                 {1000, 3000},
                                                 {66584, 129},
                                                 {129, 66584},
                                                 {4097, 2049},
                                                 {2049, 4097},
                                                 {200, 65000},
                                                 {65000, 200},
                                                 {Heap::kMaxBlock, 24 + 1 + 104}};
  for (const auto& [a, b] : cases) {
    FakeOwner o(0, 16 * kMiB);
    Heap& h = o.heap();
    ASSERT_EQ(o.FillWith(a), Result::kFull);
    ASSERT_TRUE(FullIsJustified(h, a));
    const uint64_t first = h.live_bytes();
    const double first_fraction = Fraction(h);
    o.Verify();
    o.RemoveAll();
    o.Verify();
    ASSERT_EQ(o.FillWith(b), Result::kFull);
    ASSERT_TRUE(FullIsJustified(h, b));
    o.Verify();
    const double refill = static_cast<double>(h.live_bytes()) / static_cast<double>(first);
    EXPECT_GE(refill, 0.85) << a << " -> " << b;
    std::printf("fill %5u B: live %.1f%% at FULL; refill %5u B: live %.1f%% (%.1f%% of first)\n", a,
                100 * first_fraction, b, 100 * Fraction(h), 100 * refill);
  }
}

// Small blocks, every other one freed (50% live, no free run anywhere), then maximum blocks.
TEST(Heap, AdversarialFragmentationThenLargeBlocks) {
  FakeOwner o(0, 16 * kMiB);
  Heap& h = o.heap();
  std::vector<uint64_t> offsets;
  uint64_t off;
  while (o.Put(129, &off) == Result::kOk) offsets.push_back(off);
  for (size_t i = 0; i < offsets.size(); i += 2) ASSERT_TRUE(o.Remove(offsets[i]));
  o.Verify();
  const uint64_t small_live = h.live_bytes();
  int large = 0;
  while (o.Put(Heap::kMaxBlock, &off) == Result::kOk) ++large;
  EXPECT_TRUE(FullIsJustified(h, Heap::kMaxBlock));
  EXPECT_GT(h.moves(), 0u);
  o.Verify();
  std::printf("%zu small blocks (%.1f%% live) + %d blocks of 64 KiB: live %.1f%%, moved %.1f MiB\n",
              offsets.size() / 2, 100.0 * small_live / h.capacity(), large, 100 * Fraction(h),
              h.moved_bytes() / double(kMiB));
}

uint32_t RandomSize(std::mt19937_64& rng) {
  const uint32_t kind = rng() % 10;
  if (kind < 5) return 129 + rng() % (1024 - 129);
  if (kind < 8) return 1024 + rng() % (16384 - 1024);
  return 16384 + rng() % (Heap::kMaxBlock - 16384 + 1);
}

// Random mixes of allocations and frees, fill-to-full phases with one size, and mass frees.
void RandomHistory(uint64_t seed, uint64_t begin, uint64_t end, int phases) {
  SCOPED_TRACE("seed " + std::to_string(seed));
  std::mt19937_64 rng(seed);
  FakeOwner o(begin, end);
  Heap& h = o.heap();
  for (int phase = 0; phase < phases; ++phase) {
    switch (rng() % 4) {
      case 0:
      case 1:  // random mix, about 2:1 allocations
        for (int i = 0; i < 400; ++i) {
          if (rng() % 3 == 0) {
            o.Remove(FakeOwner::kAny, &rng);
          } else {
            const uint32_t s = RandomSize(rng);
            const Result r = o.Put(s, nullptr);
            ASSERT_TRUE(r == Result::kOk || r == Result::kFull) << Heap::ResultName(r);
            ASSERT_TRUE(r != Result::kFull || FullIsJustified(h, s));
          }
        }
        break;
      case 2: {  // fill to full with one size
        const uint32_t s = RandomSize(rng);
        ASSERT_EQ(o.FillWith(s), Result::kFull);
        ASSERT_TRUE(FullIsJustified(h, s)) << "size " << s;
        break;
      }
      case 3: {  // free a random fraction
        const size_t n = o.blocks() * (rng() % 100) / 100;
        for (size_t i = 0; i < n; ++i) o.Remove(FakeOwner::kAny, &rng);
        break;
      }
    }
    o.Verify();
    if (::testing::Test::HasFatalFailure()) return;
  }
  std::printf("seed %llu: live %.1f%%, %llu moves (%.1f MiB), %llu cleanings\n",
              static_cast<unsigned long long>(seed), 100 * Fraction(h),
              static_cast<unsigned long long>(h.moves()), h.moved_bytes() / double(kMiB),
              static_cast<unsigned long long>(h.clean_calls()));
}

TEST(Heap, RandomHistories) {
  for (uint64_t seed = 1; seed <= 4; ++seed) {
    RandomHistory(seed, 0, 4 * kMiB, 30);
    if (HasFatalFailure()) return;
  }
}

// Small heaps with unaligned bounds: rounded inward, every offset aligned and inside.
TEST(Heap, SmallHeapsAndOddBounds) {
  {
    Heap h(13, 13 + kMiB + 5);
    EXPECT_EQ(h.begin(), 16u);
    EXPECT_EQ(h.end(), (13 + kMiB + 5) & ~uint64_t{7});
    EXPECT_EQ(h.capacity(), h.end() - h.begin());
  }
  for (uint64_t seed = 11; seed <= 13; ++seed) {
    RandomHistory(seed, 13, 13 + kMiB + 5, 30);
    if (HasFatalFailure()) return;
    RandomHistory(seed, 1001, 1001 + 3 * kMiB / 2 + 3, 30);
    if (HasFatalFailure()) return;
  }
  // Too small for even one block plus the reserve: full from the start, never a crash.
  Heap tiny(3, 3 * Heap::kMaxBlock);
  uint64_t off;
  EXPECT_EQ(tiny.TryAllocate(129, &off), Result::kFull);
  EXPECT_EQ(tiny.MakeRoom(129), Result::kFull);
  Heap empty(100, 50);
  EXPECT_EQ(empty.capacity(), 0u);
  EXPECT_EQ(empty.TryAllocate(129, &off), Result::kFull);
  EXPECT_EQ(empty.Validate(), "");
}

// Churn at half occupancy: cleaning moves about live/free bytes per byte allocated, in short
// steps (no full-heap pass).
TEST(Heap, CleaningCostIsAmortized) {
  FakeOwner o(0, 16 * kMiB);
  Heap& h = o.heap();
  std::mt19937_64 rng(7);
  while (Fraction(h) < 0.5) ASSERT_EQ(o.Put(RandomSize(rng), nullptr), Result::kOk);
  const uint64_t moved0 = h.moved_bytes();
  uint64_t allocated = 0, worst_step = 0;
  for (int i = 0; i < 20000; ++i) {
    while (Fraction(h) > 0.5) o.Remove(FakeOwner::kAny, &rng);
    const uint32_t s = RandomSize(rng);
    const uint64_t before = h.moved_bytes();
    ASSERT_EQ(o.Put(s, nullptr), Result::kOk);
    worst_step = std::max(worst_step, h.moved_bytes() - before);
    allocated += Heap::RoundUp(s);
  }
  o.Verify();
  const double ratio = static_cast<double>(h.moved_bytes() - moved0) / allocated;
  std::printf("50%% live churn: %.2f bytes moved per byte allocated, worst single PUT %.0f KiB\n",
              ratio, worst_step / 1024.0);
  EXPECT_LE(ratio, 1.5);
  EXPECT_LE(worst_step, 2 * kMiB);
}

// A pending block at the tail: MakeRoom waits for its Commit (then moves it) or its Free.
// Sets up a PUT in flight at the tail, then dead blocks until TryAllocate needs room.
void PendingAtTailAndNoRoom(FakeOwner* o, uint64_t* pending, uint64_t* id) {
  Heap& h = o->heap();
  ASSERT_EQ(o->Begin(1000, pending, id), Result::kOk);
  ASSERT_EQ(*pending, h.begin());
  uint64_t x = 0;
  Result r;
  while ((r = h.TryAllocate(1000, &x)) == Result::kOk) {
    h.Commit(x);
    h.Free(x, 1000);
  }
  ASSERT_EQ(r, Result::kNeedsRoom);
}

class PendingTail : public ::testing::TestWithParam<bool> {};

TEST_P(PendingTail, MakeRoomWaitsForCommitOrFree) {
  const bool commit = GetParam();
  // The wait's deadline is 60 s away: kOk (not kBusy) shows MakeRoom was woken by the Commit or
  // Free, not by its deadline. The writer acts only once MakeRoom waits (pending_waits counts a
  // wait under the heap's mutex, which the wait releases): an order, not a sleep.
  FakeOwner o(0, kMiB, milliseconds(60000));
  Heap& h = o.heap();
  uint64_t pending = 0, id = 0;
  PendingAtTailAndNoRoom(&o, &pending, &id);
  const uint64_t waits0 = h.pending_waits();
  std::atomic<bool> returned{false}, released{false};
  std::thread writer([&] {
    while (!returned && h.pending_waits() == waits0) std::this_thread::sleep_for(milliseconds(1));
    released = true;
    if (commit) {
      o.Publish(pending, id, 1000);
    } else {
      h.Free(pending, 1000);  // a failed PUT
    }
  });
  const Result r = h.MakeRoom(1000);
  const bool released_before_return = released;
  returned = true;
  writer.join();
  EXPECT_EQ(r, Result::kOk);
  EXPECT_GT(h.pending_waits(), waits0) << "MakeRoom did not wait for the pending tail block";
  EXPECT_TRUE(released_before_return) << "MakeRoom returned before the Commit or Free";
  EXPECT_EQ(h.moves(), commit ? 1u : 0u);  // a committed tail block is moved, not lost
  EXPECT_EQ(o.blocks(), commit ? 1u : 0u);
  EXPECT_EQ(o.Put(1000, nullptr), Result::kOk);
  o.Verify();
}
INSTANTIATE_TEST_SUITE_P(Heap, PendingTail, ::testing::Bool(),
                         [](const auto& info) { return info.param ? "Commit" : "Free"; });

TEST(Heap, MakeRoomGivesUpOnAPendingTailAfterTheDeadline) {
  FakeOwner o(0, kMiB, milliseconds(100));
  Heap& h = o.heap();
  uint64_t pending = 0, id = 0;
  PendingAtTailAndNoRoom(&o, &pending, &id);
  // kBusy, and not before the deadline (an order, true on any host). No upper bound is
  // asserted: a MakeRoom still waiting after 60 s (600 times its deadline) never gave up,
  // which fails, and the Commit then lets it go.
  const auto start = std::chrono::steady_clock::now();
  auto f = std::async(std::launch::async, [&] { return h.MakeRoom(1000); });
  bool published = false;
  if (f.wait_for(std::chrono::seconds(60)) != std::future_status::ready) {
    ADD_FAILURE() << "MakeRoom did not give up at its deadline";
    o.Publish(pending, id, 1000);
    published = true;
  }
  EXPECT_EQ(f.get(), Result::kBusy);
  EXPECT_GE(std::chrono::steady_clock::now() - start, milliseconds(100));
  EXPECT_GE(h.pending_waits(), 1u) << "MakeRoom gave up without waiting";
  if (!published) o.Publish(pending, id, 1000);
  EXPECT_EQ(h.MakeRoom(1000), Result::kOk);
  EXPECT_EQ(o.Put(1000, nullptr), Result::kOk);
  o.Verify();
}

// Retire (for owners that clear freed bytes): a retired block is pending again, so the cleaner
// waits for it instead of handing it to the Mover while its owner clears it; during a Mover call
// for the block itself, Retire says no (the owner frees it untouched and the Mover clears it).
TEST(Heap, RetireKeepsTheMoverOffTheBlockBeingCleared) {
  Heap h(0, kMiB, milliseconds(50));
  std::vector<uint64_t> moved;
  h.set_mover([&](uint64_t offset, uint32_t size) {
    moved.push_back(offset);
    uint64_t to;
    ASSERT_TRUE(h.AllocateForMove(size, &to));
    h.Commit(to);
    h.Free(offset, size);
  });
  std::vector<uint64_t> blocks;
  uint64_t x;
  while (h.TryAllocate(4000, &x) == Result::kOk) {
    h.Commit(x);
    blocks.push_back(x);
  }
  ASSERT_GT(blocks.size(), 4u);
  // Free every other block (so cleaning can make room), then fill the log up to the reserve.
  for (size_t i = 1; i < blocks.size(); i += 2) h.Free(blocks[i], 4000);
  while (h.TryAllocate(4000, &x) == Result::kOk) h.Commit(x);
  ASSERT_EQ(h.TryAllocate(4000, &x), Result::kNeedsRoom);
  const uint64_t tail = blocks[0];
  ASSERT_TRUE(h.Retire(tail));
  EXPECT_TRUE(h.IsPending(tail));
  EXPECT_FALSE(h.IsLive(tail));
  EXPECT_EQ(h.pending_blocks(), 1u);
  EXPECT_EQ(h.Validate(), "");
  // The retired tail block is not moved: the cleaner waits for it, here in vain.
  EXPECT_EQ(h.MakeRoom(4000), Result::kBusy);
  EXPECT_TRUE(moved.empty());
  h.Free(tail, 4000);
  EXPECT_EQ(h.pending_blocks(), 0u);
  EXPECT_EQ(h.MakeRoom(4000), Result::kOk);
  EXPECT_EQ(std::count(moved.begin(), moved.end(), tail), 0);
  EXPECT_EQ(h.Validate(), "");
}

TEST(Heap, RetireDuringAMoveOfThatBlockIsRefused) {
  Heap h(0, kMiB);
  int refused = 0;
  h.set_mover([&](uint64_t offset, uint32_t size) {
    // The owner unpublished the block while the cleaner was about to move it.
    refused += !h.Retire(offset);
    h.Free(offset, size);  // ... and frees it untouched; the Mover sees it dead.
    EXPECT_FALSE(h.IsLive(offset));
  });
  std::vector<uint64_t> blocks;
  uint64_t x;
  while (h.TryAllocate(4000, &x) == Result::kOk) {
    h.Commit(x);
    blocks.push_back(x);
  }
  for (size_t i = 1; i < blocks.size(); i += 2) h.Free(blocks[i], 4000);
  while (h.TryAllocate(4000, &x) == Result::kOk) h.Commit(x);
  ASSERT_EQ(h.TryAllocate(4000, &x), Result::kNeedsRoom);
  EXPECT_EQ(h.MakeRoom(4000), Result::kOk);
  EXPECT_GT(refused, 0);
  EXPECT_EQ(h.moves(), 0u);
  EXPECT_EQ(h.pending_blocks(), 0u);
  EXPECT_EQ(h.Validate(), "");
}

TEST(HeapDeathTest, RetireOfABlockThatIsNotCommitted) {
  Heap h(0, kMiB);
  uint64_t a;
  ASSERT_EQ(h.TryAllocate(200, &a), Result::kOk);
  EXPECT_DEATH((void)h.Retire(a), "not committed");  // pending
  h.Commit(a);
  EXPECT_DEATH((void)h.Retire(a + 8), "not committed");
  ASSERT_TRUE(h.Retire(a));
  EXPECT_DEATH((void)h.Retire(a), "not committed");  // retired already
  h.Free(a, 200);
  EXPECT_DEATH((void)h.Retire(a), "not committed");  // dead
}

// 4 writers and deleters sharing the heap through the owner's lock; cleaning runs in whichever
// writer needs room, moves blocks others may be freeing, and waits for others' pending blocks.
// Configurations: a roomy heap, and a small one kept nearly full (kFull and kBusy are allowed
// there; lost or corrupted blocks are not).
struct Concurrency {
  uint64_t heap_bytes;
  double max_live;  // writers free instead of writing above this live fraction
  int ops;          // per thread
};
class ConcurrentHeap : public ::testing::TestWithParam<Concurrency> {};

TEST_P(ConcurrentHeap, WritersDeletersAndCleaners) {
  const Concurrency c = GetParam();
  FakeOwner o(0, c.heap_bytes);
  Heap& h = o.heap();
  std::atomic<uint64_t> ok{0}, full{0}, busy{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&, t] {
      std::mt19937_64 rng(100 + t);
      for (int i = 0; i < c.ops; ++i) {
        if (Fraction(h) > c.max_live || rng() % 3 == 0) {
          o.Remove(FakeOwner::kAny, &rng);
          continue;
        }
        const Result r = o.Put(RandomSize(rng), nullptr, /*strict=*/false);
        (r == Result::kOk ? ok : r == Result::kFull ? full : busy)++;
      }
    });
  }
  for (auto& th : threads) th.join();
  o.Verify();
  std::printf(
      "4 threads, %llu KiB, live <= %.0f%%: %llu PUTs ok, %llu full, %llu busy; %llu moves, "
      "%llu skipped (freed meanwhile), %llu waits for pending blocks\n",
      static_cast<unsigned long long>(c.heap_bytes >> 10), 100 * c.max_live,
      static_cast<unsigned long long>(ok.load()), static_cast<unsigned long long>(full.load()),
      static_cast<unsigned long long>(busy.load()), static_cast<unsigned long long>(h.moves()),
      static_cast<unsigned long long>(o.moves_skipped()),
      static_cast<unsigned long long>(h.pending_waits()));
  EXPECT_GT(h.moves(), 0u);
  EXPECT_GT(ok.load(), 0u);
  EXPECT_EQ(h.pending_blocks(), 0u);
}
INSTANTIATE_TEST_SUITE_P(Heap, ConcurrentHeap,
                         ::testing::Values(Concurrency{4 * kMiB, 0.85, 1500},
                                           Concurrency{kMiB, 0.97, 1500}));

}  // namespace
}  // namespace rkv
