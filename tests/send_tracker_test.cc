// SPDX-License-Identifier: Apache-2.0
// SendTracker (server/send_tracker.h): which sends a completion retires, the trailing run the
// credit check leaves out, and error completions of unsignalled sends (a QP in ERR flushes
// every send, signalled or not, in order).
#include "server/send_tracker.h"

#include <gtest/gtest.h>

#include <deque>
#include <random>

namespace rkv {
namespace {

using K = SendTracker::Kind;

TEST(SendTracker, RepliesAreSignalledOneInN) {
  SendTracker t;
  t.Init(16, 4);
  int signalled = 0;
  for (int i = 0; i < 12; ++i) {
    const bool s = t.WantSignal(K::kReply, false);
    signalled += s;
    t.Posted(K::kReply, s);
    EXPECT_LT(t.unsignalled_run(), 4);
    if (s) {
      SendTracker::Retired r = t.Completed(true);
      EXPECT_TRUE(r.consistent);
      EXPECT_EQ(r.replies, 4);  // itself and the three unsignalled before it
    }
  }
  EXPECT_EQ(signalled, 3);
  EXPECT_EQ(t.in_flight(), 0);
}

TEST(SendTracker, EveryOtherKindAndNeededCompletionsAreSignalled) {
  SendTracker t;
  t.Init(16, 8);
  EXPECT_TRUE(t.WantSignal(K::kKeepalive, false));
  EXPECT_TRUE(t.WantSignal(K::kMarker, false));
  EXPECT_TRUE(t.WantSignal(K::kBind, false));
  EXPECT_FALSE(t.WantSignal(K::kReply, false));
  EXPECT_TRUE(t.WantSignal(K::kReply, true));
  SendTracker one;
  one.Init(4, 1);
  EXPECT_TRUE(one.WantSignal(K::kReply, false));  // signal_every 1: every reply
}

TEST(SendTracker, AKeepaliveRetiresTheRepliesBeforeIt) {
  SendTracker t;
  t.Init(16, 8);
  t.Posted(K::kReply, false);
  t.Posted(K::kReply, false);
  EXPECT_EQ(t.unsignalled_run(), 2);
  t.Posted(K::kKeepalive, true);
  EXPECT_EQ(t.unsignalled_run(), 0);  // no longer trailing: the keepalive will report them
  t.Posted(K::kReply, false);
  EXPECT_EQ(t.unsignalled_run(), 1);
  SendTracker::Retired r = t.Completed(true);
  EXPECT_EQ(r.replies, 2);
  EXPECT_TRUE(r.keepalive);
  EXPECT_EQ(r.sends, 3);
  EXPECT_EQ(t.in_flight(), 1);
  EXPECT_EQ(t.unsignalled_run(), 1);
}

TEST(SendTracker, FlushedUnsignalledSendsRetireOneByOneAndTheMarkerLast) {
  SendTracker t;
  t.Init(16, 8);
  t.Posted(K::kBind, true);
  for (int i = 0; i < 3; ++i) t.Posted(K::kReply, false);
  t.Posted(K::kMarker, true);  // posted after the QP went to ERR
  // The device reports every flushed send in order, the unsignalled ones included.
  SendTracker::Retired r = t.Completed(true);  // the bind
  EXPECT_EQ(r.sends, 1);
  for (int i = 0; i < 3; ++i) {
    r = t.Completed(false);
    EXPECT_TRUE(r.consistent);
    EXPECT_EQ(r.replies, 1);
    EXPECT_FALSE(r.marker);
  }
  r = t.Completed(true);
  EXPECT_TRUE(r.marker);
  EXPECT_EQ(t.in_flight(), 0);
}

TEST(SendTracker, ADeviceThatDoesNotReportFlushedUnsignalledSendsStillDrains) {
  SendTracker t;
  t.Init(16, 8);
  for (int i = 0; i < 5; ++i) t.Posted(K::kReply, false);
  t.Posted(K::kMarker, true);
  SendTracker::Retired r = t.Completed(true);
  EXPECT_EQ(r.replies, 5);
  EXPECT_TRUE(r.marker);
  EXPECT_EQ(t.in_flight(), 0);
  EXPECT_EQ(t.unsignalled_run(), 0);
}

TEST(SendTracker, CompletionsThatMatchNothingAreFlaggedAndChangeNothing) {
  SendTracker t;
  t.Init(8, 4);
  EXPECT_FALSE(t.Completed(true).consistent);
  EXPECT_FALSE(t.Completed(false).consistent);
  t.Posted(K::kReply, false);
  EXPECT_FALSE(t.Completed(true).consistent);  // no signalled send posted
  EXPECT_EQ(t.in_flight(), 1);
  EXPECT_EQ(t.unsignalled_run(), 1);
}

TEST(SendTracker, FullAtCapacity) {
  SendTracker t;
  t.Init(3, 16);
  for (int i = 0; i < 3; ++i) {
    ASSERT_TRUE(t.HasRoom());
    t.Posted(K::kReply, false);
  }
  EXPECT_FALSE(t.HasRoom());
  t.Posted(K::kReply, false);  // ignored
  EXPECT_EQ(t.in_flight(), 3);
  EXPECT_EQ(t.Completed(false).replies, 1);
  EXPECT_TRUE(t.HasRoom());
}

// A model send queue: random posts (replies signalled by the tracker's rule, keepalives),
// completions in order as a device makes them (signalled ones; unsignalled ones only after the
// QP has gone to ERR). The tracker's counts must match the model's at every step.
TEST(SendTracker, MatchesAModelQueue) {
  std::mt19937 rng(7);
  for (int round = 0; round < 200; ++round) {
    const int capacity = 4 + int(rng() % 30), every = 1 + int(rng() % 8);
    SendTracker t;
    t.Init(capacity, every);
    struct Wr {
      K kind;
      bool signalled;
    };
    std::deque<Wr> device;  // posted, completion not yet polled
    int replies_out = 0;    // model: replies posted and not reported
    bool err = false;
    for (int step = 0; step < 400; ++step) {
      const int what = int(rng() % 10);
      if (what < 5 && t.HasRoom() && !err) {
        const K kind = rng() % 6 == 0 ? K::kKeepalive : K::kReply;
        const bool s = t.WantSignal(kind, false);
        t.Posted(kind, s);
        device.push_back({kind, s});
        replies_out += kind == K::kReply;
      } else if (what < 9 && !device.empty()) {
        // The device completes the oldest; it reports it if signalled or in error.
        Wr wr = device.front();
        int model_replies = 0;
        if (!wr.signalled && !err) {
          // Completed silently: only a later signalled completion retires it. Find it.
          size_t i = 0;
          while (i < device.size() && !device[i].signalled) ++i;
          if (i == device.size()) continue;  // nothing to report yet
          for (size_t j = 0; j <= i; ++j) model_replies += device[j].kind == K::kReply;
          device.erase(device.begin(), device.begin() + long(i) + 1);
          SendTracker::Retired r = t.Completed(true);
          ASSERT_TRUE(r.consistent);
          ASSERT_EQ(r.replies, model_replies);
        } else {
          model_replies = wr.kind == K::kReply;
          device.pop_front();
          SendTracker::Retired r = t.Completed(wr.signalled);
          ASSERT_TRUE(r.consistent);
          ASSERT_EQ(r.replies, model_replies);
        }
        replies_out -= model_replies;
      } else if (what == 9 && rng() % 20 == 0) {
        err = true;  // flushes from now on
      }
      ASSERT_EQ(t.in_flight(), int(device.size()));
      ASSERT_LT(t.unsignalled_run(), every);
      int trailing = 0;
      for (auto it = device.rbegin(); it != device.rend() && !it->signalled; ++it) ++trailing;
      ASSERT_EQ(t.unsignalled_run(), trailing);
    }
    (void)replies_out;
  }
}

}  // namespace
}  // namespace rkv
