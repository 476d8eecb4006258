// SPDX-License-Identifier: Apache-2.0
// SenderAddresses (server/cluster/sender_addresses.h): a REPLICATE's sender must be at the
// address its map entry registered. A message of a newer epoch than the map applied here is
// "unknown" (ask again), as is a sender whose host did not resolve; a known id at another
// address, or an id no map at least as new names, is a mismatch; a new map replaces the old.
#include "server/cluster/sender_addresses.h"

#include <arpa/inet.h>
#include <gtest/gtest.h>

#include <initializer_list>
#include <string>

namespace rkv::cluster {
namespace {

uint32_t Ip(const char* text) {
  in_addr a{};
  EXPECT_EQ(inet_pton(AF_INET, text, &a), 1) << text;
  return a.s_addr;
}

SlotMap MapOf(uint64_t epoch, std::initializer_list<ServerEntry> servers) {
  SlotMap m;
  EXPECT_TRUE(SlotMap::Create(16, 2, 7, &m).ok());
  for (const ServerEntry& e : servers) EXPECT_NE(m.AddServer(e), kUnassigned);
  m.set_epoch(epoch);
  return m;
}

TEST(SenderAddresses, TheSenderMustBeAtItsRegisteredAddress) {
  using V = SenderAddresses::Verdict;
  SenderAddresses s;
  EXPECT_EQ(s.Check(1, 1, Ip("10.0.0.1")), V::kUnknown);  // no map yet
  s.Update(MapOf(5, {{1, "10.0.0.1", 7470}, {2, "10.0.0.2", 7470}, {3, "localhost", 7470}}));
  EXPECT_EQ(s.Check(1, 5, Ip("10.0.0.1")), V::kMatch);
  EXPECT_EQ(s.Check(1, 4, Ip("10.0.0.1")), V::kMatch);  // an older epoch: the executor decides
  EXPECT_EQ(s.Check(2, 5, Ip("10.0.0.2")), V::kMatch);
  EXPECT_EQ(s.Check(1, 5, Ip("10.0.0.2")), V::kMismatch);  // server 2 posing as 1
  EXPECT_EQ(s.Check(2, 5, 0), V::kMismatch);               // no IPv4 peer (manual mode)
  EXPECT_EQ(s.Check(3, 5, Ip("127.0.0.1")), V::kMatch);    // a name, resolved at Update
  EXPECT_EQ(s.Check(9, 5, Ip("10.0.0.9")), V::kMismatch);  // no server 9 at epoch 5
  // A message of a newer map than this server applied: ask again, whoever it names.
  EXPECT_EQ(s.Check(9, 6, Ip("10.0.0.9")), V::kUnknown);
  EXPECT_EQ(s.Check(1, 6, Ip("10.0.0.2")), V::kUnknown);
  // The new map: server 2 gone, server 9 joined.
  s.Update(MapOf(6, {{1, "10.0.0.1", 7470}, {9, "10.0.0.9", 7470}}));
  EXPECT_EQ(s.Check(2, 6, Ip("10.0.0.2")), V::kMismatch);
  EXPECT_EQ(s.Check(9, 6, Ip("10.0.0.9")), V::kMatch);
  EXPECT_EQ(s.Check(1, 6, Ip("10.0.0.2")), V::kMismatch);
  // The answers a REPLICATE gets.
  EXPECT_TRUE(s.Admit(9, 6, Ip("10.0.0.9")).ok());
  EXPECT_EQ(s.Admit(9, 7, Ip("10.0.0.9")).code(), Code::kUnavailable);  // asked again
  const Status refused = s.Admit(1, 6, Ip("10.0.0.9"));
  EXPECT_EQ(refused.code(), Code::kInvalidArgument);
  EXPECT_NE(refused.message().find("server 1 registered"), std::string::npos) << refused.ToString();
}

}  // namespace
}  // namespace rkv::cluster
