// SPDX-License-Identifier: Apache-2.0
// Membership (server/cluster/membership.h) against the real three-member etcd cluster of
// tests/etcd/etcd_client.sh: ids allocated once per address and never twice (eight servers
// joining at once), a second process on a live address refused, the record under a lease that
// leaving revokes, a lost lease noticed and registered again, and a cluster that does not
// exist refused. Waits have deadlines; nothing asserts a timing.
#include "server/cluster/membership.h"

#include <gtest/gtest.h>
#include <signal.h>

#include <chrono>
#include <cstdlib>
#include <set>
#include <sstream>
#include <thread>
#include <vector>

#include "common/cluster/slot_map.h"
#include "tests/etcd/etcd_test_env.h"

namespace rkv::cluster {
namespace {

class MembershipTest : public ::testing::Test {
 protected:
  void SetUp() override {
    o_.cluster.endpoints = etcd_test::Settings().endpoints;
    if (o_.cluster.endpoints.empty())
      GTEST_FAIL() << "RKV_ETCD_ENDPOINTS is not set (run etcd_client.sh)";
    o_.cluster.name = ::testing::UnitTest::GetInstance()->current_test_info()->name();
    o_.host = "10.0.0.1";
    o_.port = 7480;
    o_.lease_ttl_s = 2;
    EtcdSettings s;
    s.endpoints = o_.cluster.endpoints;
    ASSERT_TRUE(EtcdClient::Open(s, &etcd_).ok());
    SlotMap m;
    ASSERT_TRUE(SlotMap::Create(16, 1, 1, &m).ok());
    std::string bytes;
    m.Encode(&bytes);
    ASSERT_TRUE(etcd_->Put(o_.cluster.Prefix() + "map", bytes).ok());
  }
  bool Registered(uint32_t id, MemberRecord* r = nullptr) {
    bool found = false;
    EtcdKv kv;
    EXPECT_TRUE(
        etcd_->Get(o_.cluster.Prefix() + "servers/" + std::to_string(id), &found, &kv, nullptr)
            .ok());
    if (found && r != nullptr) {
      EXPECT_TRUE(MemberRecord::Decode(kv.value, r).ok());
    }
    return found;
  }
  Membership::Options o_;
  std::unique_ptr<EtcdClient> etcd_;
};

TEST_F(MembershipTest, IdsAreStablePerAddressAndTheRecordLivesWithTheProcess) {
  std::unique_ptr<Membership> a, b;
  ASSERT_TRUE(Membership::Join(o_, &a).ok());
  EXPECT_EQ(a->id(), 1u);
  MemberRecord r;
  ASSERT_TRUE(Registered(1, &r));
  EXPECT_EQ(r.host, "10.0.0.1");
  EXPECT_EQ(r.port, 7480);
  Membership::Options other = o_;
  other.port = 7481;
  other.zone = "rack-2";
  ASSERT_TRUE(Membership::Join(other, &b).ok());
  EXPECT_EQ(b->id(), 2u);
  ASSERT_TRUE(Registered(2, &r));
  EXPECT_EQ(r.zone, "rack-2");
  a.reset();  // leaving revokes the lease: the record goes at once
  EXPECT_FALSE(Registered(1));
  ASSERT_TRUE(Membership::Join(o_, &a).ok());
  EXPECT_EQ(a->id(), 1u) << "the same address keeps its id";
}

TEST_F(MembershipTest, ASecondProcessOnALiveAddressIsRefused) {
  std::unique_ptr<Membership> a, b;
  ASSERT_TRUE(Membership::Join(o_, &a).ok());
  Status s = Membership::Join(o_, &b);
  EXPECT_EQ(s.code(), Code::kBusy) << s.ToString();
  EXPECT_NE(s.message().find("live process"), std::string::npos);
  EXPECT_TRUE(Registered(a->id())) << "the refused join left the live record alone";
}

TEST_F(MembershipTest, EightServersJoiningAtOnceGetDistinctIds) {
  std::vector<std::unique_ptr<Membership>> m(8);
  std::vector<Status> st(8);
  std::vector<std::thread> t;
  for (int i = 0; i < 8; ++i) {
    t.emplace_back([&, i] {
      Membership::Options o = o_;
      o.port = uint16_t(8000 + i);
      st[size_t(i)] = Membership::Join(o, &m[size_t(i)]);
    });
  }
  for (auto& x : t) x.join();
  std::set<uint32_t> ids;
  for (int i = 0; i < 8; ++i) {
    ASSERT_TRUE(st[size_t(i)].ok()) << st[size_t(i)].ToString();
    ids.insert(m[size_t(i)]->id());
  }
  EXPECT_EQ(ids.size(), 8u);
  EXPECT_EQ(*ids.rbegin(), 8u);
}

// Someone revokes the lease (as etcd does when the server was cut off longer than its TTL):
// the keepalive notices, and the server registers again under a new lease.
TEST_F(MembershipTest, ALostLeaseIsNoticedAndTheServerRegistersAgain) {
  std::unique_ptr<Membership> a;
  ASSERT_TRUE(Membership::Join(o_, &a).ok());
  bool found = false;
  EtcdKv kv;
  ASSERT_TRUE(etcd_->Get(o_.cluster.Prefix() + "servers/1", &found, &kv, nullptr).ok());
  ASSERT_TRUE(found);
  ASSERT_TRUE(etcd_->RevokeLease(kv.lease).ok());
  EXPECT_FALSE(Registered(1));
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(30);
  while (a->reregistrations() == 0 && std::chrono::steady_clock::now() < deadline)
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  EXPECT_EQ(a->reregistrations(), 1u);
  EXPECT_EQ(a->state(), Membership::State::kRegistered);
  EXPECT_TRUE(Registered(1));
}

// etcd unreachable (every member stopped) past the lease's TTL: the server stops believing it
// is registered by its own clock, and registers again once etcd answers.
TEST_F(MembershipTest, WithoutEtcdTheServerStopsBelievingItIsRegistered) {
  std::unique_ptr<Membership> a;
  ASSERT_TRUE(Membership::Join(o_, &a).ok());
  const std::vector<pid_t> pids = etcd_test::MemberPids();
  ASSERT_EQ(pids.size(), 3u);
  for (pid_t pid : pids) ASSERT_EQ(kill(pid, SIGSTOP), 0);
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(20);
  while (a->state() == Membership::State::kRegistered &&
         std::chrono::steady_clock::now() < deadline)
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  const Membership::State during = a->state();
  for (pid_t pid : pids) kill(pid, SIGCONT);
  EXPECT_EQ(during, Membership::State::kLost);
  const auto back = std::chrono::steady_clock::now() + std::chrono::seconds(60);
  while ((a->state() != Membership::State::kRegistered || !Registered(a->id())) &&
         std::chrono::steady_clock::now() < back)
    std::this_thread::sleep_for(std::chrono::milliseconds(200));
  EXPECT_EQ(a->state(), Membership::State::kRegistered);
  EXPECT_TRUE(Registered(a->id()));
}

TEST_F(MembershipTest, AClusterThatDoesNotExistIsRefused) {
  Membership::Options o = o_;
  o.cluster.name = "no-such-cluster";
  std::unique_ptr<Membership> a;
  Status s = Membership::Join(o, &a);
  EXPECT_EQ(s.code(), Code::kNotFound);
  EXPECT_NE(s.message().find("cluster init"), std::string::npos) << s.ToString();
  o = o_;
  o.lease_ttl_s = 1;
  EXPECT_EQ(Membership::Join(o, &a).code(), Code::kInvalidArgument);
}

TEST(MemberRecord, RoundTripsAndRefusesCorruption) {
  MemberRecord r{42, "kv-a.example", 7480, "zone-1", 0x0102030405060708ULL};
  std::string bytes;
  ASSERT_TRUE(r.Encode(&bytes).ok());
  ASSERT_EQ(bytes.size(), kMemberRecordBytes);
  MemberRecord d;
  ASSERT_TRUE(MemberRecord::Decode(bytes, &d).ok());
  EXPECT_EQ(d.id, 42u);
  EXPECT_EQ(d.host, "kv-a.example");
  EXPECT_EQ(d.zone, "zone-1");
  EXPECT_EQ(d.instance, 0x0102030405060708ULL);
  for (size_t i = 0; i < bytes.size(); ++i) {
    std::string bad = bytes;
    bad[i] = char(bad[i] ^ 0x01);
    EXPECT_FALSE(MemberRecord::Decode(bad, &d).ok()) << i;
  }
  EXPECT_FALSE(MemberRecord::Decode(bytes.substr(1), &d).ok());
  EXPECT_FALSE((MemberRecord{0, "h", 1, "", 0}).Encode(&bytes).ok());
  EXPECT_FALSE((MemberRecord{1, "", 1, "", 0}).Encode(&bytes).ok());
  EXPECT_FALSE((MemberRecord{1, "h", 1, std::string(33, 'z'), 0}).Encode(&bytes).ok());
  uint32_t id = 0;
  EXPECT_TRUE(DecodeId(EncodeId(7), &id));
  EXPECT_EQ(id, 7u);
  EXPECT_FALSE(DecodeId("abc", &id));
  EXPECT_FALSE(DecodeId(EncodeId(0), &id));
}

}  // namespace
}  // namespace rkv::cluster
