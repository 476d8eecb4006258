// SPDX-License-Identifier: Apache-2.0
#include "rkv/status.h"

#include <cstring>

namespace rkv {

const char* CodeName(Code code) {
  switch (code) {
    case Code::kOk:
      return "OK";
    case Code::kNotFound:
      return "NOT_FOUND";
    case Code::kTableFull:
      return "TABLE_FULL";
    case Code::kTooLarge:
      return "TOO_LARGE";
    case Code::kBadRequest:
      return "BAD_REQUEST";
    case Code::kInvalidArgument:
      return "INVALID_ARGUMENT";
    case Code::kConnectionLost:
      return "CONNECTION_LOST";
    case Code::kServerRestarted:
      return "SERVER_RESTARTED";
    case Code::kRetriesExhausted:
      return "RETRIES_EXHAUSTED";
    case Code::kIoError:
      return "IO_ERROR";
    case Code::kProtocolError:
      return "PROTOCOL_ERROR";
    case Code::kTimeout:
      return "TIMEOUT";
    case Code::kUnauthenticated:
      return "UNAUTHENTICATED";
    case Code::kBusy:
      return "BUSY";
    case Code::kParamMismatch:
      return "PARAM_MISMATCH";
    case Code::kMoved:
      return "MOVED";
    case Code::kTryAgain:
      return "TRY_AGAIN";
    case Code::kUnavailable:
      return "UNAVAILABLE";
  }
  return "UNKNOWN";
}

// Declared in common/verbs/rdma.h; defined here so that verbs-free code (the exchange methods) can
// report system errors the same way.
Status ErrnoStatus(const std::string& call, int err) {
  return Status(Code::kIoError, call + " failed: " + std::strerror(err));
}

std::string Status::ToString() const {
  if (ok()) return "OK";
  std::string s = CodeName(code_);
  if (!message_.empty()) s += ": " + message_;
  return s;
}

}  // namespace rkv
