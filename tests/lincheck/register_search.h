// SPDX-License-Identifier: Apache-2.0
// RegisterSearch: decides whether the history of ONE key is linearizable with respect to a
// register whose state is "absent" or a value (tests/lincheck/history.h has the model).
//
// Algorithm: Wing & Gong's search as refined by Lowe and by Porcupine (P-compositionality is
// the caller's: one RegisterSearch per key). Ops are ordered by call time in a dancing-links
// list; at each step the candidates are the unlinearized ops called before the earliest return
// among the unlinearized ones (m). A candidate GET (or DELETE -> NOT_FOUND) whose result
// matches the current state is linearized at once without branching (moving such a read to the
// front of any valid completion keeps it valid); only state-changing ops (PUT, DELETE -> OK,
// unknown-outcome ops) branch. A write that would overwrite a value some unlinearized GET still
// has to read is pruned (values are unique, so that GET could never be linearized). Explored
// dead states are memoized as (first unlinearized op, bitset of the linearized ops after it,
// state, unknown-outcome ops used), so a state is a few words: every linearized op after the
// first unlinearized one was called before that op returned.
// Unknown-outcome ops: a PUT whose value some GET read must have taken effect: its return time
// becomes the earliest return of those GETs. Other unknown PUTs and DELETEs may take effect at
// any point after their call or never; since ops of one kind among them are interchangeable once
// called, the search only ever takes the earliest-called remaining one of each kind.
//
// On a violation the explanation names the op the deepest partial linearization could not
// extend, the register states possible there and the ops concurrent with it, plus, when there
// is one, a definite stale read (a GET of v that began after a write that began after PUT(v)
// returned).
//
// Thread safety: one RegisterSearch per thread; the ops it points to must outlive Run().
// Errors: no exceptions; a malformed history (two PUTs with the same value) is kInconclusive.
#ifndef RKV_TESTS_LINCHECK_REGISTER_SEARCH_H_
#define RKV_TESTS_LINCHECK_REGISTER_SEARCH_H_

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "tests/lincheck/history.h"

namespace rkv::lincheck {

enum class Verdict : uint8_t { kLinearizable, kViolation, kInconclusive };

struct KeyVerdict {
  std::string key;
  Verdict verdict = Verdict::kLinearizable;
  size_t ops_checked = 0;        // ops of the key minus failed (ignored) ones
  uint64_t states_explored = 0;  // search steps taken
  // On kViolation / kInconclusive: what could not be linearized, the ops concurrent with it
  // and the states the register could have been in (several lines, indented).
  std::string explanation;
};

class RegisterSearch {
 public:
  // ops: every op of one key (any order). origin_ns: the time printed as 0 in explanations.
  // max_states: search steps after which the verdict is kInconclusive.
  RegisterSearch(std::string key, std::vector<const Op*> ops, int64_t origin_ns,
                 uint64_t max_states);
  ~RegisterSearch();
  RegisterSearch(const RegisterSearch&) = delete;
  RegisterSearch& operator=(const RegisterSearch&) = delete;

  [[nodiscard]] KeyVerdict Run();

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace rkv::lincheck

#endif  // RKV_TESTS_LINCHECK_REGISTER_SEARCH_H_
