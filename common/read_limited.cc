// SPDX-License-Identifier: Apache-2.0
#include "common/read_limited.h"

#include <errno.h>
#include <unistd.h>

#include <cstring>

namespace rkv {

Status ReadLimited(int fd, size_t limit, const std::string& what, std::string* out) {
  out->assign(limit + 1, '\0');
  size_t got = 0;
  while (got < out->size()) {
    ssize_t n = read(fd, out->data() + got, out->size() - got);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) {
      const int err = errno;
      out->clear();
      return Status(Code::kIoError, "read(" + what + "): " + std::strerror(err));
    }
    if (n == 0) break;
    got += size_t(n);
  }
  out->resize(got);
  return Status::Ok();
}

}  // namespace rkv
