// SPDX-License-Identifier: Apache-2.0
#include "common/parse.h"

#include <gtest/gtest.h>

namespace rkv {
TEST(ParseSize, Units) {
  uint64_t b = 0;
  ASSERT_TRUE(ParseSize("4096", &b).ok());
  EXPECT_EQ(b, 4096u);
  ASSERT_TRUE(ParseSize("64K", &b).ok());
  EXPECT_EQ(b, 65536u);
  ASSERT_TRUE(ParseSize("256M", &b).ok());
  EXPECT_EQ(b, 256ull << 20);
  ASSERT_TRUE(ParseSize("1GiB", &b).ok());
  EXPECT_EQ(b, 1ull << 30);
  ASSERT_TRUE(ParseSize("2g", &b).ok());
  EXPECT_EQ(b, 2ull << 30);
}
TEST(ParseSize, Errors) {
  uint64_t b = 0;
  EXPECT_EQ(ParseSize("", &b).code(), Code::kInvalidArgument);
  EXPECT_EQ(ParseSize("abc", &b).code(), Code::kInvalidArgument);
  EXPECT_EQ(ParseSize("12Q", &b).code(), Code::kInvalidArgument);
  EXPECT_EQ(ParseSize("-5", &b).code(), Code::kInvalidArgument);
  EXPECT_EQ(ParseSize("99999999999T", &b).code(), Code::kInvalidArgument);
}
TEST(ParseHostPort, Good) {
  std::string h;
  uint16_t p;
  ASSERT_TRUE(ParseHostPort("10.0.0.1:7470", &h, &p).ok());
  EXPECT_EQ(h, "10.0.0.1");
  EXPECT_EQ(p, 7470);
}
TEST(ParseHostPort, Bad) {
  std::string h;
  uint16_t p;
  EXPECT_FALSE(ParseHostPort("10.0.0.1", &h, &p).ok());
  EXPECT_FALSE(ParseHostPort(":80", &h, &p).ok());
  EXPECT_FALSE(ParseHostPort("h:0", &h, &p).ok());
  EXPECT_FALSE(ParseHostPort("h:70000", &h, &p).ok());
  EXPECT_FALSE(ParseHostPort("h:8x", &h, &p).ok());
}
}  // namespace rkv
