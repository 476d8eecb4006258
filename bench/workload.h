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

// Self-verifying values: bytes 0..7 XXH3-64 of (key, bytes 8..end), bytes 8..15 the version,
// then filler derived from the version. Needs size >= 16.
inline constexpr size_t kMinVerifiableValue = 16;
void FillValue(std::string_view key, uint64_t version, std::string* value);
// True if `value` was made by FillValue for this key (not torn, not another key's).
bool VerifyValue(std::string_view key, std::string_view value);

}  // namespace rkv::bench

#endif  // RKV_BENCH_WORKLOAD_H_
