// SPDX-License-Identifier: Apache-2.0
// EtcdClient (common/etcd/etcd_client.h) against a real three-member etcd cluster started by
// tests/etcd/etcd_client.sh (RKV_ETCD_ENDPOINTS: its client URLs; RKV_ETCD_PIDS: the members'
// pids, in the same order). Keys, prefix reads, transactions guarded by revisions (racing
// creators: exactly one wins), leases (keepalive, revoke, expiry), watches from a revision, a
// watch canceled by compaction, and failover: a dead endpoint listed first, and the member in
// use stopped (SIGSTOP) mid-test. Waits have deadlines; nothing asserts a timing.
#include "common/etcd/etcd_client.h"

#include <gtest/gtest.h>
#include <signal.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdlib>
#include <sstream>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "tests/etcd/etcd_test_env.h"

namespace rkv {
namespace {

using etcd_test::Settings;

class EtcdClientTest : public ::testing::Test {
 protected:
  void SetUp() override {
    EtcdSettings s = Settings();
    if (s.endpoints.empty()) GTEST_FAIL() << "RKV_ETCD_ENDPOINTS is not set (run etcd_client.sh)";
    ASSERT_TRUE(EtcdClient::Open(s, &c_).ok());
    prefix_ = std::string("/rkv-test/") +
              ::testing::UnitTest::GetInstance()->current_test_info()->name() + "/";
  }
  std::unique_ptr<EtcdClient> c_;
  std::string prefix_;
};

TEST_F(EtcdClientTest, KeysAndPrefixes) {
  ASSERT_TRUE(c_->Put(prefix_ + "a", std::string("v\0a", 3)).ok());
  ASSERT_TRUE(c_->Put(prefix_ + "b", "").ok());
  ASSERT_TRUE(c_->Put(prefix_ + "b/c", "x").ok());
  bool found = false;
  EtcdKv kv;
  int64_t rev = 0;
  ASSERT_TRUE(c_->Get(prefix_ + "a", &found, &kv, &rev).ok());
  EXPECT_TRUE(found);
  EXPECT_EQ(kv.value, std::string("v\0a", 3));  // bytes, not a C string
  EXPECT_GT(kv.create_revision, 0);
  EXPECT_EQ(kv.version, 1);
  EXPECT_GE(rev, kv.mod_revision);
  std::vector<EtcdKv> kvs;
  ASSERT_TRUE(c_->GetPrefix(prefix_, &kvs, &rev).ok());
  ASSERT_EQ(kvs.size(), 3u);
  EXPECT_EQ(kvs[1].key, prefix_ + "b");
  EXPECT_EQ(kvs[1].value, "");
  ASSERT_TRUE(c_->Delete(prefix_ + "a").ok());
  ASSERT_TRUE(c_->Get(prefix_ + "a", &found, &kv, &rev).ok());
  EXPECT_FALSE(found);
  EXPECT_EQ(EtcdClient::PrefixEnd("a/"), "a0");
  EXPECT_EQ(EtcdClient::PrefixEnd(std::string("a\xff", 2)), "b");
}

// Create-if-absent (create_revision == 0) from many threads at once: exactly one wins.
TEST_F(EtcdClientTest, RacingCreatorsExactlyOneWins) {
  constexpr int kRacers = 8;
  std::atomic<int> wins{0}, errors{0};
  std::vector<std::thread> threads;
  for (int i = 0; i < kRacers; ++i) {
    threads.emplace_back([&, i] {
      std::unique_ptr<EtcdClient> c;
      if (!EtcdClient::Open(Settings(), &c).ok()) {
        ++errors;
        return;
      }
      EtcdClient::Compare absent{prefix_ + "owner",
                                 EtcdClient::Compare::kCreateRevision,
                                 EtcdClient::Compare::kEqual,
                                 0,
                                 {}};
      bool won = false;
      Status s =
          c->Txn({absent}, {EtcdClient::Op::Put(prefix_ + "owner", std::to_string(i))}, {}, &won);
      if (!s.ok()) ++errors;
      if (won) ++wins;
    });
  }
  for (auto& t : threads) t.join();
  EXPECT_EQ(errors.load(), 0);
  EXPECT_EQ(wins.load(), 1);
}

// A write guarded by the revision it read fails once someone else wrote in between.
TEST_F(EtcdClientTest, StaleRevisionLosesTheCompareAndSwap) {
  ASSERT_TRUE(c_->Put(prefix_ + "map", "epoch 1").ok());
  bool found = false;
  EtcdKv kv;
  ASSERT_TRUE(c_->Get(prefix_ + "map", &found, &kv, nullptr).ok());
  ASSERT_TRUE(found);
  const int64_t read_at = kv.mod_revision;
  ASSERT_TRUE(c_->Put(prefix_ + "map", "epoch 2 (another actor)").ok());
  EtcdClient::Compare same{
      prefix_ + "map", EtcdClient::Compare::kModRevision, EtcdClient::Compare::kEqual, read_at, {}};
  bool ok = true;
  ASSERT_TRUE(
      c_->Txn({same}, {EtcdClient::Op::Put(prefix_ + "map", "epoch 2 (stale)")}, {}, &ok).ok());
  EXPECT_FALSE(ok);
  ASSERT_TRUE(c_->Get(prefix_ + "map", &found, &kv, nullptr).ok());
  EXPECT_EQ(kv.value, "epoch 2 (another actor)");
  // The failure branch runs instead, and a value compare works too.
  EtcdClient::Compare value{prefix_ + "map", EtcdClient::Compare::kValue,
                            EtcdClient::Compare::kEqual, 0, "epoch 2 (another actor)"};
  ASSERT_TRUE(c_->Txn({value}, {EtcdClient::Op::Delete(prefix_ + "map")},
                      {EtcdClient::Op::Put(prefix_ + "lost", "x")}, &ok)
                  .ok());
  EXPECT_TRUE(ok);
  ASSERT_TRUE(c_->Get(prefix_ + "map", &found, &kv, nullptr).ok());
  EXPECT_FALSE(found);
}

TEST_F(EtcdClientTest, LeasesKeepRevokeAndExpire) {
  int64_t lease = 0;
  ASSERT_TRUE(c_->GrantLease(5, &lease).ok());
  ASSERT_TRUE(c_->Put(prefix_ + "member", "alive", lease).ok());
  int64_t ttl = 0;
  ASSERT_TRUE(c_->KeepAlive(lease, &ttl).ok());
  EXPECT_GT(ttl, 0);
  bool found = false;
  EtcdKv kv;
  ASSERT_TRUE(c_->Get(prefix_ + "member", &found, &kv, nullptr).ok());
  EXPECT_TRUE(found);
  EXPECT_EQ(kv.lease, lease);
  ASSERT_TRUE(c_->RevokeLease(lease).ok());
  ASSERT_TRUE(c_->Get(prefix_ + "member", &found, &kv, nullptr).ok());
  EXPECT_FALSE(found) << "revoking the lease deletes its keys";
  ASSERT_TRUE(c_->KeepAlive(lease, &ttl).ok());
  EXPECT_EQ(ttl, 0) << "a revoked lease cannot be kept alive";

  // Expiry: a lease nobody keeps alive takes its key with it (etcd's clock, not ours).
  ASSERT_TRUE(c_->GrantLease(1, &lease).ok());
  ASSERT_TRUE(c_->Put(prefix_ + "dead", "x", lease).ok());
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(30);
  do {
    std::this_thread::sleep_for(std::chrono::milliseconds(200));
    ASSERT_TRUE(c_->Get(prefix_ + "dead", &found, &kv, nullptr).ok());
  } while (found && std::chrono::steady_clock::now() < deadline);
  EXPECT_FALSE(found) << "the key of an expired lease is gone";
}

TEST_F(EtcdClientTest, WatchFromARevisionSeesEveryChangeInOrder) {
  int64_t rev = 0;
  std::vector<EtcdKv> none;
  ASSERT_TRUE(c_->GetPrefix(prefix_, &none, &rev).ok());
  // Changes made before the watch starts are still seen: it starts at rev + 1.
  ASSERT_TRUE(c_->Put(prefix_ + "1", "a").ok());
  std::thread writer([&] {
    std::unique_ptr<EtcdClient> c;
    ASSERT_TRUE(EtcdClient::Open(Settings(), &c).ok());
    ASSERT_TRUE(c->Put(prefix_ + "2", "b").ok());
    ASSERT_TRUE(c->Delete(prefix_ + "1").ok());
  });
  std::vector<std::string> seen;
  Status s =
      c_->Watch(prefix_, true, rev + 1, 20000, [&](const std::vector<EtcdEvent>& events, int64_t) {
        for (const EtcdEvent& e : events)
          seen.push_back((e.deleted ? "-" : "+") + e.kv.key.substr(prefix_.size()) +
                         (e.deleted ? "" : "=" + e.kv.value));
        return seen.size() >= 3;
      });
  writer.join();
  ASSERT_TRUE(s.ok()) << s.ToString();
  EXPECT_EQ(seen, (std::vector<std::string>{"+1=a", "+2=b", "-1"}));
  // Nothing happens: the watch ends at its deadline with kTimeout.
  int64_t now = 0;
  ASSERT_TRUE(c_->GetPrefix(prefix_, &none, &now).ok());
  s = c_->Watch(prefix_ + "quiet/", true, now + 1, 1500,
                [](const std::vector<EtcdEvent>&, int64_t) { return true; });
  EXPECT_EQ(s.code(), Code::kTimeout) << s.ToString();
}

// A long watch call ends soon after its interrupt says so (kTimeout "interrupted"), and still
// delivers what came before; an interrupt that stays false changes nothing.
TEST_F(EtcdClientTest, AWatchEndsWhenItsInterruptSaysSo) {
  int64_t now = 0;
  std::vector<EtcdKv> none;
  ASSERT_TRUE(c_->GetPrefix(prefix_, &none, &now).ok());
  std::atomic<bool> cut{false};
  std::thread cutter([&] {
    std::unique_ptr<EtcdClient> c;
    EXPECT_TRUE(EtcdClient::Open(Settings(), &c).ok());
    if (c) {
      EXPECT_TRUE(c->Put(prefix_ + "k", "v").ok());
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(300));
    cut = true;  // whatever happened above: the watch must not wait its 60 s
  });
  int events = 0;
  Status s = c_->Watch(
      prefix_, true, now + 1, 60000,
      [&](const std::vector<EtcdEvent>& ev, int64_t) {
        events += int(ev.size());
        return false;
      },
      [&] { return cut.load(); });
  cutter.join();
  EXPECT_EQ(s.code(), Code::kTimeout) << s.ToString();
  EXPECT_NE(s.message().find("interrupted"), std::string::npos) << s.ToString();
  EXPECT_EQ(events, 1) << "the put before the interrupt was delivered";
  s = c_->Watch(
      prefix_ + "quiet/", true, now + 1, 1000,
      [](const std::vector<EtcdEvent>&, int64_t) { return true; }, [] { return false; });
  EXPECT_EQ(s.code(), Code::kTimeout) << s.ToString();
  EXPECT_EQ(s.message().find("interrupted"), std::string::npos) << s.ToString();
  // True from the start: the call ends without waiting.
  s = c_->Watch(
      prefix_, true, now + 1, 60000, [](const std::vector<EtcdEvent>&, int64_t) { return false; },
      [] { return true; });
  EXPECT_EQ(s.code(), Code::kTimeout) << s.ToString();
  EXPECT_NE(s.message().find("interrupted"), std::string::npos) << s.ToString();
  // One that throws ends the call too (a caller's bug must not unwind through libcurl).
  s = c_->Watch(
      prefix_, true, now + 1, 60000, [](const std::vector<EtcdEvent>&, int64_t) { return false; },
      []() -> bool { throw std::runtime_error("caller bug"); });
  EXPECT_EQ(s.code(), Code::kTimeout) << s.ToString();
}

TEST_F(EtcdClientTest, AWatchFromACompactedRevisionIsAnError) {
  ASSERT_TRUE(c_->Put(prefix_ + "k", "1").ok());
  bool found = false;
  EtcdKv kv;
  int64_t rev = 0;
  ASSERT_TRUE(c_->Put(prefix_ + "k", "2").ok());
  ASSERT_TRUE(c_->Get(prefix_ + "k", &found, &kv, &rev).ok());
  std::string resp;
  ASSERT_TRUE(
      c_->transport()
          .Post("/v3/kv/compaction", "{\"revision\":\"" + std::to_string(rev) + "\"}", &resp, 5000)
          .ok());
  Status s = c_->Watch(prefix_, true, 1, 5000,
                       [](const std::vector<EtcdEvent>&, int64_t) { return true; });
  EXPECT_FALSE(s.ok());
  EXPECT_NE(s.code(), Code::kTimeout) << "canceled by etcd, not a timeout: " << s.ToString();
}

// A dead endpoint listed first: requests move to a live member and stay there.
TEST_F(EtcdClientTest, ADeadEndpointIsSkipped) {
  EtcdSettings s = Settings();
  s.endpoints.insert(s.endpoints.begin(), "http://127.0.0.1:1");
  std::unique_ptr<EtcdClient> c;
  ASSERT_TRUE(EtcdClient::Open(s, &c).ok());
  ASSERT_TRUE(c->Put(prefix_ + "x", "1").ok());
  EXPECT_EQ(c->transport().failovers(), 1u);
  EXPECT_NE(c->transport().endpoint(), "http://127.0.0.1:1");
  ASSERT_TRUE(c->Put(prefix_ + "x", "2").ok());
  EXPECT_EQ(c->transport().failovers(), 1u) << "the live member is remembered";
  EtcdSettings dead;
  dead.endpoints = {"http://127.0.0.1:1", "http://127.0.0.1:2"};
  ASSERT_TRUE(EtcdClient::Open(dead, &c).ok());
  Status st = c->Put(prefix_ + "x", "3");
  EXPECT_FALSE(st.ok());
  EXPECT_NE(st.message().find("every endpoint tried"), std::string::npos) << st.ToString();
}

// The member in use stops answering (SIGSTOP: it holds its connections open, the worst case)
// and the other two keep quorum: reads and transactions go on through them.
TEST_F(EtcdClientTest, AStoppedMemberIsFailedOver) {
  const std::vector<pid_t> pids = etcd_test::MemberPids();
  EtcdSettings s = Settings();
  ASSERT_EQ(pids.size(), s.endpoints.size());
  std::unique_ptr<EtcdClient> c;
  ASSERT_TRUE(EtcdClient::Open(s, &c).ok());
  ASSERT_TRUE(c->Put(prefix_ + "k", "before").ok());
  int64_t lease = 0;
  ASSERT_TRUE(c->GrantLease(30, &lease).ok());
  size_t in_use = 0;
  while (in_use < s.endpoints.size() && s.endpoints[in_use] != c->transport().endpoint()) ++in_use;
  ASSERT_LT(in_use, s.endpoints.size());
  const pid_t pid = pids[in_use];
  ASSERT_EQ(kill(pid, SIGSTOP), 0);
  Status put = c->Put(prefix_ + "k", "after");
  bool found = false;
  EtcdKv kv;
  Status get = c->Get(prefix_ + "k", &found, &kv, nullptr);
  // A keepalive too (a server's membership depends on it): it fails over like any request.
  std::unique_ptr<EtcdClient> fresh;  // starts at the stopped member again
  ASSERT_TRUE(EtcdClient::Open(s, &fresh).ok());
  while (fresh->transport().endpoint() != s.endpoints[in_use]) {
    std::rotate(s.endpoints.begin(), s.endpoints.begin() + 1, s.endpoints.end());
    ASSERT_TRUE(EtcdClient::Open(s, &fresh).ok());
  }
  int64_t ttl = 0;
  Status keep = fresh->KeepAlive(lease, &ttl);
  kill(pid, SIGCONT);
  ASSERT_TRUE(keep.ok()) << keep.ToString();
  EXPECT_GT(ttl, 0);
  ASSERT_TRUE(put.ok()) << put.ToString();
  ASSERT_TRUE(get.ok()) << get.ToString();
  EXPECT_EQ(kv.value, "after");
  EXPECT_NE(c->transport().endpoint(), s.endpoints[in_use]);
  EXPECT_GE(c->transport().failovers(), 1u);
}

// A watch whose member does not answer (stopped, cut off) is moved to the next member within
// half a second instead of waiting out its whole call, and sees what happened meanwhile.
TEST_F(EtcdClientTest, AWatchSkipsAMemberThatDoesNotAnswer) {
  const std::vector<pid_t> pids = etcd_test::MemberPids();
  EtcdSettings s = Settings();
  ASSERT_EQ(pids.size(), s.endpoints.size());
  ASSERT_GT(s.endpoints.size(), 1u);
  std::unique_ptr<EtcdClient> c;
  ASSERT_TRUE(EtcdClient::Open(s, &c).ok());
  int64_t rev = 0;
  std::vector<EtcdKv> none;
  ASSERT_TRUE(c->GetPrefix(prefix_, &none, &rev).ok());
  ASSERT_TRUE(c->Put(prefix_ + "k", "v").ok());
  size_t in_use = 0;
  while (in_use < s.endpoints.size() && s.endpoints[in_use] != c->transport().endpoint()) ++in_use;
  ASSERT_LT(in_use, s.endpoints.size());
  ASSERT_EQ(kill(pids[in_use], SIGSTOP), 0);
  int events = 0;
  Status w = c->Watch(prefix_, true, rev + 1, 5000, [&](const std::vector<EtcdEvent>& ev, int64_t) {
    events += int(ev.size());
    return events > 0;
  });
  kill(pids[in_use], SIGCONT);
  EXPECT_TRUE(w.ok()) << w.ToString();
  EXPECT_EQ(events, 1);
  EXPECT_NE(c->transport().endpoint(), s.endpoints[in_use]);
}

TEST(EtcdSettings, BadCombinationsAreRefused) {
  EtcdSettings s;
  EXPECT_FALSE(EtcdTransport::CheckSettings(s).ok());  // no endpoint
  s.endpoints = {"http://127.0.0.1:2379", "https://127.0.0.1:2380"};
  EXPECT_NE(EtcdTransport::CheckSettings(s).message().find("mixes"), std::string::npos);
  s.endpoints = {"http://10.0.0.1:2379", "http://127.0.0.1:2379"};
  s.user = "root";
  s.password_file = "/nonexistent";
  EXPECT_NE(EtcdTransport::CheckSettings(s).message().find("in clear to 10.0.0.1"),
            std::string::npos);
  s.user.clear();
  s.password_file.clear();
  EXPECT_TRUE(EtcdTransport::CheckSettings(s).ok());
  s.endpoints.assign(17, "http://127.0.0.1:2379");
  EXPECT_FALSE(EtcdTransport::CheckSettings(s).ok());
  s.endpoints = {"http://user@127.0.0.1:2379"};
  EXPECT_FALSE(EtcdTransport::CheckSettings(s).ok());
}

}  // namespace
}  // namespace rkv
