// SPDX-License-Identifier: Apache-2.0
// A backup applying log ring records (RpcExecutor::ApplyRingRecord through a RingDrainer;
// docs/replication-rings.md, "The drainer"): a record of the slot's primary is applied and
// numbered, a resend is taken once; a record naming another sender than its ring's writer, one
// of an epoch this backup has not applied (rule 1), one of a number already used, and one of a
// slot that is not a backup here are refused and revoke the writer's rings; a record past the
// next number waits for its predecessor; one the table has no room for is kept (never dropped)
// and applied once room is made; a two-sided REPLICATE from the writer first drains its rings.
#include <gtest/gtest.h>

#include <chrono>
#include <cstring>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "common/cluster/ring_tail.h"
#include "common/table/layout.h"
#include "common/wire.h"
#include "server/cluster/ring_drainer.h"
#include "server/rpc_executor.h"
#include "server/store/table.h"

namespace rkv {
namespace {

using cluster::OwnerWord;
using cluster::SlotState;

constexpr uint32_t kSlots = 16;
constexpr uint32_t kPrimary = 1;
constexpr uint64_t kEpoch = 5;

class RingApplyTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_TRUE(layout::ComputeGeometry(mem_.size(), 0, 0.25, 1234, &geo_));
    table_ = std::make_unique<Table>(mem_.data(), geo_);
    owners_ = std::make_unique<cluster::OwnershipTable>(words_, kSlots, 99);
    owners_->SetRouting(kEpoch, std::vector<uint32_t>(kSlots, kPrimary));
    for (uint32_t slot = 0; slot < kSlots; ++slot) {  // as ClusterNode::Apply makes a backup
      owners_->SetSequence(slot, cluster::OwnershipTable::kSequenceUnset);
      owners_->Set(slot, OwnerWord(kEpoch, SlotState::kBackup));
    }
    exec_ = std::make_unique<RpcExecutor>(table_.get(), &counters_, RegionInfo{},
                                          [] { return std::string(); });
    exec_->SetOwnership(owners_.get());
    drainer_ = std::make_unique<cluster::RingDrainer>(
        [this](const cluster::ReplicaRing& r, const cluster::RingRecordView& v, bool last_try) {
          return exec_->ApplyRingRecord(r, v, last_try);
        });
    exec_->SetRingDrainer(drainer_.get());
    drainer_->EndMap(kEpoch, true);
  }
  // A ring of `writer` given to the drainer (its revocations counted in *revoked).
  cluster::ReplicaRing* AddRing(uint32_t writer = kPrimary, int* revoked = nullptr) {
    auto ring = std::make_unique<cluster::ReplicaRing>(writer, kEpoch, 64 << 10);
    if (revoked != nullptr)
      ring->set_revoker([revoked] {
        ++*revoked;
        return true;
      });
    cluster::ReplicaRing* raw = ring.get();
    tails_.emplace_back(raw, cluster::RingTail(raw->size()));
    uint64_t id = 0;
    EXPECT_TRUE(drainer_->Add(std::move(ring), &id).ok());
    return raw;
  }
  static wire::ReplicateHeader Header(uint64_t sequence, std::string_view key,
                                      std::string_view value, uint64_t epoch = kEpoch,
                                      uint32_t sender = kPrimary) {
    wire::ReplicateHeader h{};
    h.epoch = epoch;
    h.sequence = sequence;
    h.sender_id = sender;
    h.kind = value.empty() ? wire::kReplicateDelete : wire::kReplicatePut;
    h.digest = wire::ReplicateDigest(h.kind, key, value);
    return h;
  }
  // Places a record in `ring` as its writer's NIC would.
  void Place(cluster::ReplicaRing* ring, const wire::ReplicateHeader& h, std::string_view key,
             std::string_view value) {
    for (auto& [r, tail] : tails_) {
      if (r != ring) continue;
      const size_t bytes = cluster::RingRecordBytes(key.size(), value.size());
      cluster::RingTail::Placement p;
      const auto* control = reinterpret_cast<const cluster::RingControl*>(r->data());
      ASSERT_TRUE(tail.SeeConsumed(control->consumed));
      ASSERT_TRUE(tail.Plan(bytes, &p));
      if (p.wrap_at >= 0) cluster::EncodeRingWrap(p.wrap_index, r->data() + p.wrap_at);
      cluster::EncodeRingRecord(p.index, ++order_, h, key, value, r->data() + p.at);
      tail.Commit(bytes, p);
      return;
    }
    FAIL() << "no such ring";
  }
  std::string KeyOf(uint32_t slot, int n = 0) {
    for (int i = 0;; ++i) {
      std::string k = "key-" + std::to_string(i);
      if (owners_->SlotOf(k) == slot && n-- == 0) return k;
    }
  }
  std::string Value(const std::string& key) {
    std::string v;
    return table_->Get(key, &v).ok() ? v : "<none>";
  }

  std::vector<uint8_t> mem_ = std::vector<uint8_t>(4 << 20);
  layout::Geometry geo_;
  std::unique_ptr<Table> table_;
  uint64_t words_[kSlots] = {};
  std::unique_ptr<cluster::OwnershipTable> owners_;
  ServerCounters counters_;
  std::unique_ptr<RpcExecutor> exec_;
  std::unique_ptr<cluster::RingDrainer> drainer_;
  std::vector<std::pair<cluster::ReplicaRing*, cluster::RingTail>> tails_;
  uint64_t order_ = 0;
};

TEST_F(RingApplyTest, APrimarysRecordIsAppliedAndAResendTakenOnce) {
  cluster::ReplicaRing* ring = AddRing();
  const std::string k = KeyOf(3);
  Place(ring, Header(7, k, "v7"), k, "v7");  // a new backup takes the first number it gets
  Place(ring, Header(8, k, "v8"), k, "v8");
  Place(ring, Header(8, k, "v8"), k, "v8");  // a resend (its WRITE's completion was lost)
  EXPECT_EQ(drainer_->Drain(), 3u);
  EXPECT_EQ(Value(k), "v8");
  EXPECT_EQ(owners_->Sequence(3), 8u);
  EXPECT_EQ(counters_.repl_applied.load(), 2u);
  EXPECT_EQ(counters_.repl_duplicates.load(), 1u);
  EXPECT_EQ(drainer_->refused(), 0u);
}

TEST_F(RingApplyTest, RecordsItsWriterCouldNotValidlyWriteAreRefused) {
  struct Case {
    const char* what;
    uint64_t epoch;
    uint32_t sender;
    uint32_t ring_writer;
    SlotState state;
  };
  const Case cases[] = {
      {"another sender than the ring's writer", kEpoch, 2, kPrimary, SlotState::kBackup},
      {"not the slot's primary", kEpoch, 2, 2, SlotState::kBackup},
      {"an epoch this backup has not applied", kEpoch + 1, kPrimary, kPrimary, SlotState::kBackup},
      {"an epoch older than the backup's role", kEpoch - 1, kPrimary, kPrimary, SlotState::kBackup},
      {"a slot that is not a backup here", kEpoch, kPrimary, kPrimary, SlotState::kNotOwned},
      // Promoted while the record waited (e.g. it had no room): the replica went on without.
      {"a slot promoted meanwhile", kEpoch, kPrimary, kPrimary, SlotState::kPromoting},
      // A record naming another sender for a slot this server serves or does not hold: no
      // replica that a promotion could serve, so no mark (the coordinator would demote a live
      // primary on a forgery's word).
      {"another sender, a slot served here", kEpoch, 2, kPrimary, SlotState::kOwned},
      {"another sender, a slot not held here", kEpoch, 2, kPrimary, SlotState::kNotOwned},
      {"its own sender, a slot served here", kEpoch, kPrimary, kPrimary, SlotState::kOwned},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.what);
    owners_->Set(4, OwnerWord(kEpoch, c.state));
    int revoked = 0;
    cluster::ReplicaRing* ring = AddRing(c.ring_writer, &revoked);
    const std::string k = KeyOf(4);
    Place(ring, Header(1, k, "x", c.epoch, c.sender), k, "x");
    const uint64_t refused = drainer_->refused();
    drainer_->Drain();
    EXPECT_EQ(drainer_->refused(), refused + 1);
    EXPECT_EQ(revoked, 1);
    EXPECT_EQ(Value(k), "<none>");
    EXPECT_EQ(drainer_->rings(), 0u);  // revoked and empty: freed
    // Its writer was told it was placed: this replica may lack an acknowledged write (a slot
    // released here holds no replica to mark; one served here is marked by no forgery).
    EXPECT_EQ(owners_->RingLoss(4),
              c.state == SlotState::kBackup || c.state == SlotState::kPromoting);
    owners_->ClearRingLoss(4);
    tails_.clear();
  }
}

// A token holder's forged REPLICATE took the primary's next number here; the primary's own
// write with that number then arrives through the ring, already acknowledged. It is refused,
// and the slot's replica here is marked: never silently short of it.
std::vector<uint8_t> Replicate(const wire::ReplicateHeader& h, const std::string& k,
                               const std::string& value) {
  std::string key(sizeof h, '\0');
  std::memcpy(key.data(), &h, sizeof h);
  key += k;
  std::vector<uint8_t> req(4096);
  req.resize(wire::EncodeRequest(wire::Op::kReplicate, 1, key, value, req.data(), req.size()));
  return req;
}

TEST_F(RingApplyTest, ANumberAlreadyUsedIsRefusedAndMarksTheSlot) {
  cluster::ReplicaRing* ring = AddRing();
  const std::string k = KeyOf(5);
  Place(ring, Header(3, k, "a"), k, "a");
  Place(ring, Header(3, k, "b"), k, "b");  // the same number, another write
  drainer_->Drain();
  EXPECT_EQ(Value(k), "a");
  EXPECT_EQ(drainer_->refused(), 1u);
  EXPECT_TRUE(owners_->RingLoss(5));
  // The primary's next write, two-sided now (its rings were revoked), is refused: it fails
  // visibly, where applying it would hide the missing one.
  const std::vector<uint8_t> req = Replicate(Header(4, k, "c"), k, "c");
  std::vector<uint8_t> out(4096);
  bool malformed = false;
  const size_t n =
      exec_->Execute(nullptr, 0, 0, req.data(), req.size(), out.data(), out.size(), &malformed);
  wire::Reply reply;
  ASSERT_TRUE(wire::DecodeReply(out.data(), n, &reply).ok());
  EXPECT_EQ(reply.status, Code::kInvalidArgument);
  EXPECT_NE(std::string(reply.payload).find("may lack an acknowledged write"), std::string::npos);
  EXPECT_EQ(Value(k), "a");
}

TEST_F(RingApplyTest, ARecordPastTheNextNumberWaitsForItsPredecessor) {
  cluster::ReplicaRing* r1 = AddRing();
  cluster::ReplicaRing* r2 = AddRing();
  const std::string k = KeyOf(6);
  Place(r1, Header(1, k, "one"), k, "one");
  ASSERT_EQ(drainer_->Drain(), 1u);
  // Number 3 is placed before 2 is (not what a correct writer does: it waits for 2's WRITE).
  Place(r1, Header(3, k, "three"), k, "three");
  EXPECT_EQ(drainer_->Drain(), 0u);
  EXPECT_EQ(Value(k), "one");
  Place(r2, Header(2, k, "two"), k, "two");
  EXPECT_EQ(drainer_->Drain(), 2u);
  EXPECT_EQ(Value(k), "three");
  EXPECT_EQ(drainer_->refused(), 0u);
  EXPECT_EQ(drainer_->waited(), 1u);
  // A wait is not a refusal (ctest replicas: repl_refused_sequence stays 0).
  EXPECT_EQ(counters_.repl_refused_sequence.load(), 0u);
  EXPECT_FALSE(owners_->RingLoss(6));
}

// A record whose predecessor never comes waits until the stuck-head bound, then is refused on
// its last try: the slot is marked (its writer was told it was placed) and counted.
TEST_F(RingApplyTest, ARecordThatWaitsTooLongMarksTheSlot) {
  drainer_->SetStuckHeadMs(1000);
  cluster::ReplicaRing* ring = AddRing();
  const std::string k = KeyOf(7);
  Place(ring, Header(1, k, "one"), k, "one");
  Place(ring, Header(3, k, "three"), k, "three");
  EXPECT_EQ(drainer_->Drain(), 1u);
  EXPECT_FALSE(owners_->RingLoss(7));
  std::this_thread::sleep_for(std::chrono::milliseconds(1500));
  EXPECT_EQ(drainer_->Drain(), 1u);  // consumed as refused
  EXPECT_EQ(drainer_->refused(), 1u);
  EXPECT_TRUE(owners_->RingLoss(7));
  EXPECT_EQ(counters_.repl_refused_sequence.load(), 1u);
  EXPECT_EQ(Value(k), "one");
}

TEST_F(RingApplyTest, ARecordWithoutRoomMarksTheSlot) {
  // Fill the table's heap with one slot's values, as its primary's writes.
  cluster::ReplicaRing* ring = AddRing();
  std::vector<std::string> keys;
  const std::string big(8000, 'b');
  for (int i = 0;; ++i) {
    const std::string k = KeyOf(7, i);
    if (!table_->Put(k, big).ok()) break;
    keys.push_back(k);
    ASSERT_LT(i, 10000);
  }
  ASSERT_FALSE(keys.empty());
  int revoked = 0;
  ring->set_revoker([&revoked] {
    ++revoked;
    return true;
  });
  const std::string k = KeyOf(8);
  Place(ring, Header(1, k, big), k, big);
  drainer_->Drain();
  // Acknowledged already, and no room here: this replica of slot 8 is short of it, marked so
  // (no promotion to OWNED, its primary's next writes refused: they fail visibly and report
  // this backup), and the writer's writes go two-sided.
  EXPECT_EQ(drainer_->refused(), 1u);
  EXPECT_TRUE(owners_->RingLoss(8));
  EXPECT_EQ(revoked, 1);
  EXPECT_EQ(drainer_->rings(), 0u);
  EXPECT_EQ(Value(k), "<none>");
  EXPECT_FALSE(owners_->RingLoss(7));
}

TEST_F(RingApplyTest, ATwoSidedReplicateFromTheWriterDrainsItsRingsFirst) {
  cluster::ReplicaRing* ring = AddRing();
  const std::string k = KeyOf(9);
  Place(ring, Header(1, k, "ring"), k, "ring");
  // Write 2 arrives two-sided (the ring was full): without the drain it would find a gap.
  std::string key(sizeof(wire::ReplicateHeader), '\0');
  const wire::ReplicateHeader h = Header(2, k, "sent");
  std::memcpy(key.data(), &h, sizeof h);
  key += k;
  std::vector<uint8_t> req(4096), out(4096);
  const size_t len =
      wire::EncodeRequest(wire::Op::kReplicate, 1, key, "sent", req.data(), req.size());
  ASSERT_GT(len, 0u);
  bool malformed = false;
  const size_t n =
      exec_->Execute(nullptr, 0, 0, req.data(), len, out.data(), out.size(), &malformed);
  wire::Reply reply;
  ASSERT_TRUE(wire::DecodeReply(out.data(), n, &reply).ok());
  EXPECT_EQ(reply.status, Code::kOk);
  EXPECT_EQ(Value(k), "sent");
  EXPECT_EQ(owners_->Sequence(9), 2u);
}

}  // namespace
}  // namespace rkv
