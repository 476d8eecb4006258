// SPDX-License-Identifier: Apache-2.0
// SuspectReporter (server/cluster/suspect_reporter.h) against the real etcd cluster of
// tests/etcd/etcd_client.sh: a backup failing without a break for suspect_after_ms is reported
// once, at NAME/suspects/BACKUP/ME under the given lease, with this server's id and map epoch;
// failures further apart than kGapMs start over, and one failed attempt is no streak; a reply
// deletes the record; a record lost with its lease is put again under the next one; a reply
// during a streak ends it unreported. The
// healing connect is not exercised here (no RDMA device: it fails; the sandbox test covers it).
// Waits have deadlines; nothing asserts a timing.
#include "server/cluster/suspect_reporter.h"

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <functional>
#include <thread>

#include "common/cluster/suspect_record.h"
#include "tests/etcd/etcd_test_env.h"

namespace rkv::cluster {
namespace {

class SuspectReporterTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_TRUE(etcd_test::OpenForTest(&etcd_, &o_.cluster));
    o_.etcd = etcd_.get();
    int64_t lease = 0;
    ASSERT_TRUE(etcd_->GrantLease(30, &lease).ok());
    lease_.store(lease);
    o_.my_id = [] { return uint32_t{7}; };
    o_.lease = [this] { return lease_.load(); };
    o_.map_epoch = [] { return uint64_t{42}; };
    o_.suspect_after_ms = 200;
    o_.heal_check_ms = 3600 * 1000;  // no healing connects
  }
  std::string Key(uint32_t backup) const {
    return o_.cluster.Prefix() + "suspects/" + std::to_string(backup) + "/7";
  }
  // Whether the record for `backup` exists; its decoded fields and lease when it does.
  bool Record(uint32_t backup, SuspectRecord* r = nullptr, int64_t* lease = nullptr) {
    bool found = false;
    EtcdKv kv;
    EXPECT_TRUE(etcd_->Get(Key(backup), &found, &kv, nullptr).ok());
    if (!found) return false;
    SuspectRecord d;
    EXPECT_TRUE(
        SuspectRecord::Decode(Key(backup).substr(o_.cluster.Prefix().size()), kv.value, &d).ok());
    if (r != nullptr) *r = d;
    if (lease != nullptr) *lease = kv.lease;
    return true;
  }
  static std::chrono::steady_clock::time_point Now() { return std::chrono::steady_clock::now(); }
  static bool Eventually(const std::function<bool()>& pred) {
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(20);
    while (std::chrono::steady_clock::now() < deadline) {
      if (pred()) return true;
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
    return pred();
  }
  // Failures every 50 ms until the record for `backup` is there.
  bool FailUntilReported(SuspectReporter* r, uint32_t backup) {
    return Eventually([&] {
      r->Failed(backup, "10.255.255.1", 7480, Now());
      std::this_thread::sleep_for(std::chrono::milliseconds(30));
      return Record(backup);
    });
  }
  std::unique_ptr<EtcdClient> etcd_;
  std::atomic<int64_t> lease_{0};
  SuspectReporterOptions o_;
};

TEST_F(SuspectReporterTest, AStreakIsReportedOnceUnderTheLeaseAndAReplyDeletesIt) {
  SuspectReporter r(o_);
  ASSERT_TRUE(FailUntilReported(&r, 9));
  SuspectRecord rec;
  int64_t lease = 0;
  ASSERT_TRUE(Record(9, &rec, &lease));
  EXPECT_EQ(rec.reporter, 7u);
  EXPECT_EQ(rec.backup, 9u);
  EXPECT_EQ(rec.map_epoch, 42u);
  EXPECT_EQ(lease, lease_.load());
  for (int i = 0; i < 5; ++i) r.Failed(9, "10.255.255.1", 7480, Now());
  EXPECT_TRUE(Eventually([&] { return r.suspected() == 1; }));
  EXPECT_EQ(r.reported(), 1u);
  r.Reached(9);
  EXPECT_TRUE(Eventually([&] { return !Record(9); }));
  EXPECT_TRUE(Eventually([&] { return r.healed() == 1; }));
  EXPECT_EQ(r.suspected(), 0u);
  // A new streak is a new report.
  ASSERT_TRUE(FailUntilReported(&r, 9));
  EXPECT_EQ(r.reported(), 2u);
}

TEST_F(SuspectReporterTest, ARecordLostWithItsLeaseIsPutUnderTheNext) {
  SuspectReporter r(o_);
  ASSERT_TRUE(FailUntilReported(&r, 11));
  const int64_t old = lease_.load();
  lease_.store(0);  // registering again
  ASSERT_TRUE(etcd_->RevokeLease(old).ok());
  EXPECT_FALSE(Record(11));
  int64_t next = 0;
  ASSERT_TRUE(etcd_->GrantLease(30, &next).ok());
  lease_.store(next);
  int64_t lease = 0;
  EXPECT_TRUE(Eventually([&] { return Record(11, nullptr, &lease); }));
  EXPECT_EQ(lease, next);
  EXPECT_EQ(r.reported(), 1u);  // the same report, put again
}

TEST_F(SuspectReporterTest, GapsAndRepliesEndAStreakUnreported) {
  o_.suspect_after_ms = 1500;
  SuspectReporter r(o_);
  // Failures further apart than kGapMs: each starts a new streak, none long enough.
  for (int i = 0; i < 3; ++i) {
    r.Failed(12, "10.255.255.1", 7480, Now());
    std::this_thread::sleep_for(std::chrono::milliseconds(SuspectReporter::kGapMs + 100));
  }
  r.Failed(12, "10.255.255.1", 7480, Now());
  // A streak counts from its first attempt's start, once it holds two failures.
  r.Failed(16, "10.255.255.3", 7480, Now() - std::chrono::seconds(2));
  r.Failed(16, "10.255.255.3", 7480, Now());
  EXPECT_TRUE(Eventually([&] { return Record(16); }));
  // One failed attempt, however long, is no streak.
  r.Failed(17, "10.255.255.4", 7480, Now() - std::chrono::seconds(10));
  // A reply ends a streak: failures just before it do not add up with the ones after.
  r.Failed(13, "10.255.255.2", 7480, Now());
  r.Reached(13);
  std::this_thread::sleep_for(std::chrono::milliseconds(500));  // the thread had passes to act
  EXPECT_EQ(r.reported(), 1u);                                  // 16's
  EXPECT_FALSE(Record(12));
  EXPECT_FALSE(Record(13));
  EXPECT_FALSE(Record(17));
}

TEST_F(SuspectReporterTest, NothingIsReportedWhenTurnedOffOrBeforeJoining) {
  o_.suspect_after_ms = 0;
  {
    SuspectReporter r(o_);
    for (int i = 0; i < 10; ++i) {
      r.Failed(14, "10.255.255.1", 7480, Now());
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
    EXPECT_EQ(r.reported(), 0u);
  }
  o_.suspect_after_ms = 100;
  o_.my_id = [] { return uint32_t{0}; };
  SuspectReporter r(o_);
  for (int i = 0; i < 10; ++i) {
    r.Failed(15, "10.255.255.1", 7480, Now());
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  std::this_thread::sleep_for(std::chrono::milliseconds(300));
  EXPECT_EQ(r.reported(), 0u);
  EXPECT_FALSE(Record(15));
}

}  // namespace
}  // namespace rkv::cluster

namespace rkv::cluster {
namespace {

// Replicator::Resync's report of a backup that keeps refusing it: put at once (no streak), and
// answers from the backup do not delete it during the hold (SuspectReporter::kHoldMs), so the
// coordinator can drop the backup; after the hold an answer heals it as any report.
TEST_F(SuspectReporterTest, ADivergedBackupIsReportedAtOnceAndAnswersHealItOnlyAfterTheHold) {
  SuspectReporter r(o_);
  r.Diverged(21, "10.255.255.1", 7480);
  ASSERT_TRUE(Eventually([&] { return Record(21); }));
  ASSERT_TRUE(Eventually([&] { return r.suspected() == 1; }));
  r.Reached(21);  // synchronous: within the hold it changes nothing
  EXPECT_EQ(r.suspected(), 1u);
  EXPECT_EQ(r.healed(), 0u);
  EXPECT_TRUE(Eventually([&] {
    r.Reached(21);
    return !Record(21);
  }));
  EXPECT_TRUE(Eventually([&] { return r.healed() == 1; }));
}

}  // namespace
}  // namespace rkv::cluster
