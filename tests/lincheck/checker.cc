// SPDX-License-Identifier: Apache-2.0
#include "tests/lincheck/checker.h"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <limits>
#include <map>
#include <thread>

namespace rkv::lincheck {

std::string CheckReport::Summary(size_t max_failures) const {
  char line[256];
  std::snprintf(line, sizeof line,
                "linearizability: %zu operations on %zu keys checked, %zu violations%s (checker "
                "%.2f s)",
                operations, keys, violations,
                inconclusive ? (", " + std::to_string(inconclusive) + " inconclusive").c_str() : "",
                seconds);
  std::string out = line;
  size_t shown = 0;
  for (const KeyVerdict& f : failures) {
    if (shown++ == max_failures) {
      out += "\n  ... and " + std::to_string(failures.size() - max_failures) + " more keys";
      break;
    }
    out += "\n  key " + f.key + ": " +
           (f.verdict == Verdict::kViolation ? "VIOLATION" : "INCONCLUSIVE") + " (" +
           std::to_string(f.ops_checked) + " ops)\n" + f.explanation;
  }
  return out;
}

CheckReport Checker::Check(const History& history) const {
  auto t0 = std::chrono::steady_clock::now();
  CheckReport report;
  std::map<std::string, std::vector<const Op*>> by_key;
  int64_t origin = std::numeric_limits<int64_t>::max();
  for (const Op& op : history.ops()) {
    by_key[op.key].push_back(&op);
    origin = std::min(origin, op.call_ns);
  }
  std::vector<std::pair<const std::string*, std::vector<const Op*>*>> work;
  for (auto& [key, ops] : by_key) work.emplace_back(&key, &ops);
  // Biggest keys first, so one hot key does not start last.
  std::sort(work.begin(), work.end(),
            [](const auto& a, const auto& b) { return a.second->size() > b.second->size(); });
  std::vector<KeyVerdict> verdicts(work.size());
  std::atomic<size_t> next{0};
  auto worker = [&] {
    for (size_t i; (i = next.fetch_add(1)) < work.size();) {
      RegisterSearch search(*work[i].first, *work[i].second, origin, options_.max_states_per_key);
      verdicts[i] = search.Run();
    }
  };
  size_t threads = options_.threads > 0 ? size_t(options_.threads)
                                        : std::max(1u, std::thread::hardware_concurrency());
  threads = std::min(threads, std::max<size_t>(1, work.size()));
  std::vector<std::thread> pool;
  for (size_t t = 1; t < threads; ++t) pool.emplace_back(worker);
  worker();
  for (auto& t : pool) t.join();

  report.keys = work.size();
  for (KeyVerdict& v : verdicts) {
    report.operations += v.ops_checked;
    if (v.verdict == Verdict::kLinearizable) continue;
    (v.verdict == Verdict::kViolation ? report.violations : report.inconclusive) += 1;
    report.failures.push_back(std::move(v));
  }
  std::sort(report.failures.begin(), report.failures.end(),
            [](const KeyVerdict& a, const KeyVerdict& b) { return a.key < b.key; });
  report.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  return report;
}

}  // namespace rkv::lincheck
