// SPDX-License-Identifier: Apache-2.0
#include "common/parse.h"

#include <cctype>
#include <cerrno>
#include <cstdlib>

namespace rkv {

Status ParseSize(const std::string& text, uint64_t* bytes) {
  auto bad = [&] {
    return Status(Code::kInvalidArgument,
                  "invalid size '" + text + "' (expected e.g. 4096, 64K, 256M, 1G)");
  };
  if (text.empty() || !std::isdigit(static_cast<unsigned char>(text[0]))) return bad();
  errno = 0;
  char* end = nullptr;
  unsigned long long v = std::strtoull(text.c_str(), &end, 10);
  if (errno != 0) return bad();
  std::string suffix(end);
  for (auto& c : suffix) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  if (suffix.size() >= 2 && suffix.substr(suffix.size() - 2) == "IB")
    suffix = suffix.substr(0, suffix.size() - 2);
  else if (suffix.size() == 2 && suffix[1] == 'B')
    suffix = suffix.substr(0, 1);
  int shift = 0;
  if (suffix.empty() || suffix == "B")
    shift = 0;
  else if (suffix == "K")
    shift = 10;
  else if (suffix == "M")
    shift = 20;
  else if (suffix == "G")
    shift = 30;
  else if (suffix == "T")
    shift = 40;
  else
    return bad();
  if (shift && v > (~0ull >> shift)) return bad();
  *bytes = static_cast<uint64_t>(v) << shift;
  return Status::Ok();
}

Status ParseHostPort(const std::string& text, std::string* host, uint16_t* port) {
  auto colon = text.rfind(':');
  if (colon == std::string::npos || colon == 0 || colon + 1 == text.size())
    return Status(Code::kInvalidArgument, "invalid address '" + text + "' (expected HOST:PORT)");
  std::string p = text.substr(colon + 1);
  for (char c : p)
    if (!std::isdigit(static_cast<unsigned char>(c)))
      return Status(Code::kInvalidArgument, "invalid port in '" + text + "'");
  unsigned long v = std::strtoul(p.c_str(), nullptr, 10);
  if (p.size() > 5 || v == 0 || v > 65535)
    return Status(Code::kInvalidArgument, "port out of range in '" + text + "' (1..65535)");
  *host = text.substr(0, colon);
  *port = static_cast<uint16_t>(v);
  return Status::Ok();
}

}  // namespace rkv
