// SPDX-License-Identifier: Apache-2.0
// rkv::Status: the result of every public rkv call.
//
// Contract: a Status is a value type (copyable, movable). ok() is true only for Code::kOk.
// No rkv public function throws; every failure is reported as a Status whose message names
// the failed call and, for system errors, the errno text.
// Thread safety: a Status is immutable after construction; safe to share read-only.
#ifndef RKV_STATUS_H_
#define RKV_STATUS_H_

#include <cstdint>
#include <string>
#include <utility>

namespace rkv {

enum class Code : uint16_t {
  kOk = 0,
  kNotFound = 1,
  kTableFull = 2,         // the server's table (index or value heap) has no room
  kTooLarge = 3,          // key or value exceeds the server's advertised limits
  kBadRequest = 4,        // the server rejected a malformed request
  kInvalidArgument = 5,   // a caller error detected locally (empty key, bad option)
  kConnectionLost = 6,    // the QP failed or the server disconnected; call Reconnect()
  kServerRestarted = 7,   // Reconnect() found a new server instance (table contents lost)
  kRetriesExhausted = 8,  // a GET kept seeing torn/changing entries past the retry bound
  kIoError = 9,           // a verbs/rdma_cm/system call failed; message has the details
  kProtocolError = 10,    // the peer sent something that violates the wire format
  kTimeout = 11,
  kParamMismatch = 12,  // connection parameters break an RDMA rule; the message names it
  // The server requires authentication and this client did not prove the token (none
  // configured, a wrong one), or the server did not prove it back; also the server's answer
  // to any request sent before a successful OPEN (docs/security.md, "Authentication").
  kUnauthenticated = 13,
  // The server refused a connection for a limit (too many connections or connection attempts
  // from this address); try again later.
  kBusy = 14,
  // Cluster (docs/cluster.md): the server asked does not own the key's slot (a write refused,
  // or a GET whose slot's ownership word says so); the message names the owner and the map's
  // epoch. A cluster client follows it by itself: callers see it only past their deadline.
  kMoved = 15,
  // Cluster: the key's slot is being handed over (its writes paused for a moment); try again.
  kTryAgain = 16,
  // Cluster: the key's slot has no server that can serve it now (unassigned, or its server is
  // down or unreachable); the message says which.
  kUnavailable = 17,
};

// Returns a stable name such as "NOT_FOUND".
const char* CodeName(Code code);

class [[nodiscard]] Status {
 public:
  Status() = default;
  Status(Code code, std::string message) : code_(code), message_(std::move(message)) {}
  static Status Ok() { return Status(); }

  bool ok() const { return code_ == Code::kOk; }
  Code code() const { return code_; }
  const std::string& message() const { return message_; }
  bool IsNotFound() const { return code_ == Code::kNotFound; }
  // "OK" or "NOT_FOUND: message".
  std::string ToString() const;

 private:
  Code code_ = Code::kOk;
  std::string message_;
};

}  // namespace rkv

#endif  // RKV_STATUS_H_
