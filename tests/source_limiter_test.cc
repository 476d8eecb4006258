// SPDX-License-Identifier: Apache-2.0
// SourceLimiter (server/conn/source_limiter.h): per-address connection cap, attempt rate, bounded
// table; which refusals the client retries (client/refusal.h).
#include "server/conn/source_limiter.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <vector>

#include "client/refusal.h"

namespace rkv {
namespace {

using Clock = SourceLimiter::Clock;
using std::chrono::milliseconds;

SourceLimiter::Limits L(uint32_t conns, double rate, uint32_t burst, size_t sources) {
  SourceLimiter::Limits l;
  l.max_conns_per_source = conns;
  l.attempts_per_s = rate;
  l.attempt_burst = burst;
  l.max_sources = sources;
  return l;
}

TEST(SourceLimiter, CapsConnectionsPerSourceAndReleasesWithTheLease) {
  SourceLimiter lim(L(3, 0, 0, 16));
  const auto t = Clock::now();
  std::vector<SourceLimiter::Lease> held(3);
  for (auto& l : held) ASSERT_TRUE(lim.Admit("10.0.0.1", t, &l).ok());
  SourceLimiter::Lease extra;
  Status s = lim.Admit("10.0.0.1", t, &extra);
  EXPECT_EQ(s.code(), Code::kBusy);
  EXPECT_NE(s.message().find("--max_conns_per_source"), std::string::npos) << s.message();
  EXPECT_FALSE(extra.held());
  EXPECT_TRUE(lim.Admit("10.0.0.2", t, &extra).ok()) << "another address is not affected";
  held.pop_back();  // a connection goes away
  EXPECT_EQ(lim.Connections("10.0.0.1"), 2u);
  SourceLimiter::Lease again;
  EXPECT_TRUE(lim.Admit("10.0.0.1", t, &again).ok());
  SourceLimiter::Lease moved(std::move(again));
  EXPECT_FALSE(again.held());
  EXPECT_TRUE(moved.held());
  EXPECT_EQ(lim.Connections("10.0.0.1"), 3u);
}

TEST(SourceLimiter, RateLimitsAttemptsWithABurst) {
  SourceLimiter lim(L(0, 10, 5, 16));
  auto t = Clock::now();
  int admitted = 0;
  for (int i = 0; i < 20; ++i) {
    SourceLimiter::Lease l;
    if (lim.Admit("h", t, &l).ok()) ++admitted;
  }
  EXPECT_EQ(admitted, 5) << "the burst, then nothing at the same instant";
  SourceLimiter::Lease l;
  Status s = lim.Admit("h", t, &l);
  EXPECT_EQ(s.code(), Code::kBusy);
  EXPECT_NE(s.message().find("too many connection attempts from h"), std::string::npos);
  t += milliseconds(300);  // 3 tokens at 10/s
  admitted = 0;
  for (int i = 0; i < 10; ++i) {
    SourceLimiter::Lease l2;
    if (lim.Admit("h", t, &l2).ok()) ++admitted;
  }
  EXPECT_EQ(admitted, 3);
  t += std::chrono::hours(1);  // refills to the burst, no more
  admitted = 0;
  for (int i = 0; i < 10; ++i) {
    SourceLimiter::Lease l2;
    if (lim.Admit("h", t, &l2).ok()) ++admitted;
  }
  EXPECT_EQ(admitted, 5);
  // A clock that goes backwards (another thread's earlier `now`) neither refills nor breaks.
  SourceLimiter::Lease l3;
  EXPECT_FALSE(lim.Admit("h", t - std::chrono::hours(2), &l3).ok());
}

TEST(SourceLimiter, TableIsBoundedAndForgetsIdleAddressesFirst) {
  SourceLimiter lim(L(0, 0, 0, 4));
  auto t = Clock::now();
  std::vector<SourceLimiter::Lease> busy(2);
  ASSERT_TRUE(lim.Admit("a", t, &busy[0]).ok());
  ASSERT_TRUE(lim.Admit("b", t, &busy[1]).ok());
  for (int i = 0; i < 100; ++i) {  // many idle addresses come and go
    SourceLimiter::Lease l;
    ASSERT_TRUE(lim.Admit("idle" + std::to_string(i), t + milliseconds(i), &l).ok());
  }
  EXPECT_LE(lim.tracked(), 4u);
  EXPECT_EQ(lim.Connections("a"), 1u) << "addresses holding connections are kept";
  EXPECT_EQ(lim.Connections("b"), 1u);
  // Every tracked address holds a connection: a new one is refused, not tracked.
  std::vector<SourceLimiter::Lease> more(2);
  ASSERT_TRUE(lim.Admit("c", t, &more[0]).ok());
  ASSERT_TRUE(lim.Admit("d", t, &more[1]).ok());
  SourceLimiter::Lease l;
  EXPECT_EQ(lim.Admit("e", t, &l).code(), Code::kBusy);
  EXPECT_EQ(lim.tracked(), 4u);
}

// Review 12, finding 8: Admit into a Lease that already holds a share replaced it under the
// limiter's mutex, and the old share's Release took the same mutex again (self-deadlock).
TEST(SourceLimiter, AdmitIntoAHeldLeaseReleasesTheOldShare) {
  SourceLimiter lim(L(2, 0, 0, 16));
  const auto t = Clock::now();
  SourceLimiter::Lease l;
  ASSERT_TRUE(lim.Admit("10.0.0.1", t, &l).ok());
  ASSERT_TRUE(lim.Admit("10.0.0.1", t, &l).ok());  // same source: one share replaces the other
  EXPECT_EQ(lim.Connections("10.0.0.1"), 1u);
  ASSERT_TRUE(lim.Admit("10.0.0.2", t, &l).ok());  // another source
  EXPECT_EQ(lim.Connections("10.0.0.1"), 0u);
  EXPECT_EQ(lim.Connections("10.0.0.2"), 1u);
  // A refusal leaves the held share alone.
  SourceLimiter::Lease other;
  ASSERT_TRUE(lim.Admit("10.0.0.2", t, &other).ok());
  ASSERT_FALSE(lim.Admit("10.0.0.2", t, &l).ok());  // the cap of 2 is full
  EXPECT_TRUE(l.held());
  EXPECT_EQ(lim.Connections("10.0.0.2"), 2u);
}

// Review 12, finding 7: a new address at a full table used to scan the whole table under the
// mutex. Eviction is O(1) now (least recently used idle address first). What is checked here:
// every new address at a full table of idle ones is admitted (one is evicted) and the table
// stays bounded. The cost per new address (4096 vs 32768 entries) is a figure, not a check:
// `cost_bench admit` prints it (bench/cost_bench.cc).
TEST(SourceLimiter, EvictionFromAFullTableIsBoundedAndLeastRecentlyUsed) {
  for (const size_t table : {size_t{4096}, size_t{32768}}) {
    SourceLimiter lim(L(0, 0, 0, table));
    const auto t = Clock::now();
    for (size_t i = 0; i < table; ++i) {
      SourceLimiter::Lease x;
      ASSERT_TRUE(lim.Admit("f" + std::to_string(i), t, &x).ok());
    }
    EXPECT_EQ(lim.tracked(), table);
    size_t refused = 0;
    for (int i = 0; i < 20000; ++i) {
      SourceLimiter::Lease x;
      refused += !lim.Admit("n" + std::to_string(i), t, &x).ok();
    }
    EXPECT_EQ(refused, 0u) << "a new address at a full table of idle ones was refused";
    EXPECT_EQ(lim.tracked(), table);
  }

  // Least recently used first. One attempt per address (burst 1, no refill): a forgotten
  // address starts with a full bucket again (admitted), a kept one has none left (refused).
  SourceLimiter lim(L(0, 1e-9, 1, 3));
  const auto t = Clock::now();
  SourceLimiter::Lease held;
  ASSERT_TRUE(lim.Admit("held", t, &held).ok());
  {
    SourceLimiter::Lease a;
    ASSERT_TRUE(lim.Admit("old", t, &a).ok());
  }
  {
    SourceLimiter::Lease a;
    ASSERT_TRUE(lim.Admit("new1", t, &a).ok());
  }
  SourceLimiter::Lease x;
  EXPECT_FALSE(lim.Admit("old", t, &x).ok());  // refused, but used: now newer than "new1"
  EXPECT_TRUE(lim.Admit("new2", t, &x).ok());  // full: "new1" (least recently used) goes
  x = SourceLimiter::Lease();
  EXPECT_EQ(lim.tracked(), 3u);
  EXPECT_EQ(lim.Connections("held"), 1u) << "an address holding connections is never evicted";
  EXPECT_FALSE(lim.Admit("old", t, &x).ok()) << "\"old\" was kept (its bucket is empty)";
  EXPECT_TRUE(lim.Admit("new1", t, &x).ok()) << "\"new1\" was forgotten (a full bucket again)";
}

// Review 12, finding 1: one address could hold every --max_pending setup slot inside its
// connection cap. Connections not yet opened are capped per address (max_pending_per_source);
// an opened connection counts only against max_conns_per_source.
TEST(SourceLimiter, CapsConnectionsNotYetOpenedPerSource) {
  SourceLimiter::Limits l = L(64, 0, 0, 16);
  l.max_pending_per_source = 3;
  SourceLimiter lim(l);
  const auto t = Clock::now();
  std::vector<SourceLimiter::Lease> setup(3);
  for (auto& x : setup) ASSERT_TRUE(lim.Admit("10.0.0.1", t, &x).ok());
  EXPECT_EQ(lim.Pending("10.0.0.1"), 3u);
  SourceLimiter::Lease extra;
  Status s = lim.Admit("10.0.0.1", t, &extra);
  EXPECT_EQ(s.code(), Code::kBusy);
  EXPECT_NE(s.message().find("--max_pending_per_source"), std::string::npos) << s.message();
  EXPECT_TRUE(lim.Admit("10.0.0.2", t, &extra).ok()) << "another address is not affected";
  // Opening frees the setup share, not the connection's.
  setup[0].Opened();
  setup[0].Opened();  // idempotent
  EXPECT_FALSE(setup[0].pending());
  EXPECT_EQ(lim.Pending("10.0.0.1"), 2u);
  EXPECT_EQ(lim.Connections("10.0.0.1"), 3u);
  SourceLimiter::Lease more;
  ASSERT_TRUE(lim.Admit("10.0.0.1", t, &more).ok());
  EXPECT_FALSE(lim.Admit("10.0.0.1", t, &extra).ok());
  // A connection given up in setup frees both; an opened one only its connection share.
  setup.pop_back();
  EXPECT_EQ(lim.Pending("10.0.0.1"), 2u);
  EXPECT_EQ(lim.Connections("10.0.0.1"), 3u);
  SourceLimiter::Lease opened(std::move(setup[0]));  // a move keeps the opened state
  EXPECT_FALSE(opened.pending());
  opened = SourceLimiter::Lease();
  EXPECT_EQ(lim.Pending("10.0.0.1"), 2u);
  EXPECT_EQ(lim.Connections("10.0.0.1"), 2u);
  // Opened connections are not limited by the setup cap.
  SourceLimiter::Limits l2 = L(0, 0, 0, 16);
  l2.max_pending_per_source = 1;
  SourceLimiter lim2(l2);
  std::vector<SourceLimiter::Lease> open(100);
  for (auto& x : open) {
    ASSERT_TRUE(lim2.Admit("h", t, &x).ok());
    x.Opened();
  }
  EXPECT_EQ(lim2.Connections("h"), 100u);
  EXPECT_EQ(lim2.Pending("h"), 0u);
}

// A client that reconnects in a loop meets its own closed connections still draining (they
// hold a QP and a slot, so they count): the refusal says how many are closing, the client
// retries exactly that one, and it stays within rdma_reject's 140 bytes even for IPv6.
TEST(SourceLimiter, ClosingConnectionsCountAndTheRefusalSaysSo) {
  SourceLimiter lim(L(3, 0, 0, 16));
  const auto t = Clock::now();
  const std::string v6 = "ffff:ffff:ffff:ffff:ffff:ffff:ffff:ffff";  // the longest text form
  std::vector<SourceLimiter::Lease> held(3);
  for (auto& l : held) ASSERT_TRUE(lim.Admit(v6, t, &l).ok());
  SourceLimiter::Lease extra;
  Status live = lim.Admit(v6, t, &extra);
  EXPECT_EQ(live.code(), Code::kBusy);
  EXPECT_FALSE(PassingRefusal(live.message()))
      << "live connections hold the cap: " << live.message();
  held[0].Closing();
  held[0].Closing();  // idempotent
  held[1].Closing();
  EXPECT_EQ(lim.Closing(v6), 2u);
  EXPECT_EQ(lim.Connections(v6), 3u) << "a closing connection still counts";
  Status closing = lim.Admit(v6, t, &extra);
  EXPECT_EQ(closing.code(), Code::kBusy);
  EXPECT_NE(closing.message().find("2 still closing"), std::string::npos) << closing.message();
  EXPECT_TRUE(PassingRefusal(closing.message())) << closing.message();
  EXPECT_LE(("BUSY: " + closing.message()).size() + 1, 140u) << closing.message();
  EXPECT_LE(("BUSY: " + live.message()).size() + 1, 140u) << live.message();
  {  // The longest refusal: the largest cap the flag allows (65536), every one closing.
    SourceLimiter::Limits most = L(65536, 0, 0, 16);
    most.max_pending_per_source = 0;
    SourceLimiter big(most);
    std::vector<SourceLimiter::Lease> all(65536);
    for (auto& l : all) {
      ASSERT_TRUE(big.Admit(v6, t, &l).ok());
      l.Closing();
    }
    SourceLimiter::Lease one;
    Status longest = big.Admit(v6, t, &one);
    EXPECT_TRUE(PassingRefusal(longest.message())) << longest.message();
    EXPECT_LE(("BUSY: " + longest.message()).size() + 1, 140u) << longest.message();
  }
  // A move keeps the closing mark; the destruction releases both counts.
  SourceLimiter::Lease moved(std::move(held[0]));
  moved = SourceLimiter::Lease();
  EXPECT_EQ(lim.Closing(v6), 1u);
  EXPECT_EQ(lim.Connections(v6), 2u);
  EXPECT_TRUE(lim.Admit(v6, t, &extra).ok());
  held.clear();
  EXPECT_EQ(lim.Closing(v6), 0u);
  // The setup cap's refusal passes too; others (the attempt rate, a foreign text) do not.
  EXPECT_TRUE(
      PassingRefusal("BUSY: h already has 8 connections in setup or not yet opened "
                     "(--max_pending_per_source); try again"));
  EXPECT_FALSE(
      PassingRefusal("too many connection attempts from h (more than 20/s, "
                     "--max_connects_per_source_per_s); try again later"));
  EXPECT_FALSE(PassingRefusal(" still closing"));
  EXPECT_FALSE(PassingRefusal(""));
}

TEST(SourceLimiter, LeaseMayOutliveTheLimiter) {
  SourceLimiter::Lease l;
  {
    SourceLimiter lim(L(1, 0, 0, 4));
    ASSERT_TRUE(lim.Admit("x", Clock::now(), &l).ok());
  }
  EXPECT_TRUE(l.held());
  l = SourceLimiter::Lease();  // releases into the shared state: no use after free (ASan)
  EXPECT_FALSE(l.held());
}

}  // namespace
}  // namespace rkv
