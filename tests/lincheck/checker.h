// SPDX-License-Identifier: Apache-2.0
// Checker: per-key linearizability of an rkv History (tests/lincheck/history.h).
//
// A history is linearizable iff each key's sub-history is (P-compositionality: keys are
// independent registers), so the checker splits the ops by key and runs one RegisterSearch
// (tests/lincheck/register_search.h) per key, on up to `threads` threads.
//
// Thread safety: Check may be called from any thread; a Checker holds only its options.
// Errors: none thrown; a key whose search gives up or whose history is malformed is counted as
// inconclusive (not as a violation) and listed with the violations.
#ifndef RKV_TESTS_LINCHECK_CHECKER_H_
#define RKV_TESTS_LINCHECK_CHECKER_H_

#include <cstdint>
#include <string>
#include <vector>

#include "tests/lincheck/history.h"
#include "tests/lincheck/register_search.h"

namespace rkv::lincheck {

struct CheckOptions {
  int threads = 0;                        // 0: std::thread::hardware_concurrency()
  uint64_t max_states_per_key = 5000000;  // search steps per key before "inconclusive"
};

struct CheckReport {
  size_t operations = 0;  // ops checked (failed ops excluded)
  size_t keys = 0;
  size_t violations = 0;    // keys whose history is not linearizable
  size_t inconclusive = 0;  // keys the search gave up on (or malformed)
  double seconds = 0;
  std::vector<KeyVerdict> failures;  // every key that is not kLinearizable, by key

  bool ok() const { return violations == 0 && inconclusive == 0; }
  // "linearizability: N operations on K keys checked, V violations (checker S s)", then, for
  // each failure, "key K: VIOLATION" / "key K: INCONCLUSIVE" and its explanation (up to
  // max_failures keys).
  std::string Summary(size_t max_failures = 5) const;
};

class Checker {
 public:
  explicit Checker(CheckOptions options = CheckOptions()) : options_(options) {}
  [[nodiscard]] CheckReport Check(const History& history) const;

 private:
  CheckOptions options_;
};

}  // namespace rkv::lincheck

#endif  // RKV_TESTS_LINCHECK_CHECKER_H_
