// SPDX-License-Identifier: Apache-2.0
// What the coordinator costs etcd while nothing happens, and that it still acts at once when
// something does (server/cluster/coordinator.h, "idle rounds"; election.h, resumed waits),
// against the real etcd cluster of tests/etcd/etcd_client.sh, with Coordinators and member
// records but no kvserver (no RDMA here): three servers, R=2, every slot replicated.
//  - an idle leader reads etcd only on its safety round (about once a second), not every
//    100 ms; a follower's campaign waits read nothing;
//  - a member's record going (its lease revoked) wakes the idle leader: the slots fail over;
//  - a request put while it idles is answered;
//  - the leader gone, the follower (its wait resumed from call to call) leads.
// Counts are upper bounds over a few seconds: a slower machine only makes fewer calls. Waits
// have deadlines; nothing asserts a timing.
#include <gtest/gtest.h>

#include <chrono>
#include <iostream>
#include <memory>
#include <string>
#include <thread>

#include "common/cluster/cluster_request.h"
#include "common/cluster/slot_map.h"
#include "common/etcd/etcd_transport.h"
#include "server/cluster/coordinator.h"
#include "tests/etcd/replicated_cluster_test.h"

namespace rkv::cluster {
namespace {

using Clock = std::chrono::steady_clock;

class CoordinatorIdleTest : public ReplicatedClusterTest {
 protected:
  void TearDown() override {
    follower_.reset();
    leader_.reset();
    ReplicatedClusterTest::TearDown();
  }
  // A coordinator for server `id` on an etcd client of its own (*client), started.
  std::unique_ptr<Coordinator> Start(uint32_t id, std::unique_ptr<EtcdClient>* client) {
    EXPECT_TRUE(EtcdClient::Open(etcd_test::Settings(), client).ok());
    auto c = std::make_unique<Coordinator>(
        client->get(), addr_, id, [this, id] { return leases_[id]; }, nullptr);
    c->Start();
    return c;
  }
  static bool WaitFor(const std::function<bool()>& cond, int seconds = 30) {
    const auto deadline = Clock::now() + std::chrono::seconds(seconds);
    while (Clock::now() < deadline) {
      if (cond()) return true;
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
    return cond();
  }
  static uint32_t Roles(const SlotMap& m, uint32_t id) {
    uint32_t n = 0;
    for (uint32_t slot = 0; slot < m.num_slots(); ++slot)
      for (uint16_t r = 0; r < m.replicas(); ++r) n += m.OwnerIndex(slot, r) == m.IndexOf(id);
    return n;
  }

  std::unique_ptr<EtcdClient> leader_etcd_, follower_etcd_;
  std::unique_ptr<Coordinator> leader_, follower_;
};

TEST_F(CoordinatorIdleTest, AnIdleLeaderAndAFollowerReadAlmostNothing) {
  for (uint32_t id = 1; id <= 3; ++id) Join(id);
  leader_ = Start(1, &leader_etcd_);
  ASSERT_TRUE(WaitFor([&] { return leader_->leading(); })) << "server 1 never led";
  follower_ = Start(2, &follower_etcd_);
  std::this_thread::sleep_for(std::chrono::seconds(2));  // settle: first reads, a campaign
  EXPECT_EQ(Map().epoch(), 5u) << "nothing to change in a healthy map";
  const uint64_t l0 = leader_etcd_->transport().range_posts();
  const uint64_t f0 = follower_etcd_->transport().range_posts();
  const uint64_t lp0 = leader_etcd_->transport().posts();
  const auto t0 = Clock::now();
  std::this_thread::sleep_for(std::chrono::seconds(3));
  const double secs = std::chrono::duration<double>(Clock::now() - t0).count();
  const uint64_t leader_reads = leader_etcd_->transport().range_posts() - l0;
  const uint64_t follower_reads = follower_etcd_->transport().range_posts() - f0;
  const uint64_t leader_calls = leader_etcd_->transport().posts() - lp0;
  std::cout << "idle for " << secs << " s: the leader made " << leader_calls << " etcd calls, "
            << leader_reads << " of them reads; the follower " << follower_reads << " reads\n";
  // Before: every 100 ms the map, the members and NAME/request (30 reads a second), plus the
  // reports twice a second; now the four on the safety round, once a second.
  EXPECT_LE(double(leader_reads), 6 * (secs + 1))
      << leader_reads << " reads in " << secs << " s by an idle leader";
  // Before: a campaign every second read its key and the line (2 a second, no probe here);
  // now the wait goes on (one watch call) and the line is read every 25 calls.
  EXPECT_LE(follower_reads, 2u) << follower_reads << " reads in " << secs << " s by a follower";
  EXPECT_GT(leader_calls, 0u) << "the leader watches";
}

TEST_F(CoordinatorIdleTest, AChangeOrARequestWakesTheIdleLeader) {
  for (uint32_t id = 1; id <= 3; ++id) Join(id);
  leader_ = Start(1, &leader_etcd_);
  ASSERT_TRUE(WaitFor([&] { return leader_->leading(); }));
  std::this_thread::sleep_for(std::chrono::seconds(2));  // idle now
  // A request put while it idles is answered.
  ClusterRequest req;
  req.kind = ClusterRequest::kRemove;
  req.nonce = 4242;
  req.server_id = 77;
  ASSERT_TRUE(etcd_->Put(addr_.Prefix() + "request", req.Encode()).ok());
  ClusterResult res;
  EXPECT_TRUE(WaitFor([&] {
    bool found = false;
    EtcdKv kv;
    return etcd_->Get(addr_.Prefix() + "result", &found, &kv, nullptr).ok() && found &&
           ClusterResult::Decode(kv.value, &res).ok() && res.nonce == req.nonce;
  })) << "the request was not answered";
  EXPECT_EQ(res.code, Code::kNotFound) << res.message;
  std::this_thread::sleep_for(std::chrono::seconds(2));  // idle again
  // Server 3's record goes (its lease revoked): its slots fail over.
  ASSERT_TRUE(etcd_->RevokeLease(leases_[3]).ok());
  leases_[3] = 0;
  EXPECT_TRUE(WaitFor([&] { return Roles(Map(), 3) == 0; })) << "server 3 kept its roles";
  const SlotMap m = Map();
  EXPECT_GT(m.epoch(), 5u);
  for (uint32_t slot = 0; slot < kSlots; ++slot) EXPECT_NE(m.Owner(slot, 0), nullptr);
}

TEST_F(CoordinatorIdleTest, TheFollowerLeadsOnceTheLeaderIsGone) {
  for (uint32_t id = 1; id <= 3; ++id) Join(id);
  leader_ = Start(1, &leader_etcd_);
  ASSERT_TRUE(WaitFor([&] { return leader_->leading(); }));
  follower_ = Start(2, &follower_etcd_);
  std::this_thread::sleep_for(std::chrono::seconds(3));  // several campaign calls resumed
  EXPECT_FALSE(follower_->leading());
  leader_.reset();  // resigns: its election key goes
  EXPECT_TRUE(WaitFor([&] { return follower_->leading(); })) << "the follower never led";
}

}  // namespace
}  // namespace rkv::cluster
