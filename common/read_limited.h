// SPDX-License-Identifier: Apache-2.0
// ReadLimited: reads a file descriptor to its end, but never more than `limit` + 1 bytes, so a
// caller can refuse a file that is (or grew) larger than it accepts without reading it whole.
// Retries EINTR; does not close `fd`. Thread safety: none needed (pure I/O on the caller's fd).
#ifndef RKV_COMMON_READ_LIMITED_H_
#define RKV_COMMON_READ_LIMITED_H_

#include <cstddef>
#include <string>

#include "rkv/status.h"

namespace rkv {

// *out gets the bytes read: at most limit + 1 (more than `limit` means the file is too large).
// `what` names the file in the error ("read(<what>): <errno text>").
[[nodiscard]] Status ReadLimited(int fd, size_t limit, const std::string& what, std::string* out);

}  // namespace rkv

#endif  // RKV_COMMON_READ_LIMITED_H_
