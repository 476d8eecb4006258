// SPDX-License-Identifier: Apache-2.0
#include "common/secure_random.h"

#include <sys/random.h>

#include <cerrno>
#include <cstring>

namespace rkv {

Status SecureRandom::FillFrom(Source source, void* buf, size_t len) {
  auto* p = static_cast<uint8_t*>(buf);
  size_t got = 0;
  int zero_reads = 0;
  while (got < len) {
    ssize_t n = source(p + got, len - got, 0);
    if (n < 0) {
      if (errno == EINTR) continue;
      return Status(Code::kIoError, std::string("getrandom failed: ") + std::strerror(errno));
    }
    if (n == 0) {  // never seen from the kernel; do not spin on a broken source
      if (++zero_reads > 8) return Status(Code::kIoError, "getrandom returned no bytes");
      continue;
    }
    got += size_t(n);
  }
  return Status::Ok();
}

Status SecureRandom::Fill(void* buf, size_t len) { return FillFrom(::getrandom, buf, len); }

Status SecureRandom::U64(uint64_t* out) { return Fill(out, sizeof *out); }

Status SecureRandom::Psn(uint32_t* out) {
  for (;;) {
    uint32_t v = 0;
    Status s = Fill(&v, sizeof v);
    if (!s.ok()) return s;
    v &= kPsnMask;
    if (v != 0) {
      *out = v;
      return Status::Ok();
    }
  }
}

Status SecureRandom::Hex(size_t bytes, std::string* out) {
  std::string raw(bytes, '\0');
  Status s = Fill(raw.data(), raw.size());
  if (!s.ok()) return s;
  static const char kDigits[] = "0123456789abcdef";
  out->clear();
  out->reserve(2 * bytes);
  for (char c : raw) {
    out->push_back(kDigits[uint8_t(c) >> 4]);
    out->push_back(kDigits[uint8_t(c) & 15]);
  }
  return Status::Ok();
}

}  // namespace rkv
