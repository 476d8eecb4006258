// SPDX-License-Identifier: Apache-2.0
// CheckPeerGid (server/conn/peer_gid.h): on RoCE a manual-mode peer's GID must be the address its
// control channel comes from.
#include "server/conn/peer_gid.h"

#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>

#include <cstring>

namespace rkv {
namespace {

sockaddr_storage V4(const char* ip) {
  sockaddr_storage s{};
  auto* a = reinterpret_cast<sockaddr_in*>(&s);
  a->sin_family = AF_INET;
  EXPECT_EQ(inet_pton(AF_INET, ip, &a->sin_addr), 1);
  return s;
}

sockaddr_storage V6(const char* ip) {
  sockaddr_storage s{};
  auto* a = reinterpret_cast<sockaddr_in6*>(&s);
  a->sin6_family = AF_INET6;
  EXPECT_EQ(inet_pton(AF_INET6, ip, &a->sin6_addr), 1);
  return s;
}

ConnParams WithGid(const char* ip6) {
  ConnParams p;
  p.link_layer = kLinkEthernet;
  EXPECT_EQ(inet_pton(AF_INET6, ip6, p.gid), 1);
  return p;
}

TEST(PeerGid, RoceGidMustBeTheControlChannelsAddress) {
  const sockaddr_storage from = V4("10.77.0.1");
  EXPECT_TRUE(CheckPeerGid(WithGid("::ffff:10.77.0.1"), &from).ok());
  Status s = CheckPeerGid(WithGid("::ffff:10.77.0.9"), &from);  // a third host
  EXPECT_EQ(s.code(), Code::kParamMismatch);
  EXPECT_NE(s.message().find("10.77.0.1"), std::string::npos) << s.message();
  EXPECT_NE(s.message().find("ffff:0a4d:0009"), std::string::npos) << s.message();
  // A link-local (RoCE v1) GID says nothing checkable about the peer: refused.
  EXPECT_FALSE(CheckPeerGid(WithGid("fe80::1"), &from).ok());
  // IPv6 peers give their own address; a dual-stack socket's mapped IPv4 peer works too.
  const sockaddr_storage v6 = V6("2001:db8::5");
  EXPECT_TRUE(CheckPeerGid(WithGid("2001:db8::5"), &v6).ok());
  EXPECT_FALSE(CheckPeerGid(WithGid("2001:db8::6"), &v6).ok());
  const sockaddr_storage mapped = V6("::ffff:10.77.0.1");
  EXPECT_TRUE(CheckPeerGid(WithGid("::ffff:10.77.0.1"), &mapped).ok());
}

TEST(PeerGid, InfiniBandAndChannelsWithoutAnAddressPass) {
  ConnParams ib = WithGid("fe80::1");
  ib.link_layer = kLinkInfiniBand;
  const sockaddr_storage from = V4("10.77.0.1");
  EXPECT_TRUE(CheckPeerGid(ib, &from).ok());
  EXPECT_TRUE(CheckPeerGid(WithGid("fe80::1"), nullptr).ok()) << "file and etcd exchanges";
}

}  // namespace
}  // namespace rkv
