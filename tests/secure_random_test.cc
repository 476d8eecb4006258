// Unit tests of SecureRandom: PSNs fit 24 bits, are never 0 and show no constant step (an
// mt19937 or counter would), and a failing or interrupted source is a Status, not a crash.
#include "common/secure_random.h"

#include <gtest/gtest.h>

#include <cerrno>
#include <set>
#include <vector>

namespace rkv {
namespace {

TEST(SecureRandom, PsnsFit24BitsNeverZeroAndHaveNoConstantStep) {
  std::vector<uint32_t> psns;
  for (int i = 0; i < 1000; ++i) {
    uint32_t p = 0;
    ASSERT_TRUE(SecureRandom::Psn(&p).ok());
    ASSERT_NE(p, 0u);
    ASSERT_LE(p, 0xffffffu);
    psns.push_back(p);
  }
  // No constant step between consecutive PSNs (mod 2^24), and steps barely repeat at all.
  std::set<uint32_t> steps, values(psns.begin(), psns.end());
  for (size_t i = 1; i < psns.size(); ++i) steps.insert((psns[i] - psns[i - 1]) & 0xffffff);
  EXPECT_GT(steps.size(), 990u);
  // 1000 draws from 2^24 values: a collision or two is possible, many are not.
  EXPECT_GT(values.size(), 995u);
  // Every bit of the 24 moves: each is set in roughly half of the draws.
  for (int b = 0; b < 24; ++b) {
    int set = 0;
    for (uint32_t p : psns) set += (p >> b) & 1;
    EXPECT_GT(set, 380) << "bit " << b;
    EXPECT_LT(set, 620) << "bit " << b;
  }
}

TEST(SecureRandom, HexAndU64) {
  std::string a, b;
  ASSERT_TRUE(SecureRandom::Hex(8, &a).ok());
  ASSERT_TRUE(SecureRandom::Hex(8, &b).ok());
  EXPECT_EQ(a.size(), 16u);
  EXPECT_EQ(a.find_first_not_of("0123456789abcdef"), std::string::npos);
  EXPECT_NE(a, b);
  uint64_t x = 0, y = 0;
  ASSERT_TRUE(SecureRandom::U64(&x).ok());
  ASSERT_TRUE(SecureRandom::U64(&y).ok());
  EXPECT_NE(x, y);
}

// A source that is interrupted, then hands out one byte at a time.
int calls = 0;
ssize_t Dribble(void* buf, size_t, unsigned) {
  if (calls++ % 2 == 0) {
    errno = EINTR;
    return -1;
  }
  *static_cast<uint8_t*>(buf) = 0xab;
  return 1;
}
ssize_t Broken(void*, size_t, unsigned) {
  errno = ENOSYS;
  return -1;
}
ssize_t Empty(void*, size_t, unsigned) { return 0; }

TEST(SecureRandom, RetriesInterruptedAndShortReads) {
  uint8_t buf[16] = {};
  ASSERT_TRUE(SecureRandom::FillFrom(Dribble, buf, sizeof buf).ok());
  for (uint8_t c : buf) EXPECT_EQ(c, 0xab);
}

TEST(SecureRandom, FailureIsAStatusNamingTheCall) {
  uint8_t buf[8];
  Status s = SecureRandom::FillFrom(Broken, buf, sizeof buf);
  EXPECT_EQ(s.code(), Code::kIoError);
  EXPECT_NE(s.message().find("getrandom failed"), std::string::npos) << s.ToString();
  EXPECT_NE(s.message().find("not implemented"), std::string::npos) << s.ToString();
  EXPECT_FALSE(SecureRandom::FillFrom(Empty, buf, sizeof buf).ok());
}

}  // namespace
}  // namespace rkv
