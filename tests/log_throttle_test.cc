// SPDX-License-Identifier: Apache-2.0
// LogThrottle (server/conn/log_throttle.h): refusal warnings are bounded per second (review of
// issue 12, finding 5), and what was held back is reported with the next line.
#include "server/conn/log_throttle.h"

#include <gtest/gtest.h>

namespace rkv {
namespace {

TEST(LogThrottle, AtMostNLinesASecondAndTheRestCounted) {
  LogThrottle t(3);
  auto now = LogThrottle::Clock::now();
  uint64_t held = 99;
  int logged = 0;
  for (int i = 0; i < 1000; ++i)
    if (t.Admit(now + std::chrono::microseconds(i), &held)) ++logged;
  EXPECT_EQ(logged, 3) << "a flood of 1000 refusals in 1 ms";
  now += std::chrono::seconds(1);
  ASSERT_TRUE(t.Admit(now, &held));
  EXPECT_EQ(held, 997u) << "reported with the next line";
  ASSERT_TRUE(t.Admit(now, &held));
  EXPECT_EQ(held, 0u);
  EXPECT_EQ(HeldBackNote(0), "");
  EXPECT_NE(HeldBackNote(997).find("997 more"), std::string::npos);
}

}  // namespace
}  // namespace rkv
