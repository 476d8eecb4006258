// SPDX-License-Identifier: Apache-2.0
// Election (server/cluster/election.h) against the real etcd cluster of
// tests/etcd/etcd_client.sh: one leader among three candidates, the next one leads when the
// leader's lease is revoked (as at its expiry) or it resigns, and a deposed leader's decisions
// fail their fencing compare even though it has not learnt that it lost.
#include "server/cluster/election.h"

#include <gtest/gtest.h>

#include <cstdlib>
#include <sstream>
#include <thread>

#include "tests/etcd/etcd_test_env.h"

namespace rkv::cluster {
namespace {

class ElectionTest : public ::testing::Test {
 protected:
  void SetUp() override {
    const EtcdSettings s = etcd_test::Settings();
    if (s.endpoints.empty()) GTEST_FAIL() << "RKV_ETCD_ENDPOINTS is not set (run etcd_client.sh)";
    ASSERT_TRUE(EtcdClient::Open(s, &etcd_).ok());
    prefix_ = std::string("/rkv-test/election/") +
              ::testing::UnitTest::GetInstance()->current_test_info()->name() + "/";
  }
  int64_t Lease() {
    int64_t id = 0;
    EXPECT_TRUE(etcd_->GrantLease(30, &id).ok());
    return id;
  }
  // A decision as a leader would make it: fenced by `e`'s StillLeader compare.
  bool Decide(const Election& e, const std::string& what) {
    bool ok = false;
    EXPECT_TRUE(
        etcd_->Txn({e.StillLeader()}, {EtcdClient::Op::Put(prefix_ + "../decision", what)}, {}, &ok)
            .ok());
    return ok;
  }
  std::unique_ptr<EtcdClient> etcd_;
  std::string prefix_;
};

TEST_F(ElectionTest, OneLeaderThenTheNextInLine) {
  const int64_t la = Lease(), lb = Lease(), lc = Lease();
  Election a(etcd_.get(), prefix_, la), b(etcd_.get(), prefix_, lb), c(etcd_.get(), prefix_, lc);
  ASSERT_TRUE(a.Campaign("server-a", 5000).ok());
  EXPECT_TRUE(a.leading());
  EXPECT_EQ(b.Campaign("server-b", 300).code(), Code::kTimeout);
  EXPECT_EQ(c.Campaign("server-c", 300).code(), Code::kTimeout);
  EXPECT_FALSE(b.leading());
  std::string who;
  int64_t token = 0;
  bool any = false;
  ASSERT_TRUE(Election::Leader(etcd_.get(), prefix_, &who, &token, &any).ok());
  EXPECT_TRUE(any);
  EXPECT_EQ(who, "server-a");
  EXPECT_EQ(token, a.fencing_token());
  EXPECT_TRUE(Decide(a, "a decides"));

  // a's lease ends (as when it was paused or cut off past its TTL); b, waiting, takes over.
  Status sb;
  std::thread waiter([&] { sb = b.Campaign("server-b", 20000); });
  ASSERT_TRUE(etcd_->RevokeLease(la).ok());
  waiter.join();
  ASSERT_TRUE(sb.ok()) << sb.ToString();
  EXPECT_TRUE(b.leading());
  EXPECT_GT(b.fencing_token(), a.fencing_token());
  EXPECT_FALSE(Decide(a, "a, deposed, still thinks it leads")) << "fenced";
  EXPECT_TRUE(Decide(b, "b decides"));
  EXPECT_EQ(c.Campaign("server-c", 300).code(), Code::kTimeout) << "c is still behind b";

  ASSERT_TRUE(b.Resign().ok());
  ASSERT_TRUE(c.Campaign("server-c", 20000).ok());
  EXPECT_TRUE(c.leading());
  EXPECT_FALSE(Decide(b, "b resigned"));
  EXPECT_TRUE(Decide(c, "c decides"));
  ASSERT_TRUE(Election::Leader(etcd_.get(), prefix_, &who, &token, &any).ok());
  EXPECT_EQ(who, "server-c");
  (void)etcd_->RevokeLease(lb);
  (void)etcd_->RevokeLease(lc);
}

// Many candidates at once: exactly one leads.
TEST_F(ElectionTest, ConcurrentCandidatesElectExactlyOne) {
  constexpr int kCandidates = 6;
  std::vector<int64_t> leases;
  for (int i = 0; i < kCandidates; ++i) leases.push_back(Lease());
  std::vector<int> led(kCandidates, 0);
  std::vector<std::thread> t;
  for (int i = 0; i < kCandidates; ++i) {
    t.emplace_back([&, i] {
      std::unique_ptr<EtcdClient> c;
      EtcdSettings s = etcd_->transport().settings();
      if (!EtcdClient::Open(s, &c).ok()) return;
      Election e(c.get(), prefix_, leases[size_t(i)]);
      led[size_t(i)] = e.Campaign("c" + std::to_string(i), 1000).ok() ? 1 : 0;
    });
  }
  for (auto& x : t) x.join();
  int leaders = 0;
  for (int v : led) leaders += v;
  EXPECT_EQ(leaders, 1);
  for (int64_t l : leases) (void)etcd_->RevokeLease(l);
}

// A candidate whose lease is gone cannot stand with it.
TEST_F(ElectionTest, AnExpiredLeaseCannotStand) {
  const int64_t l = Lease();
  ASSERT_TRUE(etcd_->RevokeLease(l).ok());
  Election e(etcd_.get(), prefix_, l);
  Status s = e.Campaign("x", 1000);
  EXPECT_FALSE(s.ok());
  EXPECT_FALSE(e.leading());
}

}  // namespace
}  // namespace rkv::cluster
