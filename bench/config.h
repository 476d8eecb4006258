// SPDX-License-Identifier: Apache-2.0
// kvbench configuration: what a run does, resolved and validated from the command line.
// Resolve() turns the flags as given (RawFlags) into a Config or a message naming the bad flag;
// it is pure, so the option errors are unit-tested (tests/bench_config_test.cc).
// Thread safety: plain values; share a Config read-only.
#ifndef RKV_BENCH_CONFIG_H_
#define RKV_BENCH_CONFIG_H_

#include <cstdint>
#include <limits>
#include <string>
#include <string_view>

namespace rkv::bench {

enum OpType { kRead, kUpdate, kInsert, kRmw, kDelete, kNumOps };
inline constexpr const char* kOpNames[kNumOps] = {"READ", "UPDATE", "INSERT", "READ-MODIFY-WRITE",
                                                  "DELETE"};

enum class Distribution { kUniform, kZipfian, kLatest, kHotspot };
const char* DistributionName(Distribution d);

// A size in bytes, fixed ("64") or a range ("16-1024", both ends included).
struct SizeRange {
  uint32_t min = 0, max = 0;
  bool fixed() const { return min == max; }
};
// False if `text` is not N or MIN-MAX with MIN <= MAX (decimal, at most 2^31).
bool ParseSizeRange(std::string_view text, SizeRange* out);

// The flags as the user gave them. A NaN proportion means "not given".
struct RawFlags {
  std::string phase;         // "load" or "run"
  std::string workload;      // "" (not given), a, b, c, d, e, f
  std::string distribution;  // "" (the workload's default), uniform, zipfian, latest, hotspot
  static constexpr double kUnset = std::numeric_limits<double>::quiet_NaN();
  double read = kUnset, update = kUnset, insert = kUnset, rmw = kUnset, del = kUnset;
  double zipf_theta = 0.99;
  double hotspot_data_fraction = 0.2, hotspot_opn_fraction = 0.8;
  int64_t records = 1000, operations = 10000;
  double duration = 0, target = 0;
  int64_t threads = 1, connections = 1, depth = 1;
  std::string key_size = "0";  // 0: YCSB's user<hash> names
  std::string value_size = "64";
  bool verify = false;
  bool reconnect = true;  // rkv::Options::auto_reconnect for every client
};

struct Config {
  bool load = false;
  std::string workload;  // a..f or "custom"
  double mix[kNumOps] = {};
  Distribution distribution = Distribution::kZipfian;
  double zipf_theta = 0.99;
  double hotspot_data_fraction = 0.2, hotspot_opn_fraction = 0.8;
  uint64_t records = 0, operations = 0;
  double duration = 0, target = 0;
  int threads = 1, connections = 1, depth = 1;
  SizeRange key_size;  // {0,0}: YCSB names
  SizeRange value_size;
  bool verify = false;
  bool reconnect = true;
};

// Empty string on success; otherwise what is wrong, naming the flag.
std::string Resolve(const RawFlags& raw, Config* out);

}  // namespace rkv::bench

#endif  // RKV_BENCH_CONFIG_H_
