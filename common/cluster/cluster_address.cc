// SPDX-License-Identifier: Apache-2.0
#include "common/cluster/cluster_address.h"

#include <charconv>

namespace rkv::cluster {
namespace {

Status Bad(std::string_view s, const std::string& why) {
  return Status(Code::kInvalidArgument, "cluster address '" + std::string(s.substr(0, 200)) +
                                            "': " + why +
                                            " (expected etcd://HOST:PORT[,HOST:PORT...]/NAME)");
}

bool HostChar(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '.' ||
         c == '-' || c == '_';
}

}  // namespace

bool IsClusterAddress(std::string_view s) {
  return s.rfind("etcd://", 0) == 0 || s.rfind("etcds://", 0) == 0;
}

Status ParseClusterAddress(std::string_view s, ClusterAddress* out) {
  std::string_view rest;
  std::string scheme;
  if (s.rfind("etcd://", 0) == 0) {
    rest = s.substr(7);
    scheme = "http://";
  } else if (s.rfind("etcds://", 0) == 0) {
    rest = s.substr(8);
    scheme = "https://";
  } else {
    return Bad(s, "not etcd:// or etcds://");
  }
  const size_t slash = rest.find('/');
  if (slash == std::string_view::npos) return Bad(s, "no /NAME");
  const std::string_view hosts = rest.substr(0, slash), name = rest.substr(slash + 1);
  if (name.empty() || name.size() > 64) return Bad(s, "NAME must be 1..64 characters");
  for (char c : name)
    if (!HostChar(c)) return Bad(s, "NAME may hold only A-Z a-z 0-9 . _ -");
  ClusterAddress a;
  a.name = std::string(name);
  size_t at = 0;
  while (at <= hosts.size()) {
    size_t comma = hosts.find(',', at);
    if (comma == std::string_view::npos) comma = hosts.size();
    const std::string_view hp = hosts.substr(at, comma - at);
    at = comma + 1;
    if (hp.empty()) return Bad(s, "an empty HOST:PORT");
    size_t colon;
    std::string_view host;
    if (hp.front() == '[') {  // [IPv6]:PORT
      const size_t close = hp.find(']');
      if (close == std::string_view::npos || close + 1 >= hp.size() || hp[close + 1] != ':')
        return Bad(s, "'" + std::string(hp) + "' is not [IPV6]:PORT");
      for (char c : hp.substr(1, close - 1))
        if (!((c >= '0' && c <= '9') || (c >= 'a' && c <= 'f') || (c >= 'A' && c <= 'F') ||
              c == ':' || c == '.'))
          return Bad(s, "'" + std::string(hp) + "' has a bad IPv6 address");
      host = hp.substr(0, close + 1);
      colon = close + 1;
    } else {
      colon = hp.rfind(':');
      if (colon == std::string_view::npos || colon == 0)
        return Bad(s, "'" + std::string(hp) + "' has no :PORT");
      host = hp.substr(0, colon);
      for (char c : host)
        if (!HostChar(c)) return Bad(s, "'" + std::string(hp) + "' has a bad host");
    }
    const std::string_view port = hp.substr(colon + 1);
    unsigned p = 0;
    auto [end, ec] = std::from_chars(port.data(), port.data() + port.size(), p);
    if (port.empty() || ec != std::errc() || end != port.data() + port.size() || p == 0 ||
        p > 65535)
      return Bad(s, "'" + std::string(hp) + "' has a bad port");
    if (host.size() > 255) return Bad(s, "a host longer than 255 characters");
    a.endpoints.push_back(scheme + std::string(host) + ":" + std::to_string(p));
    if (a.endpoints.size() > 16) return Bad(s, "more than 16 etcd endpoints");
    if (comma == hosts.size()) break;
  }
  *out = std::move(a);
  return Status::Ok();
}

}  // namespace rkv::cluster
