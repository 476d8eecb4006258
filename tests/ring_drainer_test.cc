// SPDX-License-Identifier: Apache-2.0
// ReplicaRing and RingDrainer (server/cluster/): a backup's log rings, with records placed in
// plain memory where a primary's RingTail (common/cluster/ring_tail.h) plans them. Records are
// applied in ring order over several laps (wrap records and implicit wraps), a record still being
// placed waits, records of one slot spread over two rings are applied in sequence order in one
// Drain, a refused record revokes its writer's rings, a revoked ring is drained to its end and
// freed, the thread drains on its own, the ring count is bounded (in all and per writer), and
// without headroom no ring is granted and those held are revoked.
#include "server/cluster/ring_drainer.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstring>
#include <map>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "common/cluster/ring_tail.h"

namespace rkv::cluster {
namespace {

constexpr size_t kRingBytes = kRingControlBytes + 1024;
std::atomic<uint64_t> next_order{1};  // the writer's posting order, across its rings

// Places records as the primary would: at the tail, wrapping as RingLayout says, only into
// room the control block says was consumed.
class FakeWriter {
 public:
  explicit FakeWriter(ReplicaRing* ring) : ring_(ring), tail_(ring->size()) {}
  // False: no room now.
  bool Place(uint64_t sequence, const std::string& key, const std::string& value,
             size_t placed_bytes = SIZE_MAX, uint32_t sender = 3) {
    const auto* control = reinterpret_cast<const RingControl*>(ring_->data());
    EXPECT_TRUE(tail_.SeeConsumed(__atomic_load_n(&control->consumed, __ATOMIC_ACQUIRE)));
    const size_t bytes = RingRecordBytes(key.size(), value.size());
    RingTail::Placement p;
    if (!tail_.Plan(bytes, &p)) return false;
    if (p.wrap_at >= 0) EncodeRingWrap(p.wrap_index, ring_->data() + p.wrap_at);
    if (p.wrap_at >= 0) ++wrap_records;
    if (p.wrap_at < 0 && p.at == kRingControlBytes && p.index > 1) ++implicit_wraps;
    wire::ReplicateHeader h{};
    h.epoch = 1;
    h.sequence = sequence;
    h.sender_id = sender;
    h.kind = wire::kReplicatePut;
    h.digest = wire::ReplicateDigest(h.kind, key, value);
    std::string rec(bytes, '\0');
    const uint64_t order = next_order.fetch_add(1);
    EncodeRingRecord(p.index, order, h, key, value, reinterpret_cast<uint8_t*>(rec.data()));
    std::memcpy(ring_->data() + p.at, rec.data(), std::min(placed_bytes, bytes));
    tail_.Commit(bytes, p);
    last_at_ = p.at;
    last_ = rec;
    return true;
  }
  // Places the rest of the last record (it was placed in part).
  void Complete() { std::memcpy(ring_->data() + last_at_, last_.data(), last_.size()); }
  int wrap_records = 0, implicit_wraps = 0;

 private:
  ReplicaRing* ring_;
  RingTail tail_;
  size_t last_at_ = 0;
  std::string last_;
};

// Applies per key "slot" (the key's first byte) in sequence order, as the backup's checks do.
struct Applier {
  std::map<char, uint64_t> next;  // a slot's next sequence (1 at first)
  std::vector<std::string> applied;
  std::string refuse_key;
  bool take_any_first = false;  // a new backup: its first number is whatever comes first
  RingDrainer::Outcome operator()(const ReplicaRing&, const RingRecordView& v, bool) {
    const std::string key(v.key);
    if (key == refuse_key) return RingDrainer::Outcome::kRefused;
    uint64_t& n = next.try_emplace(key[0], take_any_first ? v.header.sequence : 1).first->second;
    if (v.header.sequence != n) return RingDrainer::Outcome::kWait;
    ++n;
    applied.push_back(key + "=" + std::string(v.value));
    return RingDrainer::Outcome::kApplied;
  }
};

std::unique_ptr<ReplicaRing> NewRing(uint32_t writer, int* revoked = nullptr) {
  auto r = std::make_unique<ReplicaRing>(writer, 1, kRingBytes);
  if (revoked != nullptr)
    r->set_revoker([revoked] {
      ++*revoked;
      return true;
    });
  return r;
}

// An applier, a drainer over it, and rings added with a writer each.
struct Rig {
  Applier a;
  RingDrainer d{
      [this](const ReplicaRing& r, const RingRecordView& v, bool) { return a(r, v, false); }};
  Rig() { d.EndMap(1, true); }
  std::vector<std::unique_ptr<FakeWriter>> writers;
  uint64_t last_id = 0;
  // A ring of `writer` given to the drainer; its FakeWriter (valid while the ring lives).
  FakeWriter* AddRing(uint32_t writer = 3, int* revoked = nullptr) {
    auto ring = NewRing(writer, revoked);
    writers.push_back(std::make_unique<FakeWriter>(ring.get()));
    EXPECT_TRUE(d.Add(std::move(ring), &last_id).ok());
    return writers.back().get();
  }
};

TEST(RingDrainer, AppliesInOrderOverManyLaps) {
  Applier a;
  RingDrainer d(
      [&a](const ReplicaRing& r, const RingRecordView& v, bool) { return a(r, v, false); });
  d.EndMap(1, true);  // rings may be granted
  auto ring = NewRing(3);
  ReplicaRing* raw = ring.get();
  uint64_t id = 0;
  ASSERT_TRUE(d.Add(std::move(ring), &id).ok());
  FakeWriter w(raw);
  std::vector<std::string> want;
  uint64_t seq = 1;
  // Values of varied sizes so that wraps fall at varied offsets (records and implicit wraps).
  for (int i = 0; i < 200; ++i) {
    const std::string key = "a" + std::to_string(i);
    const std::string value(size_t(i * 7 % 53), char('a' + i % 26));
    while (!w.Place(seq, key, value)) ASSERT_GT(d.Drain(), 0u) << "no room and nothing drained";
    ++seq;
    want.push_back(key + "=" + value);
    if (i % 3 == 0) d.Drain();
  }
  d.Drain();
  EXPECT_EQ(a.applied, want);
  EXPECT_EQ(d.applied(), 200u);
  const auto* control = reinterpret_cast<const RingControl*>(raw->data());
  EXPECT_EQ(control->consumed_index, raw->consumed_index());
  EXPECT_GT(control->consumed, 1024u * 5);  // several laps
  EXPECT_GT(w.wrap_records, 0);             // both kinds of wrap
  EXPECT_GT(w.implicit_wraps, 0);
}

TEST(RingDrainer, ARecordStillBeingPlacedWaits) {
  Applier a;
  RingDrainer d(
      [&a](const ReplicaRing& r, const RingRecordView& v, bool) { return a(r, v, false); });
  d.EndMap(1, true);  // rings may be granted
  auto ring = NewRing(3);
  ReplicaRing* raw = ring.get();
  uint64_t id = 0;
  ASSERT_TRUE(d.Add(std::move(ring), &id).ok());
  FakeWriter w(raw);
  ASSERT_TRUE(w.Place(1, "a1", std::string(50, 'x'), 70));
  EXPECT_EQ(d.Drain(), 0u);
  EXPECT_TRUE(a.applied.empty());
  w.Complete();
  EXPECT_EQ(d.Drain(), 1u);
  EXPECT_EQ(a.applied.size(), 1u);
}

TEST(RingDrainer, ASlotsRecordsOverTwoRingsApplyInSequenceOrder) {
  Rig rig;
  FakeWriter* w1 = rig.AddRing();
  FakeWriter* w2 = rig.AddRing();
  // Ring 1 (looked at first) holds slot a's 2 and 4; ring 2 its 1 and 3, and slot b's 1.
  ASSERT_TRUE(w2->Place(1, "a-1", "v"));
  ASSERT_TRUE(w1->Place(2, "a-2", "v"));
  ASSERT_TRUE(w2->Place(3, "a-3", "v"));
  ASSERT_TRUE(w2->Place(1, "b-1", "v"));
  ASSERT_TRUE(w1->Place(4, "a-4", "v"));
  EXPECT_EQ(rig.d.Drain(), 5u);
  EXPECT_EQ(rig.a.applied, (std::vector<std::string>{"a-1=v", "a-2=v", "a-3=v", "b-1=v", "a-4=v"}));
}

TEST(RingDrainer, ABackupThatTakesAnyFirstNumberStillGetsTheFirstOne) {
  // Ring 1 is looked at first and holds the later write: without the posting order the new
  // backup would start at 8 and refuse 7.
  Rig rig;
  rig.a.take_any_first = true;
  FakeWriter* w1 = rig.AddRing();
  FakeWriter* w2 = rig.AddRing();
  ASSERT_TRUE(w2->Place(7, "a-7", "v"));
  ASSERT_TRUE(w1->Place(8, "a-8", "v"));
  EXPECT_EQ(rig.d.Drain(), 2u);
  EXPECT_EQ(rig.a.applied, (std::vector<std::string>{"a-7=v", "a-8=v"}));
}

TEST(RingDrainer, ARefusedRecordRevokesItsWritersRings) {
  Rig rig;
  rig.a.refuse_key = "a-2";
  int revoked3 = 0, revoked4 = 0, revoked3b = 0;
  FakeWriter* w1 = rig.AddRing(3, &revoked3);
  FakeWriter* w2 = rig.AddRing(3, &revoked3b);
  FakeWriter* w3 = rig.AddRing(4, &revoked4);
  ASSERT_TRUE(w1->Place(1, "a-1", "v"));
  ASSERT_TRUE(w1->Place(2, "a-2", "v"));
  ASSERT_TRUE(w2->Place(2, "b-2", "v", 30));           // waits, and is never completed
  ASSERT_TRUE(w3->Place(2, "c-2", "v", SIZE_MAX, 4));  // waits for its 1
  rig.d.Drain();
  EXPECT_EQ(rig.d.refused(), 1u);
  EXPECT_EQ(revoked3, 1);
  EXPECT_EQ(revoked3b, 1);
  EXPECT_EQ(revoked4, 0);  // another writer's ring stays
  // Writer 3's rings are revoked and hold nothing complete: freed.
  EXPECT_EQ(rig.d.rings(), 1u);
  EXPECT_FALSE(rig.d.HasRecords(3));
  EXPECT_TRUE(rig.d.HasRecords(4));
}

TEST(RingDrainer, ARevokedRingIsDrainedToItsEndThenFreed) {
  Rig rig;
  int revoked = 0;
  FakeWriter* w = rig.AddRing(3, &revoked);
  const uint64_t id = rig.last_id;
  ASSERT_TRUE(w->Place(1, "a-1", "v"));
  ASSERT_TRUE(w->Place(2, "a-2", "v"));
  ASSERT_TRUE(w->Place(3, "a-3", "v", 16));  // cut short: its WRITE failed
  rig.d.RevokeRing(id);
  EXPECT_EQ(revoked, 1);
  EXPECT_EQ(rig.a.applied, (std::vector<std::string>{"a-1=v", "a-2=v"}));
  EXPECT_EQ(rig.d.rings(), 0u);
  rig.d.RevokeRing(id);  // gone: ignored
  rig.d.RevokeWriters({3});
  EXPECT_EQ(revoked, 1);
}

TEST(RingDrainer, RevokingAWriterFirstDrainsWhatWasPlaced) {
  Rig rig;
  int revoked = 0;
  FakeWriter* w = rig.AddRing(3, &revoked);
  for (uint64_t s = 1; s <= 5; ++s) ASSERT_TRUE(w->Place(s, "a-" + std::to_string(s), "v"));
  rig.d.RevokeWriters({3});
  EXPECT_EQ(revoked, 1);
  EXPECT_EQ(rig.a.applied.size(), 5u);
  EXPECT_EQ(rig.d.rings(), 0u);
}

TEST(RingDrainer, TheThreadDrainsOnItsOwn) {
  std::mutex mu;
  Applier a;
  RingDrainer d([&](const ReplicaRing& r, const RingRecordView& v, bool) {
    std::lock_guard<std::mutex> l(mu);
    return a(r, v, false);
  });
  d.EndMap(1, true);  // rings may be granted
  auto ring = NewRing(3);
  FakeWriter w(ring.get());
  uint64_t id = 0;
  ASSERT_TRUE(d.Add(std::move(ring), &id).ok());
  d.Start();
  for (uint64_t s = 1; s <= 100; ++s) {
    // The writer waits for room the thread frees (up to 10 s: a bound, not a timing check).
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
    while (!w.Place(s, "a-" + std::to_string(s), std::string(40, 'v'))) {
      ASSERT_LT(std::chrono::steady_clock::now(), deadline);
      std::this_thread::sleep_for(std::chrono::microseconds(100));
    }
  }
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  while (d.applied() < 100 && std::chrono::steady_clock::now() < deadline)
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  d.Stop();
  EXPECT_EQ(d.applied(), 100u);
}

TEST(RingDrainer, AMalformedCompleteHeadRevokesItsWriter) {
  Applier a;
  RingDrainer d(
      [&a](const ReplicaRing& r, const RingRecordView& v, bool) { return a(r, v, false); });
  d.EndMap(1, true);  // rings may be granted
  int revoked = 0, revoked_other = 0;
  auto ring = NewRing(3, &revoked), other = NewRing(3, &revoked_other);
  ReplicaRing* raw = ring.get();
  FakeWriter w(other.get());
  uint64_t id = 0;
  ASSERT_TRUE(d.Add(std::move(ring), &id).ok());
  ASSERT_TRUE(d.Add(std::move(other), &id).ok());
  ASSERT_TRUE(w.Place(1, "b-1", "v"));  // the writer's other ring: read to its end
  // A complete record (its checksum holds) numbered 5 where the ring's first is due.
  wire::ReplicateHeader h{};
  h.epoch = 1;
  h.sequence = 1;
  h.sender_id = 3;
  h.kind = wire::kReplicatePut;
  h.digest = wire::ReplicateDigest(h.kind, "a-1", "v");
  EncodeRingRecord(5, 1, h, "a-1", "v", raw->data() + kRingControlBytes);
  d.Drain();
  EXPECT_EQ(d.refused(), 1u);
  EXPECT_EQ(revoked, 1);
  EXPECT_EQ(revoked_other, 1);
  EXPECT_EQ(a.applied, (std::vector<std::string>{"b-1=v"}));
  EXPECT_EQ(d.rings(), 0u);
}

TEST(RingDrainer, NoRingIsAddedWhileAMapIsAppliedOrGrantsAreOff) {
  RingDrainer d([](const ReplicaRing&, const RingRecordView&, bool) {
    return RingDrainer::Outcome::kApplied;
  });
  uint64_t id = 0, epoch = 0;
  EXPECT_EQ(d.Add(NewRing(3), &id).code(), Code::kUnavailable);  // no map applied yet
  d.EndMap(7, true);
  auto ring = NewRing(3);
  ReplicaRing* raw = ring.get();
  ASSERT_TRUE(d.Add(std::move(ring), &id, &epoch).ok());
  EXPECT_EQ(epoch, 7u);  // the grant's epoch, also in the control block
  const auto* control = reinterpret_cast<const RingControl*>(raw->data());
  EXPECT_EQ(control->applied_epoch, 7u);
  d.BeginMap({});
  EXPECT_EQ(d.Add(NewRing(3), &id).code(), Code::kUnavailable);  // between revocation and end
  d.EndMap(8, true);
  EXPECT_EQ(control->applied_epoch, 8u);  // published in the rings there were
  ASSERT_TRUE(d.Add(NewRing(3), &id, &epoch).ok());
  EXPECT_EQ(epoch, 8u);
  d.BeginMap({});
  d.EndMap(9, false);  // a stale role: no ring
  EXPECT_EQ(d.Add(NewRing(3), &id).code(), Code::kUnavailable);
  d.EndMap(10, true);
  d.Close();  // the server stops
  EXPECT_EQ(d.rings(), 0u);
  EXPECT_EQ(d.Add(NewRing(3), &id).code(), Code::kUnavailable);
}

TEST(RingDrainer, BeginMapRevokesAndDrainsTheWritersNamed) {
  Rig rig;
  int revoked3 = 0, revoked4 = 0;
  FakeWriter* w3 = rig.AddRing(3, &revoked3);
  FakeWriter* w4 = rig.AddRing(4, &revoked4);
  ASSERT_TRUE(w3->Place(1, "a-1", "v"));
  ASSERT_TRUE(w3->Place(3, "a-3", "v"));  // waits for its 2, which never comes
  ASSERT_TRUE(w4->Place(1, "b-1", "v"));
  rig.d.BeginMap({3});
  EXPECT_EQ(revoked3, 1);
  EXPECT_EQ(revoked4, 0);
  EXPECT_EQ(rig.a.applied, (std::vector<std::string>{"a-1=v"}));  // writer 4's not yet: not named
  EXPECT_TRUE(rig.d.HasRevoked(3));  // a record waits in its revoked ring: promotions wait
  EXPECT_TRUE(rig.d.HasRevoked(RingDrainer::kAnyWriter));
  EXPECT_FALSE(rig.d.HasRevoked(4));
  rig.d.EndMap(2, true);
}

TEST(RingDrainer, DestroyedItAppliesNothingMore) {
  int calls = 0;
  int revoked = 0;
  {
    RingDrainer d([&calls](const ReplicaRing&, const RingRecordView&, bool) {
      ++calls;
      return RingDrainer::Outcome::kApplied;
    });
    d.EndMap(1, true);  // rings may be granted
    auto ring = NewRing(3, &revoked);
    FakeWriter w(ring.get());
    uint64_t id = 0;
    ASSERT_TRUE(d.Add(std::move(ring), &id).ok());
    ASSERT_TRUE(w.Place(1, "a-1", "v"));
  }
  EXPECT_EQ(calls, 0);  // the server is stopping: its executor may be gone
  EXPECT_EQ(revoked, 1);
}

TEST(RingDrainer, TheRingCountIsBounded) {
  RingDrainer d([](const ReplicaRing&, const RingRecordView&, bool) {
    return RingDrainer::Outcome::kApplied;
  });
  d.EndMap(1, true);  // rings may be granted
  uint64_t id = 0;
  for (size_t i = 0; i < RingDrainer::kMaxRings; ++i)
    ASSERT_TRUE(d.Add(NewRing(uint32_t(i % 8 + 1)), &id).ok());
  EXPECT_EQ(d.Add(NewRing(9), &id).code(), Code::kBusy);
}

// A head left half placed on an open ring (its writer died mid-WRITE) is taken as malformed
// once it stays so: the writer's rings are revoked, and the revoked ring ends there (that
// record was never acknowledged). Before the limit it waits, as any record being placed.
TEST(RingDrainer, AHeadLeftHalfPlacedRevokesItsWriter) {
  Rig r;
  r.d.SetStuckHeadMs(1000);  // a bound the first looks below stay well within, even under TCG
  int revoked = 0, other_revoked = 0, bystander_revoked = 0;
  FakeWriter* w = r.AddRing(3, &revoked);
  FakeWriter* other = r.AddRing(3, &other_revoked);
  FakeWriter* bystander = r.AddRing(4, &bystander_revoked);
  ASSERT_TRUE(w->Place(1, "a-1", "v"));
  ASSERT_TRUE(w->Place(2, "a-2", std::string(50, 'v'), 70));  // 70 bytes placed of it
  ASSERT_TRUE(other->Place(1, "b-1", "v"));
  r.d.Drain();
  EXPECT_EQ(r.a.applied, (std::vector<std::string>{"a-1=v", "b-1=v"}));
  EXPECT_EQ(revoked, 0);  // not yet: a WRITE in flight looks the same
  std::this_thread::sleep_for(std::chrono::milliseconds(1500));
  ASSERT_TRUE(other->Place(2, "b-2", "v"));  // placed before the revocation: still applied
  const uint64_t refused = r.d.refused();
  r.d.Drain();
  EXPECT_EQ(r.d.refused(), refused + 1);
  EXPECT_EQ(revoked, 1);
  EXPECT_EQ(other_revoked, 1);  // every ring of its writer
  EXPECT_EQ(bystander_revoked, 0);
  EXPECT_EQ(r.d.rings(), 1u);  // the writer's, revoked and at their ends: freed
  EXPECT_EQ(r.a.applied, (std::vector<std::string>{"a-1=v", "b-1=v", "b-2=v"}));
  ASSERT_TRUE(bystander->Place(1, "c-1", "v"));
  r.d.Drain();
  EXPECT_EQ(r.a.applied.back(), "c-1=v");
}

// A complete head that waits (its slot's predecessor is not there) is looked at again on each
// pass, in turn, and applied once its predecessor comes; one that still waits after the
// stuck-head bound gets its last try: refused (a kWait then counts as refused), its writer's
// rings revoked, and the ring, at its end, freed. A ring never holds its memory for good.
TEST(RingDrainer, AHeadThatWaitsTooLongGetsItsLastTry) {
  Rig r;
  r.d.SetStuckHeadMs(1000);  // a bound the first looks below stay well within, even under TCG
  int revoked = 0;
  FakeWriter* w = r.AddRing(3, &revoked);
  FakeWriter* w2 = r.AddRing(3);
  ASSERT_TRUE(w->Place(2, "a-2", "v"));  // its predecessor comes later, in the other ring
  r.d.Drain();
  EXPECT_TRUE(r.a.applied.empty());
  EXPECT_EQ(r.d.waited(), 1u);
  r.d.Drain();
  EXPECT_EQ(r.d.waited(), 1u);  // one record waiting, however often it is looked at
  ASSERT_TRUE(w2->Place(1, "a-1", "v"));
  r.d.Drain();
  EXPECT_EQ(r.a.applied, (std::vector<std::string>{"a-1=v", "a-2=v"}));
  EXPECT_EQ(r.d.refused(), 0u);
  // Now one whose predecessor never comes.
  ASSERT_TRUE(w->Place(4, "a-4", "v"));
  r.d.Drain();
  EXPECT_EQ(r.d.waited(), 2u);
  EXPECT_EQ(revoked, 0);
  std::this_thread::sleep_for(std::chrono::milliseconds(1500));
  r.d.Drain();
  EXPECT_EQ(r.d.refused(), 1u);
  EXPECT_EQ(revoked, 1);
  EXPECT_EQ(r.d.rings(), 0u);  // both of the writer's rings, revoked and at their ends
  EXPECT_EQ(r.a.applied.size(), 2u);
}

// A ring whose revocation failed (the NIC may still place: a WRITE in mid-message) is never
// taken as ended at an incomplete head: it stays, its later records are applied, and its
// writer counts as revoked for a promotion.
TEST(RingDrainer, AFailedRevocationNeverEndsARing) {
  Rig r;
  auto ring = NewRing(3);
  ring->set_revoker([] { return false; });
  FakeWriter w(ring.get());
  ASSERT_TRUE(r.d.Add(std::move(ring), &r.last_id).ok());
  ASSERT_TRUE(w.Place(1, "a-1", std::string(50, 'v'), 70));
  r.d.RevokeWriters({3});
  EXPECT_EQ(r.d.rings(), 1u);
  EXPECT_TRUE(r.d.HasRevoked(3));
  w.Complete();
  r.d.Drain();
  EXPECT_EQ(r.a.applied, (std::vector<std::string>{"a-1=" + std::string(50, 'v')}));
  EXPECT_EQ(r.d.rings(), 1u);
}

// One peer (one writer id) cannot hold every ring: the others still get theirs.
TEST(RingDrainer, OneWritersRingsAreBounded) {
  RingDrainer d([](const ReplicaRing&, const RingRecordView&, bool) {
    return RingDrainer::Outcome::kApplied;
  });
  d.EndMap(1, true);
  uint64_t id = 0;
  for (size_t i = 0; i < RingDrainer::kMaxRingsPerWriter; ++i)
    ASSERT_TRUE(d.Add(NewRing(3), &id).ok());
  EXPECT_FALSE(d.Accepting(3));  // refused before a grant allocates anything
  EXPECT_TRUE(d.Accepting(4));
  const Status s = d.Add(NewRing(3), &id);
  EXPECT_EQ(s.code(), Code::kBusy);
  EXPECT_NE(s.message().find("server 3"), std::string::npos) << s.message();
  EXPECT_TRUE(d.Add(NewRing(4), &id).ok());
}

// Without headroom no ring is granted, and the thread revokes the rings it holds: what they
// placed is applied, then they are freed (the writers' next writes go two-sided).
TEST(RingDrainer, WithoutHeadroomRingsAreRefusedAndRevoked) {
  std::atomic<bool> room{true};
  std::atomic<size_t> asked_bytes{0};  // the most ring bytes a grant was asked about
  std::mutex mu;
  Applier a;
  RingDrainer d(
      [&](const ReplicaRing& r, const RingRecordView& v, bool) {
        std::lock_guard<std::mutex> l(mu);
        return a(r, v, false);
      },
      [&](bool for_grant, size_t ring_bytes) {
        if (for_grant) asked_bytes = std::max(asked_bytes.load(), ring_bytes);
        return room.load();
      });
  d.EndMap(1, true);
  int revoked = 0;
  auto ring = NewRing(3, &revoked);
  FakeWriter w(ring.get());
  uint64_t id = 0;
  ASSERT_TRUE(d.Add(std::move(ring), &id).ok());
  ASSERT_TRUE(w.Place(1, "a-1", "v"));
  room = false;
  EXPECT_FALSE(d.Accepting(3));
  EXPECT_EQ(d.Add(NewRing(4), &id).code(), Code::kUnavailable);
  EXPECT_EQ(asked_bytes.load(), 2 * kRingBytes);  // the held ring's and the asked one's
  d.Start();
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  while (d.rings() > 0 && std::chrono::steady_clock::now() < deadline)
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  room = true;  // room again: rings are granted again
  EXPECT_TRUE(d.Accepting(3));
  d.Stop();
  EXPECT_EQ(d.rings(), 0u);
  EXPECT_EQ(revoked, 1);
  EXPECT_EQ(d.headroom_revocations(), 1u);
  std::lock_guard<std::mutex> l(mu);
  EXPECT_EQ(a.applied, (std::vector<std::string>{"a-1=v"}));
}

}  // namespace
}  // namespace rkv::cluster

namespace rkv::cluster {
namespace {

TEST(RingTail, RefusesWhatDoesNotFitAndOldOrImpossibleNews) {
  RingTail t(kRingBytes);
  RingTail::Placement p;
  EXPECT_FALSE(t.Plan(t.layout().max_record() + 8, &p));  // bigger than a ring takes
  EXPECT_FALSE(t.Plan(60, &p));                           // not a record's size
  size_t placed = 0;
  while (t.Plan(128, &p)) {
    t.Commit(128, p);
    placed += 128;
  }
  EXPECT_EQ(placed, 1024u);                      // exactly the data area
  EXPECT_FALSE(t.SeeConsumed(t.written() + 8));  // more than was written: a broken peer
  EXPECT_TRUE(t.SeeConsumed(256));
  EXPECT_TRUE(t.SeeConsumed(128));  // older news: ignored
  EXPECT_EQ(t.consumed(), 256u);
  ASSERT_TRUE(t.Plan(128, &p));  // the tail went to the start once it reached the end
  EXPECT_EQ(p.wrap_at, -1);
  EXPECT_EQ(p.at, kRingControlBytes);
  EXPECT_EQ(p.index, 9u);
}

}  // namespace
}  // namespace rkv::cluster
