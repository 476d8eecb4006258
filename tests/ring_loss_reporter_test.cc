// SPDX-License-Identifier: Apache-2.0
// RingLossReporter (server/cluster/ring_loss_reporter.h) against the real etcd cluster of
// tests/etcd/etcd_client.sh: a marked slot is put at NAME/ringloss/ME under the membership
// lease with this server's id and map epoch, and the record follows the marks (a second slot,
// then none: deleted); a record someone else deleted while the marks stayed comes back; a
// record lost with its lease is put again under the next one, and nothing is put while there
// is no lease. Waits have deadlines; nothing asserts a timing.
#include "server/cluster/ring_loss_reporter.h"

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <functional>
#include <thread>
#include <vector>

#include "common/cluster/ring_loss_record.h"
#include "tests/etcd/etcd_test_env.h"

namespace rkv::cluster {
namespace {

class RingLossReporterTest : public ::testing::Test {
 protected:
  RingLossReporterTest() : words_(16, 0), owners_(words_.data(), 16, 0x77) {}
  void SetUp() override {
    ASSERT_TRUE(etcd_test::OpenForTest(&etcd_, &o_.cluster));
    o_.etcd = etcd_.get();
    o_.owners = &owners_;
    o_.my_id = 7;
    int64_t lease = 0;
    ASSERT_TRUE(etcd_->GrantLease(30, &lease).ok());
    lease_.store(lease);
    o_.lease = [this] { return lease_.load(); };
    o_.map_epoch = [] { return uint64_t{42}; };
  }
  std::string Key() const { return o_.cluster.Prefix() + "ringloss/7"; }
  // Whether the record exists; its decoded fields and lease when it does.
  bool Record(RingLossRecord* r = nullptr, int64_t* lease = nullptr) {
    bool found = false;
    EtcdKv kv;
    EXPECT_TRUE(etcd_->Get(Key(), &found, &kv, nullptr).ok());
    if (!found) return false;
    RingLossRecord d;
    EXPECT_TRUE(
        RingLossRecord::Decode(Key().substr(o_.cluster.Prefix().size()), kv.value, &d).ok());
    if (r != nullptr) *r = d;
    if (lease != nullptr) *lease = kv.lease;
    return true;
  }
  bool RecordHas(const std::vector<uint32_t>& slots) {
    RingLossRecord r;
    return Record(&r) && r.slots == slots;
  }
  static bool Eventually(const std::function<bool()>& pred) {
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(30);
    while (std::chrono::steady_clock::now() < deadline) {
      if (pred()) return true;
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
    return pred();
  }
  std::unique_ptr<EtcdClient> etcd_;
  std::vector<uint64_t> words_;
  OwnershipTable owners_;
  std::atomic<int64_t> lease_{0};
  RingLossReporterOptions o_;
};

TEST_F(RingLossReporterTest, TheRecordFollowsTheMarksUnderTheLease) {
  RingLossReporter rep(o_);
  EXPECT_FALSE(Record());
  owners_.MarkRingLoss(5);
  ASSERT_TRUE(Eventually([&] { return RecordHas({5}); }));
  RingLossRecord r;
  int64_t lease = 0;
  ASSERT_TRUE(Record(&r, &lease));
  EXPECT_EQ(r.server, 7u);
  EXPECT_EQ(r.map_epoch, 42u);
  EXPECT_EQ(lease, lease_.load());
  owners_.MarkRingLoss(11);
  EXPECT_TRUE(Eventually([&] { return RecordHas({5, 11}); }));
  EXPECT_TRUE(Eventually([&] { return rep.reported() == 2; }));
  owners_.ClearRingLoss(5);
  owners_.ClearRingLoss(11);
  EXPECT_TRUE(Eventually([&] { return !Record(); }));
  EXPECT_TRUE(Eventually([&] { return rep.reported() == 0; }));
  EXPECT_EQ(rep.failures(), 0u);
}

TEST_F(RingLossReporterTest, ARecordDeletedBySomeoneElseComesBack) {
  RingLossReporter rep(o_);
  owners_.MarkRingLoss(3);
  ASSERT_TRUE(Eventually([&] { return RecordHas({3}); }));
  ASSERT_TRUE(etcd_->Delete(Key()).ok());
  EXPECT_FALSE(Record());
  EXPECT_TRUE(Eventually([&] { return RecordHas({3}); }));
  int64_t lease = 0;
  ASSERT_TRUE(Record(nullptr, &lease));
  EXPECT_EQ(lease, lease_.load());
}

TEST_F(RingLossReporterTest, ARecordLostWithItsLeaseIsPutUnderTheNext) {
  RingLossReporter rep(o_);
  owners_.MarkRingLoss(9);
  ASSERT_TRUE(Eventually([&] { return RecordHas({9}); }));
  const int64_t old = lease_.load();
  lease_.store(0);  // registering again
  ASSERT_TRUE(etcd_->RevokeLease(old).ok());
  EXPECT_FALSE(Record());
  // No lease: nothing is put (a record without a lease would outlive this server).
  std::this_thread::sleep_for(std::chrono::milliseconds(300));
  EXPECT_FALSE(Record());
  int64_t next = 0;
  ASSERT_TRUE(etcd_->GrantLease(30, &next).ok());
  lease_.store(next);
  ASSERT_TRUE(Eventually([&] { return RecordHas({9}); }));
  int64_t lease = 0;
  ASSERT_TRUE(Record(nullptr, &lease));
  EXPECT_EQ(lease, next);
}

}  // namespace
}  // namespace rkv::cluster
