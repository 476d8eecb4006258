// SPDX-License-Identifier: Apache-2.0
// ParseStats: the `name value` lines of a STATS reply (kvctl stats, Client::Stats) as a map, for
// the integration tests and tools that read server counters.
// Thread safety: a pure function.
#ifndef RKV_TESTS_INTEGRATION_STATS_TEXT_H_
#define RKV_TESTS_INTEGRATION_STATS_TEXT_H_

#include <map>
#include <sstream>
#include <string>

namespace rkv::testing {

inline std::map<std::string, double> ParseStats(const std::string& text) {
  std::map<std::string, double> m;
  std::istringstream in(text);
  std::string k;
  double v;
  while (in >> k >> v) m[k] = v;
  return m;
}

}  // namespace rkv::testing

#endif  // RKV_TESTS_INTEGRATION_STATS_TEXT_H_
