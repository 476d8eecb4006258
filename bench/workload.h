// SPDX-License-Identifier: Apache-2.0
// Workload pieces of kvbench: YCSB key naming, key choosers and self-verifying values.
// Thread safety: Zipfian is immutable after construction (Next is const); the free functions
// are pure.
#ifndef RKV_BENCH_WORKLOAD_H_
#define RKV_BENCH_WORKLOAD_H_

#include <cstdint>
#include <random>
#include <string>
#include <string_view>

#include "bench/config.h"

namespace rkv::bench {

// FNV-1a over the 8 bytes of v, as YCSB's Utils.fnvhash64.
uint64_t Fnv64(uint64_t v);
// YCSB's key naming: "user" + hash of the insert order.
std::string KeyOf(uint64_t n);
// Key number n's name: KeyOf(n) when size is {0,0}; else exactly `size` bytes (a length in the
// range picked from n, so a key always has the same name): "u" + 16 hex digits of its hash padded
// with 'x' when there is room, else "k" + n in base 36, zero-padded.
std::string KeyName(uint64_t n, SizeRange size);

// YCSB's ZipfianGenerator over [0, n): item 0 is the most popular. u is uniform in [0, 1).
class Zipfian {
 public:
  Zipfian(uint64_t n, double theta);
  uint64_t Next(double u) const;
  double zetan() const { return zetan_; }

 private:
  uint64_t n_;
  double theta_, zetan_ = 0, alpha_, eta_;
};

// Picks the key number of the next operation per --distribution, over the `inserted` keys
// that exist: uniform; zipfian (YCSB's scrambled zipfian: popular items hashed over the key
// space); latest (zipfian over recency: the newest key is the most popular); hotspot
// (hotspot_opn_fraction of operations go to the first hotspot_data_fraction of the keys).
// Thread safety: Next is const; give each thread its own rng.
class KeyChooser {
 public:
  explicit KeyChooser(const Config& c);
  uint64_t Next(std::mt19937_64& rng, uint64_t inserted) const;

 private:
  Distribution dist_;
  Zipfian zipf_;
  double hot_data_, hot_opn_;
};

// Self-verifying values. Every value kvbench writes, with or without --verify, is one of these,
// so `run --verify` works after any kvbench load (docs/kvbench.md).
//  - size >= 16: bytes 0..7 XXH3-64 of bytes 8..end seeded with XXH3-64 of the key; bytes 8..11
//    the marker "kvB1"; bytes 12..15 the low 32 bits of the version (little-endian); then filler
//    derived from the version.
//  - size 1..15: the first `size` bytes of the key's pattern (XXH3-128 of the key and the size,
//    little-endian): no version or marker fits, so a mismatch cannot tell a foreign value from
//    another key's.
//  - size 0: the empty value (nothing to check).
inline constexpr size_t kFullValueHeader = 16;
void FillValue(std::string_view key, uint64_t version, std::string* value);

enum class ValueCheck {
  kOk,        // made by FillValue for this key
  kWrong,     // has kvbench's marker but not this key's checksum: torn, or another key's
  kForeign,   // not a kvbench value (no marker): written by something else
  kMismatch,  // a short value that is not this key's pattern (foreign or wrong: no marker fits)
};
ValueCheck CheckValue(std::string_view key, std::string_view value);
// A sentence for a failed check ("not written by kvbench", ...).
const char* ValueCheckText(ValueCheck c);
// True if CheckValue says kOk.
inline bool VerifyValue(std::string_view key, std::string_view value) {
  return CheckValue(key, value) == ValueCheck::kOk;
}

}  // namespace rkv::bench

#endif  // RKV_BENCH_WORKLOAD_H_
