// SPDX-License-Identifier: Apache-2.0
// DiskStepDown (server/cluster/disk_step_down.h) against the real etcd cluster of
// tests/etcd/etcd_client.sh, with member records and (in the first case) a Coordinator but no
// kvserver: ReplicatedClusterTest's three servers, R=2; this process plays server 2, its log
// and its data directory given as a failure counter, a broken state and a probe result.
//  - one passing log failure: nothing;
//  - failures that go on: NAME/draining/2 under server 2's lease; the coordinator fails server 2's
//    primaries over to their backups and drops it as a backup; once the probe passes the record
//    is deleted;
//  - no failure: nothing is put; a failing probe keeps the record (the next probe later);
//  - a broken log: the record stays and the probe is never asked;
//  - a record already there (a `cluster remove`): not replaced, and not deleted when the probe
//    passes;
//  - a new registration (another lease): the record is put again under it.
// Waits have deadlines; nothing asserts a timing.
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <functional>
#include <memory>
#include <string>
#include <thread>

#include "common/cluster/drain_record.h"
#include "server/cluster/coordinator.h"
#include "server/cluster/disk_step_down.h"
#include "tests/etcd/replicated_cluster_test.h"

namespace rkv::cluster {
namespace {

class DiskStepDownEtcdTest : public ReplicatedClusterTest {
 protected:
  void TearDown() override {
    step_.reset();
    coordinator_.reset();
    ReplicatedClusterTest::TearDown();
  }
  void Start() {
    DiskStepDownOptions o;
    o.etcd = etcd_.get();
    o.cluster = addr_;
    o.my_id = 2;
    o.lease = [this] { return lease2_.load(); };
    o.map_epoch = [] { return uint64_t{5}; };
    o.failures = [this] { return failures_.load(); };
    o.broken = [this] {
      return broken_.load() ? Status(Code::kIoError, "write: Input/output error") : Status::Ok();
    };
    o.probe = [this] {
      probes_.fetch_add(1);
      return probe_ok_.load() ? Status::Ok() : Status(Code::kIoError, "write: No space left");
    };
    o.check_ms = 20;
    o.first_hold_ms = 100;
    o.max_hold_ms = 400;
    step_ = std::make_unique<DiskStepDown>(o);
  }
  // The record at draining/2: *found, and its lease.
  bool Record(int64_t* lease = nullptr) {
    bool found = false;
    EtcdKv kv;
    EXPECT_TRUE(etcd_->Get(addr_.Prefix() + "draining/2", &found, &kv, nullptr).ok());
    if (!found) return false;
    DrainRecord d;
    EXPECT_TRUE(DrainRecord::Decode("draining/2", kv.value, &d).ok());
    EXPECT_EQ(d.server, 2u);
    if (lease != nullptr) *lease = kv.lease;
    return true;
  }
  static bool Within(int seconds, const std::function<bool()>& f) {
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(seconds);
    while (std::chrono::steady_clock::now() < deadline) {
      if (f()) return true;
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
    return f();
  }
  static uint32_t Roles(const SlotMap& m, uint32_t id) {
    uint32_t n = 0;
    for (uint32_t slot = 0; slot < m.num_slots(); ++slot)
      for (uint16_t r = 0; r < m.replicas(); ++r) n += m.OwnerIndex(slot, r) == m.IndexOf(id);
    return n;
  }
  bool Fail() {  // one more failed log record (true, for Within's conditions)
    failures_.fetch_add(1);
    return true;
  }
  void JoinAll() {
    for (uint32_t id = 1; id <= 3; ++id) Join(id);
    lease2_.store(leases_[2]);
  }

  std::unique_ptr<Coordinator> coordinator_;
  std::unique_ptr<DiskStepDown> step_;
  std::atomic<int64_t> lease2_{0};
  std::atomic<uint64_t> failures_{0};
  std::atomic<bool> broken_{false};
  std::atomic<bool> probe_ok_{false};
  std::atomic<int> probes_{0};
};

TEST_F(DiskStepDownEtcdTest, AFailingLogHandsTheReplicasOverAndAPassingProbeComesBack) {
  JoinAll();
  coordinator_ = std::make_unique<Coordinator>(
      etcd_.get(), addr_, 1, [this] { return leases_[1]; }, nullptr);
  coordinator_->Start();
  Start();
  std::this_thread::sleep_for(std::chrono::milliseconds(200));  // a few checks, no failure
  EXPECT_FALSE(Record());
  failures_.store(1);  // one failure, then none: a passing problem, no step-down
  std::this_thread::sleep_for(std::chrono::milliseconds(1500));
  EXPECT_FALSE(Record());
  EXPECT_EQ(step_->step_downs(), 0u);
  ASSERT_TRUE(Within(10, [&] { return Fail() && Record(); }));  // failures that go on
  int64_t lease = 0;
  ASSERT_TRUE(Record(&lease));
  EXPECT_EQ(lease, leases_[2]);
  EXPECT_TRUE(step_->down());
  EXPECT_EQ(step_->step_downs(), 1u);
  // The coordinator hands server 2's roles over: primaries to their backups.
  ASSERT_TRUE(Within(30, [&] { return Roles(Map(), 2) == 0; })) << Roles(Map(), 2);
  const SlotMap m = Map();
  EXPECT_GT(m.epoch(), 5u);
  for (uint32_t slot = 0; slot < kSlots; ++slot) {
    const uint32_t was_primary = slot % 3 + 1, was_backup = (slot + 1) % 3 + 1;
    const ServerEntry* p = m.Owner(slot, 0);
    ASSERT_NE(p, nullptr) << "slot " << slot;
    EXPECT_EQ(p->id, was_primary == 2 ? was_backup : was_primary) << "slot " << slot;
  }
  // The probe fails: the record stays, and it is asked again later.
  ASSERT_TRUE(Within(10, [&] { return probes_.load() >= 2; }));
  EXPECT_TRUE(Record());
  EXPECT_TRUE(step_->down());
  probe_ok_.store(true);
  ASSERT_TRUE(Within(10, [&] { return !Record(); }));
  ASSERT_TRUE(Within(10, [&] { return !step_->down(); }));
  EXPECT_EQ(step_->returns(), 1u);
  // Failing again soon after: down again.
  ASSERT_TRUE(Within(10, [&] { return Fail() && Record(); }));
  EXPECT_EQ(step_->step_downs(), 2u);
}

TEST_F(DiskStepDownEtcdTest, ABrokenLogStaysDownAndIsNeverProbed) {
  JoinAll();
  broken_.store(true);
  Start();
  ASSERT_TRUE(Within(10, [&] { return Record(); }));
  std::this_thread::sleep_for(std::chrono::milliseconds(600));  // past every hold (not a timing)
  EXPECT_TRUE(Record());
  EXPECT_EQ(probes_.load(), 0);
  EXPECT_TRUE(step_->down());
}

TEST_F(DiskStepDownEtcdTest, ARemovalsRecordIsNeitherReplacedNorDeleted) {
  JoinAll();
  DrainRecord d;
  d.server = 2;
  d.map_epoch = 77;
  std::string v;
  ASSERT_TRUE(d.Encode(&v).ok());
  ASSERT_TRUE(etcd_->Put(addr_.Prefix() + "draining/2", v, leases_[2]).ok());
  EtcdKv before;
  bool found = false;
  ASSERT_TRUE(etcd_->Get(addr_.Prefix() + "draining/2", &found, &before, nullptr).ok());
  probe_ok_.store(true);
  Start();
  ASSERT_TRUE(Within(10, [&] { return Fail() && step_->step_downs() == 1; }));
  ASSERT_TRUE(Within(10, [&] { return !step_->down(); }));
  EXPECT_GE(probes_.load(), 1);
  EtcdKv after;
  ASSERT_TRUE(etcd_->Get(addr_.Prefix() + "draining/2", &found, &after, nullptr).ok());
  ASSERT_TRUE(found);
  EXPECT_EQ(after.mod_revision, before.mod_revision);
}

TEST_F(DiskStepDownEtcdTest, ANewRegistrationGetsTheRecordAgain) {
  JoinAll();
  Start();
  ASSERT_TRUE(Within(10, [&] { return Fail() && Record(); }));
  // Registered again: the old lease (and its record) gone, a new one.
  ASSERT_TRUE(etcd_->RevokeLease(leases_[2]).ok());
  Join(2);
  lease2_.store(leases_[2]);
  int64_t lease = 0;
  ASSERT_TRUE(Within(10, [&] { return Record(&lease) && lease == leases_[2]; }));
  EXPECT_TRUE(step_->down());
}

}  // namespace
}  // namespace rkv::cluster
