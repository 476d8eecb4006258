// SPDX-License-Identifier: Apache-2.0
// SenderAddresses (server/cluster/sender_addresses.h): a REPLICATE's sender must be at the
// address its map entry registered; an id the map does not name is "unknown" (ask again), a
// known id at another address (or none) a mismatch; a new map replaces the old entries.
#include "server/cluster/sender_addresses.h"

#include <arpa/inet.h>
#include <gtest/gtest.h>

#include <string>

namespace rkv::cluster {
namespace {

uint32_t Ip(const char* text) {
  in_addr a{};
  EXPECT_EQ(inet_pton(AF_INET, text, &a), 1) << text;
  return a.s_addr;
}

SlotMap MapOf(std::initializer_list<ServerEntry> servers) {
  SlotMap m;
  EXPECT_TRUE(SlotMap::Create(16, 2, 7, &m).ok());
  for (const ServerEntry& e : servers) EXPECT_NE(m.AddServer(e), kUnassigned);
  return m;
}

TEST(SenderAddresses, TheSenderMustBeAtItsRegisteredAddress) {
  using V = SenderAddresses::Verdict;
  SenderAddresses s;
  EXPECT_EQ(s.Check(1, Ip("10.0.0.1")), V::kUnknown);  // no map yet
  s.Update(MapOf({{1, "10.0.0.1", 7470}, {2, "10.0.0.2", 7470}, {3, "localhost", 7470}}));
  EXPECT_EQ(s.Check(1, Ip("10.0.0.1")), V::kMatch);
  EXPECT_EQ(s.Check(2, Ip("10.0.0.2")), V::kMatch);
  EXPECT_EQ(s.Check(1, Ip("10.0.0.2")), V::kMismatch);  // server 2 posing as 1
  EXPECT_EQ(s.Check(2, 0), V::kMismatch);               // no IPv4 peer (manual mode)
  EXPECT_EQ(s.Check(3, Ip("127.0.0.1")), V::kMatch);    // a name, resolved at Update
  EXPECT_EQ(s.Check(9, Ip("10.0.0.9")), V::kUnknown);
  // A new map: server 2 gone, server 9 joined.
  s.Update(MapOf({{1, "10.0.0.1", 7470}, {9, "10.0.0.9", 7470}}));
  EXPECT_EQ(s.Check(2, Ip("10.0.0.2")), V::kUnknown);
  EXPECT_EQ(s.Check(9, Ip("10.0.0.9")), V::kMatch);
}

}  // namespace
}  // namespace rkv::cluster
