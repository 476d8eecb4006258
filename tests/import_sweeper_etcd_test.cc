// SPDX-License-Identifier: Apache-2.0
// ImportSweeper (server/cluster/import_sweeper.h) against the real etcd cluster of
// tests/etcd/etcd_client.sh, with a table, an ownership table and a slot reclaimer but no
// kvserver: this process is server 3 of ReplicatedClusterTest's map (primary of slots 2, 5, ...,
// backup of 1, 4, ..., nothing of 0, 3, 6, ...). Slots made IMPORTING here:
//  - 0, named by a COPY record to server 3: kept while the record is a copy, released (and its
//    entries freed) once the record is FAILED;
//  - 3, named by no record and not by the map: released on the second pass that sees it
//    unchanged (never on the first), its entries freed;
//  - 6, begun again between two passes (a new import of the same slot): not released until
//    it stayed the same for a whole period;
//  - 2, which the map gives this server: kept (Apply gives it its role), its entries too.
// A record or a map etcd holds that does not decode, or no map: an error, and no slot changes.
// MIGRATE_BEGIN's check (server/cluster/import_check.h): only the COPY record to this server,
// with its nonce, for slots it names.
#include <gtest/gtest.h>

#include <memory>
#include <string>
#include <vector>

#include "common/cluster/migration_record.h"
#include "common/cluster/ownership_word.h"
#include "common/table/layout.h"
#include "server/cluster/import_check.h"
#include "server/cluster/import_sweeper.h"
#include "server/store/table.h"
#include "tests/etcd/replicated_cluster_test.h"

namespace rkv::cluster {
namespace {

class ImportSweeperEtcdTest : public ReplicatedClusterTest {
 protected:
  void SetUp() override {
    ReplicatedClusterTest::SetUp();
    if (HasFatalFailure()) return;
    ASSERT_TRUE(layout::ComputeGeometry(mem_.size(), 0, 0.25, 7, &geo_));
    table_ = std::make_unique<Table>(mem_.data(), geo_);
    owners_ = std::make_unique<OwnershipTable>(words_, kSlots, 99);
    for (int i = 0; i < 800; ++i) {
      const std::string k = "key-" + std::to_string(i);
      ASSERT_TRUE(table_->Put(k, "v").ok());
    }
    reclaimer_ = std::make_unique<SlotReclaimer>(table_.get(), owners_.get());
    for (uint32_t slot : {0u, 2u, 3u, 6u}) Import(slot);
  }
  void Import(uint32_t slot) {
    OwnershipTable::ImportBegun begun;
    ASSERT_TRUE(owners_->BeginImports({slot}, {owners_->Word(slot)}, 100 + slot, &begun));
  }
  ImportSweeperOptions Options(EtcdClient* etcd) {
    ImportSweeperOptions o;
    o.etcd = etcd;
    o.cluster = addr_;
    o.my_id = 3;
    o.owners = owners_.get();
    o.reclaimer = reclaimer_.get();
    return o;
  }
  MigrationRecord PutRecord(MigrationRecord::State st) {
    MigrationRecord r;
    r.state = st;
    r.kind = MigrationRecord::kAddReplica;
    r.from_id = 1;
    r.to_id = 3;
    r.slots = {0, 4};
    r.nonce = 0x1122334455667788ull;
    EXPECT_TRUE(etcd_->Put(addr_.Prefix() + "migration", r.Encode()).ok());
    return r;
  }
  SlotState State(uint32_t slot) { return WordState(owners_->Word(slot)); }
  size_t Entries(uint32_t slot) {
    size_t n = 0;
    std::string v;
    for (int i = 0; i < 800; ++i) {
      const std::string k = "key-" + std::to_string(i);
      if (owners_->SlotOf(k) == slot && table_->Get(k, &v).ok()) ++n;
    }
    return n;
  }

  std::vector<uint8_t> mem_ = std::vector<uint8_t>(4 << 20);
  layout::Geometry geo_;
  uint64_t words_[kSlots] = {};
  std::unique_ptr<Table> table_;
  std::unique_ptr<OwnershipTable> owners_;
  std::unique_ptr<SlotReclaimer> reclaimer_;
};

TEST_F(ImportSweeperEtcdTest, ReleasesOnlyImportsThatCanNoLongerComplete) {
  PutRecord(MigrationRecord::kCopy);
  ImportSweeper sweeper(Options(etcd_.get()));
  size_t n = 9;
  ASSERT_TRUE(sweeper.SweepOnce(&n).ok());
  EXPECT_EQ(n, 0u);  // first sight of every import
  Import(6);         // a new import of slot 6
  ASSERT_TRUE(sweeper.SweepOnce(&n).ok());
  EXPECT_EQ(n, 1u);
  EXPECT_EQ(State(3), SlotState::kNotOwned);
  for (uint32_t slot : {0u, 2u, 6u}) EXPECT_EQ(State(slot), SlotState::kImporting) << slot;
  ASSERT_GT(Entries(3), 0u);
  reclaimer_->ReclaimNow();
  EXPECT_EQ(Entries(3), 0u);

  PutRecord(MigrationRecord::kFailed);
  ASSERT_TRUE(sweeper.SweepOnce(&n).ok());
  EXPECT_EQ(n, 2u);  // 0 (its copy failed) and 6 (unchanged since the last pass)
  EXPECT_EQ(State(0), SlotState::kNotOwned);
  EXPECT_EQ(State(6), SlotState::kNotOwned);
  EXPECT_EQ(State(2), SlotState::kImporting);  // the map gives it to this server
  const size_t kept = Entries(2);
  reclaimer_->ReclaimNow();
  EXPECT_EQ(Entries(0), 0u);
  EXPECT_EQ(Entries(6), 0u);
  EXPECT_EQ(Entries(2), kept);
  EXPECT_EQ(sweeper.released(), 3u);
  ASSERT_TRUE(sweeper.SweepOnce(&n).ok());
  EXPECT_EQ(n, 0u);
}

TEST_F(ImportSweeperEtcdTest, AnUnreadableRecordOrMapChangesNothing) {
  ASSERT_TRUE(etcd_->Put(addr_.Prefix() + "migration", "not a record").ok());
  ImportSweeper sweeper(Options(etcd_.get()));
  size_t n = 0;
  ASSERT_TRUE(sweeper.SweepOnce(&n).ok());  // first sight: etcd is not read
  EXPECT_FALSE(sweeper.SweepOnce(&n).ok());
  EXPECT_EQ(n, 0u);
  ASSERT_TRUE(etcd_->Delete(addr_.Prefix() + "migration").ok());
  ASSERT_TRUE(etcd_->Put(addr_.Prefix() + "map", "not a map").ok());
  EXPECT_FALSE(sweeper.SweepOnce(&n).ok());
  ASSERT_TRUE(etcd_->Delete(addr_.Prefix() + "map").ok());
  EXPECT_FALSE(sweeper.SweepOnce(&n).ok());  // no map at all
  EXPECT_EQ(sweeper.released(), 0u);
  for (uint32_t slot : {0u, 2u, 3u, 6u}) EXPECT_EQ(State(slot), SlotState::kImporting) << slot;
}

TEST_F(ImportSweeperEtcdTest, ABeginIsTakenOnlyForTheCopyEtcdHolds) {
  const uint64_t nonce = PutRecord(MigrationRecord::kCopy).nonce;
  EXPECT_TRUE(CheckImportRecord(etcd_.get(), addr_, 3, nonce, {0, 4}).ok());
  EXPECT_TRUE(CheckImportRecord(etcd_.get(), addr_, 3, nonce, {4}).ok());
  EXPECT_EQ(CheckImportRecord(etcd_.get(), addr_, 3, nonce + 1, {0}).code(),
            Code::kInvalidArgument);  // another migration's (or a forged) nonce
  EXPECT_EQ(CheckImportRecord(etcd_.get(), addr_, 2, nonce, {0}).code(),
            Code::kInvalidArgument);  // a copy to another server
  EXPECT_EQ(CheckImportRecord(etcd_.get(), addr_, 3, nonce, {0, 5}).code(),
            Code::kInvalidArgument);  // a slot the record does not copy
  EXPECT_EQ(CheckImportRecord(etcd_.get(), addr_, 0, nonce, {0}).code(), Code::kUnavailable);
  PutRecord(MigrationRecord::kFailed);  // cancelled: its source's late BEGIN is refused
  EXPECT_EQ(CheckImportRecord(etcd_.get(), addr_, 3, nonce, {0}).code(), Code::kInvalidArgument);
  ASSERT_TRUE(etcd_->Put(addr_.Prefix() + "migration", "not a record").ok());
  EXPECT_EQ(CheckImportRecord(etcd_.get(), addr_, 3, nonce, {0}).code(), Code::kInvalidArgument);
  ASSERT_TRUE(etcd_->Delete(addr_.Prefix() + "migration").ok());
  EXPECT_EQ(CheckImportRecord(etcd_.get(), addr_, 3, nonce, {0}).code(), Code::kInvalidArgument);
}

}  // namespace
}  // namespace rkv::cluster
