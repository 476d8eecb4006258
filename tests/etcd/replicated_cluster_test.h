// SPDX-License-Identifier: Apache-2.0
// A test fixture for the cluster's etcd-side pieces (the coordinator's drain, the migrator's
// hand-over) against the real etcd cluster of tests/etcd/etcd_client.sh, without kvservers:
// a cluster named after the test, its map put at epoch 5 with kSlots slots, R=2, three servers
// (ids 1..3, 10.255.255.ID:7000+ID), every slot's primary on server s % 3 + 1 and its backup on
// the next one; Join registers a member record under a lease of its own, as Membership does.
// Test helper only. Subclasses stop whatever they started before calling TearDown (the leases
// are revoked there).
#ifndef RKV_TESTS_ETCD_REPLICATED_CLUSTER_TEST_H_
#define RKV_TESTS_ETCD_REPLICATED_CLUSTER_TEST_H_

#include <gtest/gtest.h>

#include <cstdint>
#include <map>
#include <memory>
#include <string>

#include "common/cluster/cluster_address.h"
#include "common/cluster/member_record.h"
#include "common/cluster/slot_map.h"
#include "common/etcd/etcd_client.h"
#include "tests/etcd/etcd_test_env.h"

namespace rkv::cluster {

class ReplicatedClusterTest : public ::testing::Test {
 protected:
  static constexpr uint32_t kSlots = 16;
  static std::string Host(uint32_t id) { return "10.255.255." + std::to_string(id); }

  void SetUp() override {
    EtcdSettings s = etcd_test::Settings();
    if (s.endpoints.empty()) GTEST_FAIL() << "RKV_ETCD_ENDPOINTS is not set (run etcd_client.sh)";
    ASSERT_TRUE(EtcdClient::Open(s, &etcd_).ok());
    const auto* info = ::testing::UnitTest::GetInstance()->current_test_info();
    addr_.endpoints = s.endpoints;
    addr_.name = std::string(info->test_suite_name()) + "-" + info->name();
    ASSERT_TRUE(SlotMap::Create(kSlots, 2, 99, &initial_).ok());
    for (uint32_t id = 1; id <= 3; ++id) initial_.AddServer({id, Host(id), uint16_t(7000 + id)});
    for (uint32_t slot = 0; slot < kSlots; ++slot) {
      ASSERT_TRUE(initial_.Assign(slot, 0, initial_.IndexOf(slot % 3 + 1)));
      ASSERT_TRUE(initial_.Assign(slot, 1, initial_.IndexOf((slot + 1) % 3 + 1)));
    }
    initial_.set_epoch(5);
    std::string v;
    initial_.Encode(&v);
    ASSERT_TRUE(etcd_->Put(addr_.Prefix() + "map", v).ok());
  }
  void TearDown() override {
    for (const auto& [id, l] : leases_)
      if (l != 0) (void)etcd_->RevokeLease(l);
  }
  // Registers server `id` under a lease of its own (as Membership does).
  void Join(uint32_t id) {
    int64_t lease = 0;
    ASSERT_TRUE(etcd_->GrantLease(60, &lease).ok());
    leases_[id] = lease;
    MemberRecord r;
    r.id = id;
    r.host = Host(id);
    r.port = uint16_t(7000 + id);
    std::string v;
    ASSERT_TRUE(r.Encode(&v).ok());
    ASSERT_TRUE(etcd_->Put(addr_.Prefix() + "servers/" + std::to_string(id), v, lease).ok());
  }
  // The map in etcd now.
  SlotMap Map() {
    bool found = false;
    EtcdKv kv;
    EXPECT_TRUE(etcd_->Get(addr_.Prefix() + "map", &found, &kv, nullptr).ok());
    SlotMap m;
    EXPECT_TRUE(found && SlotMap::Decode(kv.value, &m).ok());
    return m;
  }

  std::unique_ptr<EtcdClient> etcd_;
  ClusterAddress addr_;
  SlotMap initial_;                     // the map SetUp put
  std::map<uint32_t, int64_t> leases_;  // member id -> its lease
};

}  // namespace rkv::cluster

#endif  // RKV_TESTS_ETCD_REPLICATED_CLUSTER_TEST_H_
