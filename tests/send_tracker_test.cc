// SPDX-License-Identifier: Apache-2.0
// SendTracker (server/conn/send_tracker.h): which sends a completion retires, the trailing run the
// credit check leaves out, and error completions of unsignalled sends (a QP in ERR flushes
// every send, signalled or not, in order).
#include "server/conn/send_tracker.h"

#include <gtest/gtest.h>

#include <deque>
#include <random>

namespace rkv {
namespace {

using K = SendTracker::Kind;

// Posts a send of `kind` with the tracker's signalling rule; returns its sequence number.
uint16_t Post(SendTracker* t, K kind, bool* signalled = nullptr, bool need = false) {
  const bool s = t->WantSignal(kind, need);
  const uint16_t seq = t->next_seq();
  t->Posted(kind, s);
  if (signalled != nullptr) *signalled = s;
  return seq;
}

TEST(SendTracker, RepliesAreSignalledOneInN) {
  SendTracker t;
  t.Init(16, 4);
  int signalled = 0;
  for (int i = 0; i < 12; ++i) {
    bool s = false;
    const uint16_t seq = Post(&t, K::kReply, &s);
    EXPECT_LT(t.unsignalled_run(), 4);
    if (s) {
      ++signalled;
      SendTracker::Retired r = t.Completed(seq);
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
  Post(&t, K::kReply);
  Post(&t, K::kReply);
  EXPECT_EQ(t.unsignalled_run(), 2);
  const uint16_t ka = Post(&t, K::kKeepalive);
  EXPECT_EQ(t.unsignalled_run(), 0);  // no longer trailing: the keepalive will report them
  Post(&t, K::kReply);
  EXPECT_EQ(t.unsignalled_run(), 1);
  SendTracker::Retired r = t.Completed(ka);
  EXPECT_EQ(r.replies, 2);
  EXPECT_TRUE(r.keepalive);
  EXPECT_EQ(r.sends, 3);
  EXPECT_EQ(t.in_flight(), 1);
  EXPECT_EQ(t.unsignalled_run(), 1);
}

// u1 and u2 complete silently, u3 fails (retries exceeded), u4 is flushed, then the marker:
// the error completion of u3 retires u1..u3, not just the oldest.
TEST(SendTracker, AnErrorCompletionRetiresItselfAndEverythingBefore) {
  SendTracker t;
  t.Init(16, 8);
  Post(&t, K::kReply);
  Post(&t, K::kReply);
  const uint16_t u3 = Post(&t, K::kReply);
  const uint16_t u4 = Post(&t, K::kReply);
  SendTracker::Retired r = t.Completed(u3);
  EXPECT_TRUE(r.consistent);
  EXPECT_EQ(r.replies, 3);
  EXPECT_EQ(t.in_flight(), 1);
  EXPECT_EQ(t.unsignalled_run(), 1);
  r = t.Completed(u4);
  EXPECT_EQ(r.replies, 1);
  EXPECT_EQ(t.unsignalled_run(), 0);
  const uint16_t marker = Post(&t, K::kMarker);
  r = t.Completed(marker);
  EXPECT_TRUE(r.marker);
  EXPECT_EQ(t.in_flight(), 0);
}

TEST(SendTracker, ADeviceThatDoesNotReportFlushedUnsignalledSendsStillDrains) {
  SendTracker t;
  t.Init(16, 8);
  for (int i = 0; i < 5; ++i) Post(&t, K::kReply);
  const uint16_t marker = Post(&t, K::kMarker);
  SendTracker::Retired r = t.Completed(marker);
  EXPECT_EQ(r.replies, 5);
  EXPECT_TRUE(r.marker);
  EXPECT_EQ(t.in_flight(), 0);
  EXPECT_EQ(t.unsignalled_run(), 0);
}

TEST(SendTracker, CompletionsThatMatchNothingAreFlaggedAndChangeNothing) {
  SendTracker t;
  t.Init(8, 4);
  EXPECT_FALSE(t.Completed(0).consistent);  // nothing posted
  const uint16_t a = Post(&t, K::kReply);
  EXPECT_FALSE(t.Completed(uint16_t(a + 1)).consistent);  // not posted yet
  EXPECT_TRUE(t.Completed(a).consistent);
  EXPECT_FALSE(t.Completed(a).consistent);  // already retired
  EXPECT_EQ(t.in_flight(), 0);
}

TEST(SendTracker, FullAtCapacityAndSequenceNumbersWrap) {
  SendTracker t;
  t.Init(3, 16);
  for (int i = 0; i < 3; ++i) {
    ASSERT_TRUE(t.HasRoom());
    Post(&t, K::kReply);
  }
  EXPECT_FALSE(t.HasRoom());
  t.Posted(K::kReply, false);  // ignored
  EXPECT_EQ(t.in_flight(), 3);
  // Past 65535 the numbers wrap and still name the right send.
  SendTracker w;
  w.Init(4, 2);
  for (int i = 0; i < 70000; ++i) {
    const uint16_t seq = Post(&w, K::kKeepalive);
    ASSERT_EQ(w.Completed(seq).sends, 1) << i;
  }
}

// A model send queue: random posts (replies signalled by the tracker's rule, keepalives),
// completions in order as a device makes them (signalled ones; after the QP goes to ERR, every
// send). The tracker's counts must match the model's at every step.
TEST(SendTracker, MatchesAModelQueue) {
  std::mt19937 rng(7);
  for (int round = 0; round < 200; ++round) {
    const int capacity = 4 + int(rng() % 30), every = 1 + int(rng() % 8);
    SendTracker t;
    t.Init(capacity, every);
    struct Wr {
      K kind;
      bool signalled;
      uint16_t seq;
    };
    std::deque<Wr> device;  // posted, completion not yet polled
    bool err = false;
    for (int step = 0; step < 400; ++step) {
      const int what = int(rng() % 10);
      if (what < 5 && t.HasRoom() && !err) {
        const K kind = rng() % 6 == 0 ? K::kKeepalive : K::kReply;
        bool s = false;
        const uint16_t seq = Post(&t, kind, &s);
        device.push_back({kind, s, seq});
      } else if (what < 9 && !device.empty()) {
        // The device reports the first send that is signalled (or any, once in ERR).
        size_t i = 0;
        while (!err && i < device.size() && !device[i].signalled) ++i;
        if (i == device.size()) continue;  // nothing to report yet
        int replies = 0;
        for (size_t j = 0; j <= i; ++j) replies += device[j].kind == K::kReply;
        const uint16_t seq = device[i].seq;
        device.erase(device.begin(), device.begin() + long(i) + 1);
        SendTracker::Retired r = t.Completed(seq);
        ASSERT_TRUE(r.consistent);
        ASSERT_EQ(r.replies, replies);
      } else if (what == 9 && rng() % 20 == 0) {
        err = true;  // flushes from now on
      }
      ASSERT_EQ(t.in_flight(), int(device.size()));
      ASSERT_LT(t.unsignalled_run(), every);
      int trailing = 0;
      for (auto it = device.rbegin(); it != device.rend() && !it->signalled; ++it) ++trailing;
      ASSERT_EQ(t.unsignalled_run(), trailing);
    }
  }
}

}  // namespace
}  // namespace rkv
