// SPDX-License-Identifier: Apache-2.0
#include "server/conn/peer_gid.h"

#include <arpa/inet.h>
#include <netinet/in.h>

#include <cstring>
#include <string>

#include "common/verbs/conn_params.h"

namespace rkv {
namespace {

std::string AddressText(const sockaddr_storage& a) {
  char text[INET6_ADDRSTRLEN] = "?";
  if (a.ss_family == AF_INET)
    inet_ntop(AF_INET, &reinterpret_cast<const sockaddr_in&>(a).sin_addr, text, sizeof text);
  else if (a.ss_family == AF_INET6)
    inet_ntop(AF_INET6, &reinterpret_cast<const sockaddr_in6&>(a).sin6_addr, text, sizeof text);
  return text;
}

}  // namespace

Status CheckPeerGid(const ConnParams& peer, const sockaddr_storage* from) {
  if (from == nullptr || peer.link_layer != kLinkEthernet) return Status::Ok();
  uint8_t expected[16] = {};
  if (from->ss_family == AF_INET) {
    expected[10] = expected[11] = 0xff;  // ::ffff:a.b.c.d
    std::memcpy(expected + 12, &reinterpret_cast<const sockaddr_in*>(from)->sin_addr, 4);
  } else if (from->ss_family == AF_INET6) {
    std::memcpy(expected, &reinterpret_cast<const sockaddr_in6*>(from)->sin6_addr, 16);
  } else {
    return Status::Ok();
  }
  if (std::memcmp(expected, peer.gid, 16) == 0) return Status::Ok();
  return Status(Code::kParamMismatch,
                "peer GID " + GidToString(peer.gid) + " is not the address its control channel " +
                    "comes from (" + AddressText(*from) +
                    "): on RoCE the server answers the GID, so it must be the client's own "
                    "address (use its RoCE v2 IPv4-mapped GID, the default --gid_index)");
}

}  // namespace rkv
