// SPDX-License-Identifier: Apache-2.0
// Helpers of the etcd room's .cc files (not an API): JSON request bodies that never throw, and
// NoThrow, which turns any exception (bad_alloc; a bug) into a Status so that none leaves a
// method of the etcd transport, client or mailbox.
#ifndef RKV_COMMON_ETCD_NO_THROW_H_
#define RKV_COMMON_ETCD_NO_THROW_H_

#include <exception>
#include <nlohmann/json.hpp>
#include <string>

#include "rkv/status.h"

namespace rkv::etcd_internal {

// Request bodies: invalid UTF-8 in a string field is replaced, never thrown about.
inline std::string Dump(const nlohmann::json& j) {
  return j.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
}

template <class F>
Status NoThrow(const char* what, F f) {
  try {
    return f();
  } catch (const std::exception& e) {
    return Status(Code::kIoError, std::string("etcd ") + what + ": unexpected: " + e.what());
  } catch (...) {
    return Status(Code::kIoError, std::string("etcd ") + what + ": unexpected exception");
  }
}

}  // namespace rkv::etcd_internal

#endif  // RKV_COMMON_ETCD_NO_THROW_H_
