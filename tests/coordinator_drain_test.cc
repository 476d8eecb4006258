// SPDX-License-Identifier: Apache-2.0
// `cluster remove` in a replicated cluster (server/cluster/coordinator_drain.cc) against the
// real etcd cluster of tests/etcd/etcd_client.sh, with a Coordinator and member records but no
// kvserver (no RDMA here): three servers, R=2, every slot's primary on server s % 3 + 1 and its
// backup on the next one.
//  - a live server removed: the answer says it holds no replica; the map (one epoch newer) gives
//    its primaries to their backups and drops it as a backup; its DrainRecord lives under its
//    membership lease;
//  - a DrainRecord not under the server's lease (put by hand) changes nothing;
//  - a server not in the map: NOT_FOUND.
// (Re-replication, which follows, is not exercised: it needs servers to copy; no request is
// answered while its copy waits. tests/integration/replicas.sh covers it and a second remove.)
// Waits have deadlines; nothing asserts a timing.
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <thread>

#include "common/cluster/cluster_request.h"
#include "common/cluster/drain_record.h"
#include "common/cluster/member_record.h"
#include "common/cluster/slot_map.h"
#include "server/cluster/coordinator.h"
#include "tests/etcd/replicated_cluster_test.h"

namespace rkv::cluster {
namespace {

class CoordinatorDrainTest : public ReplicatedClusterTest {
 protected:
  void TearDown() override {
    coordinator_.reset();
    ReplicatedClusterTest::TearDown();
  }
  void StartCoordinator() {
    coordinator_ = std::make_unique<Coordinator>(
        etcd_.get(), addr_, 1, [this] { return leases_[1]; }, nullptr);
    coordinator_->Start();
  }
  static uint32_t Roles(const SlotMap& m, uint32_t id) {
    uint32_t n = 0;
    for (uint32_t slot = 0; slot < m.num_slots(); ++slot)
      for (uint16_t r = 0; r < m.replicas(); ++r) n += m.OwnerIndex(slot, r) == m.IndexOf(id);
    return n;
  }
  // Asks for the removal of `id` and waits (up to 60 s) for the coordinator's answer.
  ClusterResult Remove(uint32_t id) {
    ClusterRequest req;
    req.kind = ClusterRequest::kRemove;
    req.nonce = ++nonce_;
    req.server_id = id;
    EXPECT_TRUE(etcd_->Put(addr_.Prefix() + "request", req.Encode()).ok());
    ClusterResult res;
    res.code = Code::kTimeout;
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(60);
    while (std::chrono::steady_clock::now() < deadline) {
      bool found = false;
      EtcdKv kv;
      ClusterResult r;
      if (etcd_->Get(addr_.Prefix() + "result", &found, &kv, nullptr).ok() && found &&
          ClusterResult::Decode(kv.value, &r).ok() && r.nonce == req.nonce)
        return r;
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
    res.message = "no answer within 60 s";
    return res;
  }

  std::unique_ptr<Coordinator> coordinator_;
  uint64_t nonce_ = 1000;
};

TEST_F(CoordinatorDrainTest, ALiveServerLeavesEverySlotUnderItsLease) {
  for (uint32_t id = 1; id <= 3; ++id) Join(id);
  StartCoordinator();
  const ClusterResult res = Remove(2);
  ASSERT_EQ(res.code, Code::kOk) << res.message;
  EXPECT_NE(res.message.find("holds no replica"), std::string::npos) << res.message;
  const SlotMap m = Map();
  EXPECT_GT(m.epoch(), 5u);
  EXPECT_EQ(Roles(m, 2), 0u);
  for (uint32_t slot = 0; slot < kSlots; ++slot) {
    const uint32_t was_primary = slot % 3 + 1, was_backup = (slot + 1) % 3 + 1;
    const ServerEntry* p = m.Owner(slot, 0);
    ASSERT_NE(p, nullptr) << "slot " << slot;
    // Server 2's primaries went to their backup (server 3); the others kept their primary.
    EXPECT_EQ(p->id, was_primary == 2 ? was_backup : was_primary) << "slot " << slot;
  }
  bool found = false;
  EtcdKv kv;
  ASSERT_TRUE(etcd_->Get(addr_.Prefix() + "draining/2", &found, &kv, nullptr).ok());
  ASSERT_TRUE(found);
  DrainRecord d;
  ASSERT_TRUE(DrainRecord::Decode("draining/2", kv.value, &d).ok());
  EXPECT_EQ(d.server, 2u);
  EXPECT_EQ(kv.lease, leases_[2]);
}

TEST_F(CoordinatorDrainTest, ARecordNotUnderTheServersLeaseChangesNothing) {
  for (uint32_t id = 1; id <= 3; ++id) Join(id);
  DrainRecord d;
  d.server = 2;
  std::string v;
  ASSERT_TRUE(d.Encode(&v).ok());
  ASSERT_TRUE(etcd_->Put(addr_.Prefix() + "draining/2", v).ok());  // no lease
  ASSERT_TRUE(etcd_->Put(addr_.Prefix() + "draining/3", "garbage").ok());
  StartCoordinator();
  // A request the coordinator answers only after its upkeep rounds saw those records.
  const ClusterResult res = Remove(77);
  EXPECT_EQ(res.code, Code::kNotFound) << res.message;
  std::this_thread::sleep_for(std::chrono::seconds(1));  // more upkeep rounds (not a timing)
  const SlotMap m = Map();
  EXPECT_EQ(m.epoch(), 5u);
  EXPECT_GT(Roles(m, 2), 0u);
}

}  // namespace
}  // namespace rkv::cluster
