// SPDX-License-Identifier: Apache-2.0
#include "bench/config.h"

#include <cmath>
#include <cstdlib>

#include "bench/workload.h"

namespace rkv::bench {

const char* DistributionName(Distribution d) {
  switch (d) {
    case Distribution::kUniform:
      return "uniform";
    case Distribution::kZipfian:
      return "zipfian";
    case Distribution::kLatest:
      return "latest";
    case Distribution::kHotspot:
      return "hotspot";
  }
  return "?";
}

namespace {
bool ParseU32(std::string_view s, uint32_t* v) {
  if (s.empty() || s.size() > 10) return false;
  uint64_t x = 0;
  for (char c : s) {
    if (c < '0' || c > '9') return false;
    x = x * 10 + uint64_t(c - '0');
  }
  if (x > (uint64_t{1} << 31)) return false;
  *v = static_cast<uint32_t>(x);
  return true;
}
}  // namespace

bool ParseSizeRange(std::string_view text, SizeRange* out) {
  auto dash = text.find('-');
  SizeRange r;
  if (dash == std::string_view::npos) {
    if (!ParseU32(text, &r.min)) return false;
    r.max = r.min;
  } else if (!ParseU32(text.substr(0, dash), &r.min) || !ParseU32(text.substr(dash + 1), &r.max) ||
             r.min > r.max) {
    return false;
  }
  *out = r;
  return true;
}

std::string Resolve(const RawFlags& raw, Config* out) {
  static constexpr const char* kFlagNames[kNumOps] = {"read", "update", "insert", "rmw", "delete"};
  Config c;
  if (raw.phase != "load" && raw.phase != "run") return "the phase must be load or run";
  c.load = raw.phase == "load";
  const std::string& w = raw.workload.empty() ? std::string("a") : raw.workload;
  double* m = c.mix;
  if (w == "a") {
    m[kRead] = 0.5, m[kUpdate] = 0.5;
  } else if (w == "b") {
    m[kRead] = 0.95, m[kUpdate] = 0.05;
  } else if (w == "c") {
    m[kRead] = 1;
  } else if (w == "d") {
    m[kRead] = 0.95, m[kInsert] = 0.05;
    c.distribution = Distribution::kLatest;
  } else if (w == "f") {
    m[kRead] = 0.5, m[kRmw] = 0.5;
  } else if (w == "e") {
    return "workload e needs range scans (SCAN); rkv is a hash table and has no ordered scan";
  } else {
    return "unknown --workload=" + w + " (a, b, c, d or f; or give the proportions)";
  }
  c.workload = w;
  const double given[kNumOps] = {raw.read, raw.update, raw.insert, raw.rmw, raw.del};
  bool custom = false;
  for (double g : given) custom |= !std::isnan(g);
  if (custom) {
    // YCSB: a proportion given on the command line replaces the workload's; with no
    // --workload the others are 0.
    c.workload = raw.workload.empty() ? "custom" : w + "+custom";
    double sum = 0;
    for (int k = 0; k < kNumOps; ++k) {
      if (given[k] < 0 || given[k] > 1)
        return std::string("--") + kFlagNames[k] + "-proportion must be in [0, 1]";
      if (!std::isnan(given[k]))
        m[k] = given[k];
      else if (raw.workload.empty())
        m[k] = 0;
      sum += m[k];
    }
    if (std::fabs(sum - 1) > 1e-6)
      return "the operation proportions add up to " + std::to_string(sum) + ", not 1";
  }
  if (!raw.distribution.empty()) {
    if (raw.distribution == "uniform")
      c.distribution = Distribution::kUniform;
    else if (raw.distribution == "zipfian")
      c.distribution = Distribution::kZipfian;
    else if (raw.distribution == "latest")
      c.distribution = Distribution::kLatest;
    else if (raw.distribution == "hotspot")
      c.distribution = Distribution::kHotspot;
    else
      return "unknown --distribution=" + raw.distribution + " (uniform, zipfian, latest, hotspot)";
  }
  if (!(raw.zipf_theta > 0 && raw.zipf_theta < 1)) return "--zipf-theta must be in (0, 1)";
  c.zipf_theta = raw.zipf_theta;
  if (!(raw.hotspot_data_fraction > 0 && raw.hotspot_data_fraction < 1) ||
      !(raw.hotspot_opn_fraction >= 0 && raw.hotspot_opn_fraction <= 1))
    return "--hotspot-data-fraction must be in (0, 1) and --hotspot-opn-fraction in [0, 1]";
  c.hotspot_data_fraction = raw.hotspot_data_fraction;
  c.hotspot_opn_fraction = raw.hotspot_opn_fraction;
  if (raw.records < 1) return "--records must be at least 1";
  if (raw.operations < 0) return "--operations must be >= 0";
  c.records = uint64_t(raw.records);
  c.operations = uint64_t(raw.operations);
  if (!(raw.duration >= 0)) return "--duration must be >= 0 seconds";
  if (!(raw.target >= 0)) return "--target must be >= 0 operations/s";
  c.duration = raw.duration;
  c.target = raw.target;
  if (raw.threads < 1 || raw.threads > 1024) return "--threads must be 1..1024";
  if (raw.connections < 1 || raw.connections > 64) return "--connections must be 1..64 per thread";
  if (raw.depth < 1 || raw.depth > 64) return "--depth must be 1..64";
  c.threads = int(raw.threads);
  c.connections = int(raw.connections);
  c.depth = int(raw.depth);
  if (!ParseSizeRange(raw.key_size, &c.key_size))
    return "--key-size must be N or MIN-MAX bytes, got '" + raw.key_size + "'";
  if (c.key_size.max > 1024) return "--key-size must be at most 1024 (rkv's key limit)";
  if (c.key_size.max > 0) {
    if (c.key_size.min < 2) return "--key-size must be at least 2";
    // Short keys spell the key number in base 36; they must be able to name every key.
    uint64_t keys = c.records + (c.load ? 0 : c.operations);
    if (c.key_size.min < 17 && std::pow(36.0, c.key_size.min - 1) < double(keys))
      return "--key-size=" + raw.key_size + " is too short to name " + std::to_string(keys) +
             " distinct keys";
  }
  if (!ParseSizeRange(raw.value_size, &c.value_size))
    return "--value-size must be N or MIN-MAX bytes, got '" + raw.value_size + "'";
  if (c.value_size.max > 65536) return "--value-size must be at most 65536 (rkv's value limit)";
  c.verify = raw.verify;
  c.reconnect = raw.reconnect;
  *out = c;
  return "";
}

}  // namespace rkv::bench
