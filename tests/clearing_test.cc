// SPDX-License-Identifier: Apache-2.0
// Nothing left to read (issue 12): the bytes of a deleted or overwritten key or value, of the
// old copy of a moved block and of a PUT the log refused are cleared before their memory can be
// read again. Each test owns the region's buffer and scans all of it, as a client READing the
// whole region would, for 32-byte random markers placed in every key and value: a dead marker
// must be found nowhere, a live one exactly once per live copy.
// Heap blocks store key and value XORed with a per-block mask (common/table/layout.h), which
// the block's header discloses; the scan ignores the mask instead: for bytes masked with any
// 8-byte-periodic mask, x[i] ^ x[i + 8] does not depend on the mask, so the scan looks for the
// marker's 24-byte difference pattern (plain copies match too).
// Also: readers racing the clears never see wrong data. The cost of clearing per DELETE is a
// figure, not a test: `cost_bench clearing` (bench/cost_bench.cc).
#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <map>
#include <memory>
#include <random>
#include <string>
#include <thread>
#include <unordered_map>
#include <vector>

#include "common/table/layout.h"
#include "server/store/table.h"
#include "server/write_log.h"
#include "tests/colliding_keys.h"
#include "tests/local_reader.h"
#include "tests/sized_gen.h"

#if defined(__SANITIZE_THREAD__)
#define RKV_CLEARING_TSAN 1
#elif defined(__has_feature)
#if __has_feature(thread_sanitizer)
#define RKV_CLEARING_TSAN 1
#endif
#endif

namespace rkv {
namespace {

constexpr size_t kMarker = 32;
using Marker = std::string;  // kMarker bytes

Marker RandomMarker(std::mt19937_64* rng) {
  Marker m(kMarker, '\0');
  for (size_t i = 0; i < kMarker; i += 8) {
    const uint64_t w = (*rng)();
    std::memcpy(&m[i], &w, 8);
  }
  return m;
}

// Counts, in one pass over a region, the copies of every registered marker, plain or masked.
class MarkerScan {
 public:
  // Returns the marker's index.
  size_t Add(const Marker& m) {
    uint8_t d[kMarker - 8];
    for (size_t i = 0; i < sizeof d; ++i) d[i] = uint8_t(m[i]) ^ uint8_t(m[i + 8]);
    uint64_t first;
    std::memcpy(&first, d, 8);
    diffs_.emplace_back(d, d + sizeof d);
    by_first_.emplace(first, diffs_.size() - 1);
    return diffs_.size() - 1;
  }
  std::vector<int> Count(const uint8_t* region, size_t size) const {
    std::vector<int> counts(diffs_.size(), 0);
    for (size_t j = 0; j + kMarker <= size; ++j) {
      uint64_t a, b;
      std::memcpy(&a, region + j, 8);
      std::memcpy(&b, region + j + 8, 8);
      const uint64_t first = a ^ b;
      if (first == 0) continue;  // cleared memory, and no marker starts so
      auto [lo, hi] = by_first_.equal_range(first);
      for (auto it = lo; it != hi; ++it) {
        const std::vector<uint8_t>& d = diffs_[it->second];
        bool match = true;
        for (size_t i = 8; i < d.size() && match; ++i)
          match = (region[j + i] ^ region[j + i + 8]) == d[i];
        counts[it->second] += match;
      }
    }
    return counts;
  }

 private:
  std::vector<std::vector<uint8_t>> diffs_;
  std::unordered_multimap<uint64_t, size_t> by_first_;
};

// Every marker ever written, and whether its key or value is live now.
struct Ledger {
  std::vector<Marker> markers;
  std::vector<bool> live;
  size_t Add(const Marker& m, bool is_live) {
    markers.push_back(m);
    live.push_back(is_live);
    return markers.size() - 1;
  }
  // Scans the region: dead markers found nowhere, live ones exactly once. Returns the number of
  // dead markers (so tests can say how much they checked).
  size_t Check(const std::vector<uint8_t>& mem, const char* when) const {
    MarkerScan scan;
    for (const Marker& m : markers) scan.Add(m);
    const std::vector<int> counts = scan.Count(mem.data(), mem.size());
    size_t dead = 0;
    int reported = 0;
    for (size_t i = 0; i < markers.size(); ++i) {
      dead += !live[i];
      const int want = live[i] ? 1 : 0;
      if (counts[i] != want && reported++ < 5)
        ADD_FAILURE() << when << ": " << (live[i] ? "live" : "dead") << " marker " << i << " found "
                      << counts[i] << " times";
    }
    return dead;
  }
};

// A value of `size` bytes (>= kMarker) of random filler with `marker` at a random place.
std::string ValueWith(const Marker& marker, size_t size, std::mt19937_64* rng) {
  std::string v(size, '\0');
  for (char& c : v) c = char((*rng)());
  std::memcpy(&v[(*rng)() % (size - kMarker + 1)], marker.data(), kMarker);
  return v;
}

struct TestTable {
  // `garbage`: fill the memory first; the Table must clear all of it (nothing from before is
  // left to read).
  TestTable(uint64_t size, uint32_t buckets, bool garbage = true) : mem(size) {
    if (garbage) std::fill(mem.begin(), mem.end(), uint8_t{0xA5});
    EXPECT_TRUE(layout::ComputeGeometry(size, buckets, 0.25, 77, &geo));
    table = std::make_unique<Table>(mem.data(), geo);
    if (garbage) {
      EXPECT_TRUE(std::all_of(mem.begin(), mem.end(), [](uint8_t b) { return b == 0; }));
    }
  }
  std::vector<uint8_t> mem;
  layout::Geometry geo;
  std::unique_ptr<Table> table;
};

// A model of the table for single-threaded histories: per key, its key marker and its value's.
struct Model {
  struct Entry {
    std::string key;
    size_t key_marker = kNone;  // kNone: the key holds no marker
    bool present = false;
    size_t value_marker = 0;
    std::string value;
  };
  static constexpr size_t kNone = ~size_t{0};
  Ledger ledger;
  std::vector<Entry> entries;
  // `m`: the marker inside the key, or nullptr.
  void AddKey(std::string key, const Marker* m) {
    Entry e;
    e.key = std::move(key);
    if (m != nullptr) e.key_marker = ledger.Add(*m, false);
    entries.push_back(std::move(e));
  }
  void SetKeyLive(const Entry& e, bool live) {
    if (e.key_marker != kNone) ledger.live[e.key_marker] = live;
  }
  // A PUT of a value holding a new marker; the old value (if any) dies if it succeeds.
  Status Put(Table* t, size_t i, size_t size, std::mt19937_64* rng) {
    Entry& e = entries[i];
    const Marker m = RandomMarker(rng);
    std::string v = ValueWith(m, size, rng);
    Status s = t->Put(e.key, v);
    const size_t vm = ledger.Add(m, s.ok());
    if (!s.ok()) return s;
    if (e.present) ledger.live[e.value_marker] = false;
    e.present = true;
    e.value_marker = vm;
    e.value = std::move(v);
    SetKeyLive(e, true);
    return s;
  }
  void Delete(Table* t, size_t i) {
    Entry& e = entries[i];
    EXPECT_EQ(t->Delete(e.key).ok(), e.present);
    if (!e.present) return;
    e.present = false;
    SetKeyLive(e, false);
    ledger.live[e.value_marker] = false;
  }
  void VerifyValues(const Table& t) const {
    std::string got;
    for (const Entry& e : entries) {
      Status s = t.Get(e.key, &got);
      ASSERT_EQ(s.ok(), e.present);
      if (e.present) {
        ASSERT_EQ(got, e.value);
      }
    }
  }
};

// Random PUT/overwrite/DELETE histories over inline (64 B), heap (1000 B, 30000 B, and sizes
// between) and overflow entries (a tiny index: both buckets of a pair fill up), in a heap small
// enough that the cleaner keeps moving blocks. Checked every 400 operations and at the end.
TEST(Clearing, DeadKeysAndValuesAreNowhereInTheRegion) {
  TestTable t(3 << 20, 32);
  Table& table = *t.table;
  std::mt19937_64 rng(12);
  Model model;
  for (int i = 0; i < 300; ++i) {  // 8-byte prefix + 32-byte marker: 40-byte keys
    char prefix[9];
    std::snprintf(prefix, sizeof prefix, "k%07d", i);
    const Marker m = RandomMarker(&rng);
    model.AddKey(std::string(prefix, 8) + m, &m);
  }
  const size_t sizes[] = {64, 64, 40, 200, 1000, 1000, 5000, 30000};
  uint64_t max_overflow = 0, full = 0, deletes = 0;
  for (int op = 1; op <= 4000; ++op) {
    const size_t i = rng() % model.entries.size();
    if (rng() % 4 == 0) {
      deletes += model.entries[i].present;
      model.Delete(&table, i);
    } else {
      Status s = model.Put(&table, i, sizes[rng() % 8], &rng);
      ASSERT_TRUE(s.ok() || s.code() == Code::kTableFull) << s.ToString();
      full += !s.ok();
    }
    max_overflow = std::max(max_overflow, table.overflow_entries());
    if (op % 400 == 0) {
      model.ledger.Check(t.mem, ("after op " + std::to_string(op)).c_str());
      ASSERT_FALSE(HasFailure());
    }
  }
  model.VerifyValues(table);
  const size_t dead = model.ledger.Check(t.mem, "at the end");
  // Then everything goes: only zeros (and no marker) remain.
  for (size_t i = 0; i < model.entries.size(); ++i) model.Delete(&table, i);
  model.ledger.Check(t.mem, "after deleting all");
  EXPECT_TRUE(std::all_of(t.mem.begin(), t.mem.end(), [](uint8_t b) { return b == 0; }))
      << "an empty table leaves nonzero bytes in the region";
  EXPECT_EQ(table.heap().Validate(), "");
  std::printf(
      "%zu markers, %zu dead; %llu deletes, %llu blocks moved, %llu PUTs refused, "
      "up to %llu overflow entries\n",
      model.ledger.markers.size(), dead, static_cast<unsigned long long>(deletes),
      static_cast<unsigned long long>(table.heap().moves()), static_cast<unsigned long long>(full),
      static_cast<unsigned long long>(max_overflow));
  EXPECT_GT(table.heap().moves(), 0u);  // the cleaner's old copies were checked
  EXPECT_GT(max_overflow, 3u);          // and overflow slots and ref blocks
}

// Overflow entries made on purpose: keys with one 64-bit hash share a bucket pair, so past 14 of
// them they go to overflow slots (small values) or to heap blocks published by refs (large).
// Every kind change and delete leaves no trace.
TEST(Clearing, OverflowSlotsAndRefBlocks) {
  TestTable t(2 << 20, 64);
  Table& table = *t.table;
  std::mt19937_64 rng(5);
  Model model;
  for (const std::string& k : testing::CollidingKeys(t.geo.seed, 20, "clear"))
    model.AddKey(k, nullptr);  // colliding keys are alike: their values carry the markers
  for (size_t i = 0; i < 14; ++i) ASSERT_TRUE(model.Put(&table, i, 64, &rng).ok());
  ASSERT_EQ(table.overflow_entries(), 0u);
  for (size_t i = 14; i < 20; ++i) ASSERT_TRUE(model.Put(&table, i, i % 2 ? 64 : 3000, &rng).ok());
  ASSERT_EQ(table.overflow_entries(), 6u);
  model.ledger.Check(t.mem, "filled");
  // slot -> slot (in place), slot -> block, block -> block, block -> slot.
  for (int round = 0; round < 4; ++round) {
    for (size_t i = 14; i < 20; ++i)
      ASSERT_TRUE(model.Put(&table, i, (i + round) % 2 ? 64 : 3000, &rng).ok());
    for (size_t i = 14; i < 20; ++i) ASSERT_TRUE(model.Put(&table, i, 72, &rng).ok());
    model.ledger.Check(t.mem, ("round " + std::to_string(round)).c_str());
    ASSERT_FALSE(HasFailure());
  }
  // Delete overflow entries of both kinds, and bucket entries, then re-insert.
  for (size_t i = 14; i < 20; ++i) ASSERT_TRUE(model.Put(&table, i, i % 2 ? 64 : 3000, &rng).ok());
  for (size_t i = 0; i < 20; i += 1 + (i >= 14)) model.Delete(&table, i);
  model.ledger.Check(t.mem, "after deletes");
  for (size_t i = 0; i < 20; ++i)
    if (!model.entries[i].present) {
      ASSERT_TRUE(model.Put(&table, i, 2000, &rng).ok());
    }
  model.ledger.Check(t.mem, "after re-inserts");
  model.VerifyValues(table);
}

// A WriteLog that refuses PUTs when told to.
class RefusingLog : public WriteLog {
 public:
  bool refuse = false;
  Status LogPut(std::string_view, std::string_view) override {
    return refuse ? Status(Code::kIoError, "refused") : Status::Ok();
  }
  Status LogDelete(std::string_view) override { return Status::Ok(); }
  Status Ready() const override { return Status::Ok(); }
};

// A PUT whose log write fails is undone: its heap block (bucket or ref entry) and its overflow
// slot are cleared, and the old value stays.
TEST(Clearing, PutRefusedByTheLogLeavesNothing) {
  TestTable t(2 << 20, 64);
  Table& table = *t.table;
  RefusingLog log;
  table.SetWriteLog(&log);
  std::mt19937_64 rng(9);
  Model model;
  for (const std::string& k : testing::CollidingKeys(t.geo.seed, 18, "undo"))
    model.AddKey(k, nullptr);
  for (size_t i = 0; i < 16; ++i) ASSERT_TRUE(model.Put(&table, i, i % 2 ? 64 : 3000, &rng).ok());
  ASSERT_EQ(table.overflow_entries(), 2u);
  log.refuse = true;
  for (size_t i = 0; i < 18; ++i)  // updates (bucket and overflow) and inserts, every kind
    for (size_t size : {size_t{64}, size_t{3000}})
      EXPECT_EQ(model.Put(&table, i, size, &rng).code(), Code::kIoError);
  // An insert that found both buckets full got an overflow slot, wrote it and gave it back.
  model.ledger.Check(t.mem, "after refused PUTs");
  model.VerifyValues(table);
  table.SetWriteLog(nullptr);
}

// Readers racing writers that delete, overwrite and move blocks never see wrong data (a clear in
// progress is a bad checksum: they retry); afterwards no dead value is left. Under TSan the
// readers (whose copies race the writers' stores, as a NIC's READs do) are left out and the
// writers' own handshake with the cleaner is what is checked.
// The length of value `seq` of key `id` (64 B inline to 30000 B heap values): a function of
// both, so that a reader checks a value's length too (Gen's bytes are prefix-consistent: a value
// cut short equals the start of the whole one).
uint32_t GenSize(int id, uint64_t seq) {
  static constexpr uint32_t kSizes[] = {64, 64, 200, 1000, 1000, 30000};
  return rkv::testing::SizeFor(id, seq, kSizes);
}
std::string Gen(int id, uint64_t seq) {
  const size_t len = GenSize(id, seq);
  std::string v(len, '\0');
  uint64_t x = (uint64_t(id) + 1) * 0x9E3779B97F4A7C15ull ^ seq * 0xC2B2AE3D27D4EB4Full;
  for (size_t i = 0; i < len; ++i) {
    x ^= x << 13;
    x ^= x >> 7;
    x ^= x << 17;
    v[i] = char(x);
  }
  char hdr[32];
  const int n =
      std::snprintf(hdr, sizeof hdr, "%d:%llu:", id, static_cast<unsigned long long>(seq));
  std::memcpy(&v[0], hdr, size_t(n));
  return v;
}

TEST(Clearing, ConcurrentReadersNeverSeeWrongDataWhileWritersClear) {
  TestTable t(4 << 20, 64);
  Table& table = *t.table;
  constexpr int kWriters = 2, kKeysPerWriter = 200;  // blocks live long enough to be moved
#ifdef RKV_CLEARING_TSAN
  constexpr int kReaders = 0;
#else
  constexpr int kReaders = 2;
#endif
  std::vector<std::string> keys;
  for (int i = 0; i < kWriters * kKeysPerWriter; ++i) keys.push_back("c-" + std::to_string(i));
  struct Written {
    int id;
    uint64_t seq;
    uint32_t size;
  };
  std::vector<std::vector<Written>> written(kWriters);  // every value, per writer
  std::vector<uint64_t> live_seq(keys.size(), 0);       // 0: absent at the end
  std::vector<std::atomic<uint64_t>> next_seq(keys.size());
  std::atomic<bool> stop{false};
  std::atomic<uint64_t> reads{0}, found{0}, retries{0}, errors{0};
  std::vector<std::thread> threads;
  for (int w = 0; w < kWriters; ++w) {
    threads.emplace_back([&, w] {  // writer w owns keys id % kWriters == w
      std::mt19937_64 rng(w + 1);
      while (!stop) {
        const int id = w + kWriters * int(rng() % kKeysPerWriter);
        if (rng() % 3 == 0) {
          (void)table.Delete(keys[id]);
          live_seq[id] = 0;
          continue;
        }
        const uint64_t seq = next_seq[id].fetch_add(1) + 1;
        const Status s = table.Put(keys[id], Gen(id, seq));
        written[w].push_back({id, seq, GenSize(id, seq)});
        if (s.ok()) live_seq[id] = seq;
      }
    });
  }
  for (int r = 0; r < kReaders; ++r) {
    threads.emplace_back([&, r] {
      std::mt19937_64 rng(100 + r);
      while (!stop) {
        const int id = int(rng() % keys.size());
        testing::LocalReadResult res;
        for (int attempt = 0; attempt < 100000; ++attempt) {
          res = testing::NicRead(t.mem.data(), t.geo, keys[id], [] {});
          if (res.outcome != testing::LocalReadResult::kRetry) break;
          ++retries;
        }
        ++reads;
        if (res.outcome == testing::LocalReadResult::kRetry) {
          if (errors++ < 5) ADD_FAILURE() << "key " << id << ": retries exhausted";
          continue;
        }
        if (res.outcome != testing::LocalReadResult::kFound) continue;
        ++found;
        int got_id = -1;
        unsigned long long seq = 0;
        const bool ok = std::sscanf(res.value.c_str(), "%d:%llu:", &got_id, &seq) == 2 &&
                        got_id == id && res.value == Gen(id, seq);  // bytes and length
        if (!ok && errors++ < 5)
          ADD_FAILURE() << "key " << id << ": a value of " << res.value.size()
                        << " bytes that was never written for it";
      }
    });
  }
  // 1.5 s, and (slower builds) until the cleaner has moved blocks, 30 s at most.
  const auto start = std::chrono::steady_clock::now();
  while (std::chrono::steady_clock::now() - start < std::chrono::seconds(30) &&
         (std::chrono::steady_clock::now() - start < std::chrono::milliseconds(1500) ||
          table.heap().moves() < 20))
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  stop = true;
  for (auto& th : threads) th.join();
  EXPECT_EQ(errors.load(), 0u);
  EXPECT_EQ(table.heap().Validate(), "");
  // The last 32 bytes of every value are its marker.
  Ledger ledger;
  for (const auto& list : written)
    for (const Written& x : list)
      ledger.Add(Gen(x.id, x.seq).substr(x.size - kMarker), live_seq[x.id] == x.seq);
  const size_t dead = ledger.Check(t.mem, "after the run");
  std::printf(
      "%zu values written (%zu dead), %llu blocks moved; %d readers: %llu reads, %llu "
      "found, %llu retries\n",
      ledger.markers.size(), dead, static_cast<unsigned long long>(table.heap().moves()), kReaders,
      static_cast<unsigned long long>(reads.load()), static_cast<unsigned long long>(found.load()),
      static_cast<unsigned long long>(retries.load()));
  EXPECT_GT(table.heap().moves(), 0u);
  EXPECT_GT(dead, 1000u);
}

}  // namespace
}  // namespace rkv
