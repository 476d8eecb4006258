// SPDX-License-Identifier: Apache-2.0
// MapWatcher against the real etcd cluster of tests/etcd/etcd_client.sh: what it asks of etcd.
// A server's watcher and an idle client's read the map only at Start (their watch alone follows
// it); a client's watcher confirms a replicated map while Confirmed() is asked and stops once
// nobody asks; new maps are adopted through the watch in every mode. (The lease rule itself,
// "Confirmed() only within kMapLeaseMs of a read's start", is the map_lease.h argument.)
#include <gtest/gtest.h>

#include <chrono>
#include <memory>
#include <string>
#include <thread>

#include "common/cluster/map_watcher.h"
#include "tests/etcd/replicated_cluster_test.h"

namespace rkv::cluster {
namespace {

using std::chrono::milliseconds;

class MapWatcherEtcdTest : public ReplicatedClusterTest {
 protected:
  // Puts the map again with epoch `epoch`.
  void PutEpoch(uint64_t epoch) {
    SlotMap m = initial_;
    m.set_epoch(epoch);
    std::string v;
    m.Encode(&v);
    ASSERT_TRUE(etcd_->Put(addr_.Prefix() + "map", v).ok());
  }
  // Waits (up to 10 s) for the watcher to adopt `epoch`.
  static bool Adopts(const MapWatcher& w, uint64_t epoch) {
    for (int i = 0; i < 200 && w.epoch() != epoch; ++i)
      std::this_thread::sleep_for(milliseconds(50));
    return w.epoch() == epoch;
  }
};

TEST_F(MapWatcherEtcdTest, AServersWatcherReadsTheMapOnlyAtStartAndFollowsItsWatch) {
  std::unique_ptr<MapWatcher> w;
  ASSERT_TRUE(MapWatcher::Start(etcd_.get(), addr_, nullptr, &w).ok());
  EXPECT_EQ(w->reads(), 1u);
  std::this_thread::sleep_for(milliseconds(1500));  // five thirds of the lease, and more
  EXPECT_EQ(w->reads(), 1u) << "a server never asks Confirmed(): nothing to confirm";
  EXPECT_LE(w->watches(), 3u) << "one watch call a second";
  PutEpoch(6);
  EXPECT_TRUE(Adopts(*w, 6));
  EXPECT_EQ(w->reads(), 1u);
  EXPECT_FALSE(w->Confirmed()) << "its one read is older than the lease";
}

TEST_F(MapWatcherEtcdTest, AClientConfirmsOnlyWhileAsked) {
  std::unique_ptr<MapWatcher> w;
  ASSERT_TRUE(MapWatcher::Start(etcd_.get(), addr_, nullptr, &w, true, true).ok());
  std::this_thread::sleep_for(milliseconds(1200));
  EXPECT_EQ(w->reads(), 1u) << "an idle client reads nothing";
  // A client doing GETs: asks Confirmed() before each.
  const uint64_t idle_reads = w->reads();
  for (int i = 0; i < 40; ++i) {
    (void)w->Confirmed();
    std::this_thread::sleep_for(milliseconds(50));
  }
  EXPECT_GE(w->reads(), idle_reads + 2) << "2 s of GETs: confirmed every third of the lease";
  // Confirmed() at once after a confirming read (no GET here reads etcd itself).
  bool confirmed = false;
  for (int i = 0; i < 100 && !confirmed; ++i) {
    confirmed = w->Confirmed();
    if (!confirmed) std::this_thread::sleep_for(milliseconds(20));
  }
  EXPECT_TRUE(confirmed);
  // Nobody asks any more: the reads stop once kKeepConfirmedMs passed.
  std::this_thread::sleep_for(milliseconds(MapWatcher::kKeepConfirmedMs + 1000));
  const uint64_t settled = w->reads();
  std::this_thread::sleep_for(milliseconds(1500));
  EXPECT_EQ(w->reads(), settled) << "no reads once idle";
  EXPECT_FALSE(w->Confirmed());  // asked now, and older than the lease: the caller reads
  // Asked again after the idle stretch: the confirming thread wakes (no GET reads itself).
  for (int i = 0; i < 20; ++i) {
    (void)w->Confirmed();
    std::this_thread::sleep_for(milliseconds(50));
  }
  EXPECT_GT(w->reads(), settled);
  PutEpoch(7);
  EXPECT_TRUE(Adopts(*w, 7));
}

TEST_F(MapWatcherEtcdTest, AnUnreplicatedMapIsNeverConfirmedByReads) {
  SlotMap m;
  ASSERT_TRUE(SlotMap::Create(kSlots, 1, 99, &m).ok());
  m.AddServer({1, Host(1), 7001});
  for (uint32_t slot = 0; slot < kSlots; ++slot) ASSERT_TRUE(m.Assign(slot, 0, 0));
  m.set_epoch(9);
  std::string v;
  m.Encode(&v);
  ASSERT_TRUE(etcd_->Put(addr_.Prefix() + "map", v).ok());
  std::unique_ptr<MapWatcher> w;
  ASSERT_TRUE(MapWatcher::Start(etcd_.get(), addr_, nullptr, &w, true, true).ok());
  for (int i = 0; i < 30; ++i) {
    (void)w->Confirmed();
    std::this_thread::sleep_for(milliseconds(50));
  }
  EXPECT_EQ(w->reads(), 1u) << "GETs of an unreplicated cluster need no lease";
}

TEST_F(MapWatcherEtcdTest, StopsPromptly) {
  std::unique_ptr<MapWatcher> w;
  ASSERT_TRUE(MapWatcher::Start(etcd_.get(), addr_, nullptr, &w, true, true).ok());
  (void)w->Confirmed();
  std::this_thread::sleep_for(milliseconds(300));
  w.reset();  // joins both threads (a watch call's deadline at most); must not hang
  SUCCEED();
}

}  // namespace
}  // namespace rkv::cluster
