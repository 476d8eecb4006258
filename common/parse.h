// SPDX-License-Identifier: Apache-2.0
// Parsing of user-supplied parameters (sizes such as "256M", addresses "HOST:PORT").
// Thread safety: pure functions. Errors come back as INVALID_ARGUMENT with the offending text.
#ifndef RKV_COMMON_PARSE_H_
#define RKV_COMMON_PARSE_H_

#include <cstdint>
#include <string>

#include "rkv/status.h"

namespace rkv {

// "4096", "64K", "256M", "1G", "1GiB" (binary multiples).
Status ParseSize(const std::string& text, uint64_t* bytes);
// "10.0.0.1:7470" or "host:7470"; port 1..65535.
Status ParseHostPort(const std::string& text, std::string* host, uint16_t* port);

}  // namespace rkv

#endif  // RKV_COMMON_PARSE_H_
