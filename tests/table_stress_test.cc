// SPDX-License-Identifier: Apache-2.0
// The table under attack and under load, read the way a NIC serves READs (tests/local_reader.h
// NicRead copies buckets and targets before probing):
// - concurrent writers (PUT/DELETE of sizes from 1 B to 64 KiB, a family of keys with one 64-bit
//   hash among them) in a small table whose heap keeps cleaning and moving blocks, while readers
//   check that every value they get belongs to the key and is not older than the last write
//   acknowledged before the read began, and that NOT_FOUND comes only when the key may have been
//   absent;
// - a client that plants block images in its own values at the offsets where a victim's stale
//   pointer will land (the attack the review found before blocks were masked).
// (The memcpy of a reader races the writers' stores, as a NIC's READ does; these tests run under
// ASan/UBSan, not TSan.)
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "common/table/layout.h"
#include "common/table/lookup.h"
#include "server/store/table.h"
#include "tests/colliding_keys.h"
#include "tests/local_reader.h"
#include "tests/sized_gen.h"

namespace rkv {
namespace {

// The length of value `seq` of key `id`, from 1 B to 64 KiB: a function of both, so that a
// reader can check a value's length too. Gen's bytes are prefix-consistent (a value cut short
// equals the start of the whole one), so comparing with Gen(id, seq, value.size()) would pass a
// truncated value.
size_t GenSize(int id, uint64_t seq) {
  static constexpr size_t kSizes[] = {1, 20, 60, 80, 100, 150, 700, 3000, 12000, 40000, 65536};
  return rkv::testing::SizeFor(id, seq, kSizes);
}

// Value `seq` of key `id` (GenSize(id, seq) bytes): self-identifying when long enough,
// reproducible when short.
std::string Gen(int id, uint64_t seq) {
  const size_t len = GenSize(id, seq);
  std::string v(len, '\0');
  uint64_t x = uint64_t(id) * 0x9E3779B97F4A7C15ull ^ seq * 0xC2B2AE3D27D4EB4Full;
  for (size_t i = 0; i < len; ++i) {
    x ^= x << 13;
    x ^= x >> 7;
    x ^= x << 17;
    v[i] = char(x);
  }
  char hdr[32];
  int n = snprintf(hdr, sizeof hdr, "%d:%llu:", id, static_cast<unsigned long long>(seq));
  if (len >= size_t(n)) std::memcpy(&v[0], hdr, n);
  return v;
}

struct KeyState {
  std::atomic<uint64_t> started{0};    // seq of the latest write begun
  std::atomic<uint64_t> completed{0};  // seq << 1 | is_put of the latest write acknowledged
};

struct StressResult {
  uint64_t puts = 0, reads = 0, found = 0, absent = 0, retries = 0, errors = 0, moves = 0;
};

StressResult RunStress(uint64_t region_size, uint32_t buckets, const std::vector<std::string>& keys,
                       std::chrono::milliseconds duration, int delay_us) {
  std::vector<uint8_t> mem(region_size);
  layout::Geometry geo;
  EXPECT_TRUE(layout::ComputeGeometry(region_size, buckets, 0.25, 99, &geo));
  Table table(mem.data(), geo);
  const int kWriters = 4, n = int(keys.size());
  std::vector<KeyState> st(n);
  std::atomic<bool> stop{false};
  std::atomic<uint64_t> puts{0}, reads{0}, found{0}, absent{0}, retries{0}, errors{0};
  std::vector<std::thread> threads;
  for (int w = 0; w < kWriters; ++w) {
    threads.emplace_back([&, w] {  // writer w owns the keys id % kWriters == w
      std::mt19937_64 rng(w + 1);
      while (!stop) {
        int id = w + kWriters * int(rng() % (n / kWriters));
        uint64_t seq = st[id].started.load() + 1;
        st[id].started.store(seq);
        if (rng() % 4 == 0) {
          (void)table.Delete(keys[id]);
          st[id].completed.store(seq << 1);
        } else if (table.Put(keys[id], Gen(id, seq)).ok()) {
          st[id].completed.store(seq << 1 | 1);
          ++puts;
        }
      }
    });
  }
  auto fail = [&](const std::string& why) {
    if (errors++ < 5) ADD_FAILURE() << why;
  };
  for (int r = 0; r < 2; ++r) {
    threads.emplace_back([&, r] {
      std::mt19937_64 rng(100 + r);
      while (!stop) {
        const int id = int(rng() % n);
        const uint64_t c = st[id].completed.load();
        testing::LocalReadResult res;
        for (int attempt = 0; attempt < 100000; ++attempt) {
          res = testing::NicRead(mem.data(), geo, keys[id], [&] {
            if (delay_us && rng() % 8 == 0)
              std::this_thread::sleep_for(std::chrono::microseconds(rng() % delay_us));
          });
          if (res.outcome != testing::LocalReadResult::kRetry) break;
          ++retries;
        }
        const uint64_t s_end = st[id].started.load();
        ++reads;
        const uint64_t cseq = c >> 1;
        const bool cput = c & 1;
        if (res.outcome == testing::LocalReadResult::kRetry) {
          fail("key " + std::to_string(id) + ": retries exhausted");
        } else if (res.outcome == testing::LocalReadResult::kAbsent) {
          ++absent;
          if (cput && s_end == cseq)
            fail("key " + std::to_string(id) + " NOT_FOUND though present throughout");
        } else {
          ++found;
          // One of the writes acknowledged or begun during the read, whole: its bytes and its
          // length (GenSize), so a value cut short is no write.
          bool ok = false;
          for (uint64_t q = cseq + (cput ? 0 : 1); q <= s_end && !ok; ++q)
            ok = res.value == Gen(id, q);
          if (!ok)
            fail("key " + std::to_string(id) + ": value of " + std::to_string(res.value.size()) +
                 " bytes is no write in [" + std::to_string(cseq) + ", " + std::to_string(s_end) +
                 "]");
        }
      }
    });
  }
  std::this_thread::sleep_for(duration);
  stop = true;
  for (auto& t : threads) t.join();
  EXPECT_EQ(table.heap().Validate(), "");
  StressResult out;
  out.puts = puts;
  out.reads = reads;
  out.found = found;
  out.absent = absent;
  out.retries = retries;
  out.errors = errors;
  out.moves = table.heap().moves();
  printf(
      "stress: %llu puts, %llu reads (%llu found, %llu absent, %llu retries), %llu blocks "
      "moved, %llu errors\n",
      static_cast<unsigned long long>(out.puts), static_cast<unsigned long long>(out.reads),
      static_cast<unsigned long long>(out.found), static_cast<unsigned long long>(out.absent),
      static_cast<unsigned long long>(out.retries), static_cast<unsigned long long>(out.moves),
      static_cast<unsigned long long>(out.errors));
  return out;
}

TEST(TableStress, NicLikeReadersUnderWritersAndACleaningHeap) {
  std::vector<std::string> keys;
  for (int i = 0; i < 136; ++i) keys.push_back("key-" + std::to_string(i));
  for (auto& k : testing::CollidingKeys(99, 24, "fam")) keys.push_back(k);
  // 4 MiB, 32 buckets: the heap fills and cleans constantly, overflow refs are in use.
  StressResult r = RunStress(4 << 20, 32, keys, std::chrono::milliseconds(1500), 0);
  EXPECT_EQ(r.errors, 0u);
  EXPECT_GT(r.moves, 0u);
  EXPECT_GT(r.found, 0u);
}

TEST(TableStress, DelayedReadersAndTwoCollidingFamilies) {
  std::vector<std::string> keys;
  for (auto& k : testing::CollidingKeys(99, 20, "famA")) keys.push_back(k);
  for (auto& k : testing::CollidingKeys(99, 20, "famB")) keys.push_back(k);
  // Readers sleep up to 2 ms between their two round trips (a descheduled client).
  StressResult r = RunStress(2 << 20, 16, keys, std::chrono::milliseconds(1500), 2000);
  EXPECT_EQ(r.errors, 0u);
  EXPECT_GT(r.found, 0u);
}

// The review's attack, end to end on a Table: the victim has read K's slot (block at A, version
// V); K is updated and A freed; the attacker keeps PUTting values that hold a valid-looking
// image of V's block, with evil bytes, placed exactly where A will fall inside its next block.
// The victim's delayed second READ of A must never accept it.
TEST(TableStress, PlantedImagesAtAReusedOffsetAreNeverAccepted) {
  const uint64_t region = 1 << 20;
  std::vector<uint8_t> mem(region);
  layout::Geometry geo;
  ASSERT_TRUE(layout::ComputeGeometry(region, 16, 0.25, 7, &geo));
  Table table(mem.data(), geo);
  const std::string K = "victim-key", P = "pad-key", E = "attacker-key";
  ASSERT_TRUE(table.Put(P, std::string(1000, 'p')).ok());
  ASSERT_TRUE(table.Put(K, std::string(3000, 'v')).ok());
  using namespace layout;
  KeyHash kh = HashKey(K, geo.seed, geo.num_buckets);
  std::vector<uint8_t> bk(2 * kBucketSize);
  std::memcpy(bk.data(), mem.data() + geo.bucket_offset(kh.bucket[0]), bk.size());
  Probe stale = ProbeBuckets(bk.data(), bk.data() + kBucketSize, K, kh, geo.seed);
  ASSERT_EQ(stale.outcome, Probe::kFollow);
  ASSERT_EQ(stale.target_count, 1);
  const Target t = stale.targets[0];
  ASSERT_TRUE(table.Put(K, "new").ok());
  ASSERT_TRUE(table.Delete(P).ok());
  // The image the attacker plants: everything in it is public (seed, V and sizes from K's slot).
  std::vector<uint8_t> fake(t.length);
  EncodeBlock(fake.data(), geo.seed, t.version, K, std::string(t.value_size, 'X'), 0);
  const uint32_t vsize = 60000;
  const uint32_t bsize = RoundBlock(BlockBytes(E.size(), vsize));
  const KeyHash eh = HashKey(E, geo.seed, geo.num_buckets);
  int planted = 0;
  for (int i = 0; i < 500; ++i) {
    // Where E's next block will go: after its current one (any client can read that), or at the
    // heap's start after a wrap.
    uint64_t h = geo.heap_offset;
    std::memcpy(bk.data(), mem.data() + geo.bucket_offset(eh.bucket[0]), bk.size());
    Probe pe = ProbeBuckets(bk.data(), bk.data() + kBucketSize, E, eh, geo.seed);
    if (pe.outcome == Probe::kFollow) h = pe.targets[0].offset + bsize;
    if (h + bsize > region) h = geo.heap_offset;
    std::string v(vsize, 'e');
    const uint64_t at = h + kBlockHeaderSize + E.size();
    if (t.offset >= at && t.offset + fake.size() <= h + bsize) {
      std::memcpy(&v[t.offset - at], fake.data(), fake.size());
      ++planted;
    }
    ASSERT_TRUE(table.Put(E, v).ok());
    std::vector<uint8_t> tb(mem.data() + t.offset, mem.data() + t.offset + t.length);
    FoundValue found;
    if (ProbeTarget(tb.data(), t, K, geo.seed, &found) != TargetOutcome::kFound) continue;
    // Only the genuine block of version V (not yet reused) may be accepted.
    std::string got;
    found.AssignTo(&got);
    ASSERT_EQ(got, std::string(3000, 'v'))
        << "after " << i + 1 << " attacker PUTs the victim would read a value never written";
  }
  EXPECT_GT(planted, 0);  // the attack really placed its image over A
}

}  // namespace
}  // namespace rkv
