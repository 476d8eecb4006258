// SPDX-License-Identifier: Apache-2.0
// History: the operations a test's clients performed on rkv, as input to the linearizability
// checker (tests/lincheck/checker.h).
//
// Model: every key is an independent register whose state is "absent" or a value. An Op is
// one PUT, GET or DELETE of one key by one client, with its call and return times (nanoseconds
// of one monotonic clock shared by every client: std::chrono::steady_clock on one host) and its
// result. A MultiGet is recorded as one GET per key, each with the MultiGet's call/return times.
// Values are opaque tokens: the producer must make every PUT's token unique per key (the load
// drivers encode writer id + sequence number), so that a token read identifies its write. A
// read value that no PUT wrote (garbage, torn, another key's) gets a token no PUT has.
//
// File format (Save/Load), text, one op per line, fields separated by one space:
//   rkv-history 1                                         first line
//   CLIENT OP KEY CALL_NS RETURN_NS RESULT VALUE
//     CLIENT    decimal client (thread) id
//     OP        put | get | del
//     KEY       the key, percent-encoded (bytes outside [0x21, 0x7e] and '%' as %XX)
//     CALL_NS, RETURN_NS   decimal steady-clock nanoseconds (RETURN_NS >= CALL_NS)
//     RESULT    ok | notfound | unknown | failed
//                 put: ok, unknown (timeout/connection lost: may or may not have taken effect),
//                      failed (definitely not applied, e.g. TABLE_FULL)
//                 get: ok (VALUE read), notfound, failed (an error: the op is ignored)
//                 del: ok (the key was present), notfound, unknown, failed
//     VALUE     "-" when the op has no value, else "=" followed by the token, percent-encoded
//               like KEY ("=" alone is the empty token). put: the token written; get ok: the
//               token read.
//   Lines starting with '#' are comments.
//
// Thread safety: a History is a plain value; Add from one thread at a time (clients record into
// their own vectors and the driver merges them).
// Errors: Load returns false with *error naming the line; no exceptions.
#ifndef RKV_TESTS_LINCHECK_HISTORY_H_
#define RKV_TESTS_LINCHECK_HISTORY_H_

#include <cstdint>
#include <string>
#include <vector>

namespace rkv::lincheck {

enum class OpType : uint8_t { kPut, kGet, kDelete };
enum class Outcome : uint8_t { kOk, kNotFound, kUnknown, kFailed };

struct Op {
  uint32_t client = 0;
  OpType type = OpType::kGet;
  Outcome outcome = Outcome::kOk;
  std::string key;
  int64_t call_ns = 0;
  int64_t return_ns = 0;
  std::string value;  // put: written token; get kOk: read token; otherwise empty
};

const char* OpTypeName(OpType t);
const char* OutcomeName(Outcome o);
// "client 3 GET k1 -> w2.17 [12.345 ms, 12.401 ms]" with times relative to origin_ns.
std::string Describe(const Op& op, int64_t origin_ns);

class History {
 public:
  void Add(Op op) { ops_.push_back(std::move(op)); }
  void Append(const std::vector<Op>& ops) { ops_.insert(ops_.end(), ops.begin(), ops.end()); }
  const std::vector<Op>& ops() const { return ops_; }
  size_t size() const { return ops_.size(); }

  // Writes the file format above. False (with *error) if the file cannot be written.
  [[nodiscard]] bool Save(const std::string& path, std::string* error) const;
  // Replaces the contents with the ops of `path`. False (with *error) on a malformed line.
  [[nodiscard]] bool Load(const std::string& path, std::string* error);

 private:
  std::vector<Op> ops_;
};

}  // namespace rkv::lincheck

#endif  // RKV_TESTS_LINCHECK_HISTORY_H_
