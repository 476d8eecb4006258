// SPDX-License-Identifier: Apache-2.0
#include "client/rpc_window.h"

#include <gtest/gtest.h>

#include <deque>
#include <random>

namespace rkv {
namespace {

TEST(RpcWindow, DepthBoundsOutstanding) {
  RpcWindow w(1 << 16, 16);
  w.SetDepth(4);
  RpcWindow::Slot s;
  for (uint64_t i = 1; i <= 4; ++i) ASSERT_TRUE(w.Reserve(100, i, &s));
  EXPECT_FALSE(w.Reserve(100, 5, &s)) << "credits";
  EXPECT_EQ(w.outstanding(), 4);
  EXPECT_TRUE(w.ReplyTaken(2));  // out of order is fine
  EXPECT_FALSE(w.ReplyTaken(2)) << "taken twice";
  EXPECT_FALSE(w.ReplyTaken(99)) << "never sent";
  EXPECT_TRUE(w.Reserve(100, 5, &s));
  EXPECT_FALSE(w.idle());
  for (uint64_t i : {1, 3, 4, 5}) EXPECT_TRUE(w.ReplyTaken(i));
  EXPECT_FALSE(w.idle()) << "sends not completed";
  for (int i = 0; i < 5; ++i) w.SendDone();
  EXPECT_TRUE(w.idle());
}

TEST(RpcWindow, RingSpaceIsReleasedOnlyAfterReplyAndSendCompletion) {
  RpcWindow w(1000, 8);
  RpcWindow::Slot a, b, c;
  ASSERT_TRUE(w.Reserve(400, 1, &a));
  ASSERT_TRUE(w.Reserve(400, 2, &b));
  EXPECT_EQ(a.ring_offset, 0u);
  EXPECT_EQ(b.ring_offset, 400u);
  EXPECT_FALSE(w.Reserve(400, 3, &c)) << "no room";
  ASSERT_TRUE(w.ReplyTaken(1));
  EXPECT_FALSE(w.Reserve(400, 3, &c)) << "request 1's send has not completed";
  w.SendDone();
  ASSERT_TRUE(w.Reserve(300, 3, &c));  // wraps to the start
  EXPECT_EQ(c.ring_offset, 0u);
  EXPECT_FALSE(w.Reserve(200, 4, &c)) << "would overlap request 2";
  EXPECT_FALSE(w.Reserve(2000, 4, &c)) << "larger than the ring";
}

// A random schedule of reserves, completions and replies (in any order): live ranges never
// overlap, receive slots follow posting order, and everything drains.
TEST(RpcWindow, RandomScheduleNeverOverlaps) {
  std::mt19937 rng(7);
  RpcWindow w(4096, 16);
  w.SetDepth(8);
  struct Live {
    uint64_t rid, begin, end;
    bool replied;
  };
  std::deque<Live> live;  // posting order
  uint64_t next_rid = 1, sends_pending = 0, posted = 0, refused = 0;
  for (int step = 0; step < 200000; ++step) {
    int what = int(rng() % 3);
    if (what == 0) {
      uint32_t len = 1 + rng() % 1500;
      RpcWindow::Slot s;
      if (w.Reserve(len, next_rid, &s)) {
        for (const Live& l : live)
          if (!(s.ring_offset + len <= l.begin || s.ring_offset >= l.end))
            FAIL() << "overlap at step " << step;
        ASSERT_LE(s.ring_offset + len, 4096u);
        ASSERT_EQ(s.recv_slot, int(posted % 16));
        live.push_back({next_rid++, s.ring_offset, s.ring_offset + len, false});
        ++sends_pending;
        ++posted;
      } else {
        ++refused;
      }
    } else if (what == 1 && sends_pending > 0) {
      w.SendDone();
      --sends_pending;
    } else if (!live.empty()) {
      Live& l = live[rng() % live.size()];
      if (!l.replied) {
        ASSERT_TRUE(w.ReplyTaken(l.rid));
        l.replied = true;
      }
    }
    // Mirror the release rule: the oldest requests, replied and sent.
    uint64_t sent = posted - sends_pending;
    uint64_t first_seq = posted - live.size();
    while (!live.empty() && live.front().replied && first_seq < sent) {
      live.pop_front();
      ++first_seq;
    }
    ASSERT_LE(w.outstanding(), 8);
    ASSERT_EQ(w.NextRecvSlot(), int(w.replies_taken() % 16));
  }
  EXPECT_GT(posted, 20000u);  // the schedule exercised the ring, full and not
  EXPECT_GT(refused, 1000u);
}

// Receives are filled in posting order whatever order replies are taken in: the k-th reply to
// arrive is in slot k % max, and a slot is reused only after the reply in it was taken.
TEST(RpcWindow, ReceiveSlotsFollowArrivalOrder) {
  RpcWindow w(1 << 16, 4);
  RpcWindow::Slot s;
  std::vector<int> slots;
  for (uint64_t i = 1; i <= 4; ++i) {
    ASSERT_TRUE(w.Reserve(64, i, &s));
    slots.push_back(s.recv_slot);
  }
  EXPECT_EQ(slots, (std::vector<int>{0, 1, 2, 3}));
  EXPECT_FALSE(w.Reserve(64, 5, &s)) << "every receive slot holds a pending reply";
  EXPECT_EQ(w.NextRecvSlot(), 0);
  ASSERT_TRUE(w.ReplyTaken(3));  // arrival 0 (in slot 0) was the reply to request 3
  EXPECT_EQ(w.NextRecvSlot(), 1);
  EXPECT_FALSE(w.Reserve(64, 5, &s)) << "request 1 still holds its ring space and entry";
  for (int i = 0; i < 4; ++i) w.SendDone();
  ASSERT_TRUE(w.ReplyTaken(1));
  EXPECT_EQ(w.NextRecvSlot(), 2);
  ASSERT_TRUE(w.Reserve(64, 5, &s));
  EXPECT_EQ(s.recv_slot, 0) << "the 5th receive: arrivals 0 and 1 were taken, slot 0 is free";
}

}  // namespace
}  // namespace rkv
