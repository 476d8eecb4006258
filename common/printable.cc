// SPDX-License-Identifier: Apache-2.0
#include "common/printable.h"

namespace rkv {

std::string Printable(std::string_view text, size_t max) {
  std::string out;
  const size_t n = text.size() < max ? text.size() : max;
  out.reserve(n + 3);
  for (size_t i = 0; i < n; ++i) {
    const unsigned char c = static_cast<unsigned char>(text[i]);
    if (c >= 0x20 && c < 0x7f && c != '\\') {
      out.push_back(char(c));
    } else {
      static const char kHex[] = "0123456789abcdef";
      out += {'\\', 'x', kHex[c >> 4], kHex[c & 15]};
    }
  }
  if (text.size() > max) out += "...";
  return out;
}

}  // namespace rkv
