// SPDX-License-Identifier: Apache-2.0
// Unit tests of SecureRandom: PSNs fit 24 bits and are never 0; Fill's output is not a
// Mersenne Twister's (the seeded generator a careless implementation would use: its next output
// is computed from 624 outputs seen); a failing or interrupted source is a Status, not a crash.
// What each check catches is shown on made-up inputs beside it (negative controls): the PSN
// statistics catch a counter, a constant step and a stuck bit but NOT an mt19937, which passes
// any such statistics; the prediction check catches mt19937 and mt19937_64.
#include "common/secure_random.h"

#include <gtest/gtest.h>

#include <cerrno>
#include <cstring>
#include <random>
#include <set>
#include <string>
#include <vector>

namespace rkv {
namespace {

// What is wrong with a sequence of PSNs as random 24-bit values (empty: nothing seen).
std::vector<std::string> PsnFlaws(const std::vector<uint32_t>& psns) {
  std::vector<std::string> flaws;
  for (uint32_t p : psns)
    if (p == 0 || p > 0xffffff) flaws.push_back("out of range: " + std::to_string(p));
  // No constant step between consecutive PSNs (mod 2^24), and steps barely repeat at all.
  std::set<uint32_t> steps, values(psns.begin(), psns.end());
  for (size_t i = 1; i < psns.size(); ++i) steps.insert((psns[i] - psns[i - 1]) & 0xffffff);
  if (steps.size() <= psns.size() - 10)
    flaws.push_back(std::to_string(steps.size()) + " distinct steps");
  // 1000 draws from 2^24 values: a collision or two is possible, many are not.
  if (values.size() <= psns.size() - 5)
    flaws.push_back(std::to_string(values.size()) + " distinct values");
  // Every bit of the 24 moves: each is set in roughly half of the draws (38% to 62%).
  for (int b = 0; b < 24; ++b) {
    size_t set = 0;
    for (uint32_t p : psns) set += (p >> b) & 1;
    if (set * 100 <= psns.size() * 38 || set * 100 >= psns.size() * 62)
      flaws.push_back("bit " + std::to_string(b) + " set in " + std::to_string(set));
  }
  return flaws;
}

std::string Join(const std::vector<std::string>& v) {
  std::string out;
  for (const std::string& s : v) out += s + "; ";
  return out;
}

TEST(SecureRandom, PsnsFit24BitsNeverZeroAndHaveNoConstantStep) {
  std::vector<uint32_t> psns;
  for (int i = 0; i < 1000; ++i) {
    uint32_t p = 0;
    ASSERT_TRUE(SecureRandom::Psn(&p).ok());
    psns.push_back(p);
  }
  EXPECT_EQ(Join(PsnFlaws(psns)), "");
}

// What the PSN statistics catch, and what they do not.
TEST(SecureRandom, PsnChecksCatchACounterAStepAndAStuckBitButNotAnMt19937) {
  std::vector<uint32_t> counter, step, stuck, mt;
  std::mt19937 gen(12345);
  std::mt19937_64 rng(7);
  for (uint32_t i = 0; i < 1000; ++i) {
    counter.push_back(1000 + i);
    step.push_back(((i * 0x9e3779u) & 0xffffff) | 1);
    stuck.push_back(uint32_t(rng() & 0xffffff) | 0x800);
    uint32_t p;
    do p = gen() & 0xffffff;
    while (p == 0);
    mt.push_back(p);
  }
  EXPECT_NE(Join(PsnFlaws(counter)), "");
  EXPECT_NE(Join(PsnFlaws(step)), "");
  EXPECT_NE(Join(PsnFlaws(stuck)), "");
  // A seeded mt19937 looks random to any such statistic: the prediction check below is the one
  // that tells it apart.
  EXPECT_EQ(Join(PsnFlaws(mt)), "");
}

// Mersenne Twister state recovery: the tempering is invertible, so n consecutive outputs give n
// consecutive state words, from which the recurrence x[k+n] = x[k+m] ^ twist(x[k], x[k+1])
// computes every later output. Returns how many of out[n..] the first n predict.
template <typename UInt, int n, int m, int r, UInt a, int u, UInt d, int s, UInt b, int t, UInt c,
          int l>
struct Mt {
  static constexpr int kBits = 8 * sizeof(UInt);
  static UInt UndoRight(UInt y, int shift, UInt mask) {  // inverse of y ^= (y >> shift) & mask
    UInt x = y;
    for (int i = 0; i < kBits / shift + 1; ++i) x = y ^ ((x >> shift) & mask);
    return x;
  }
  static UInt UndoLeft(UInt y, int shift, UInt mask) {  // inverse of y ^= (y << shift) & mask
    UInt x = y;
    for (int i = 0; i < kBits / shift + 1; ++i) x = y ^ ((x << shift) & mask);
    return x;
  }
  static UInt Untemper(UInt y) {
    y = UndoRight(y, l, ~UInt(0));
    y = UndoLeft(y, t, c);
    y = UndoLeft(y, s, b);
    return UndoRight(y, u, d);
  }
  static UInt Temper(UInt y) {
    y ^= (y >> u) & d;
    y ^= (y << s) & b;
    y ^= (y << t) & c;
    return y ^ (y >> l);
  }
  static size_t Predicted(const std::vector<UInt>& out) {
    constexpr UInt kLower = (UInt(1) << r) - 1;
    std::vector<UInt> x;
    for (size_t i = 0; i < size_t(n) && i < out.size(); ++i) x.push_back(Untemper(out[i]));
    size_t hits = 0;
    for (size_t k = 0; k + n < out.size(); ++k) {
      const UInt y = (x[k] & ~kLower) | (x[k + 1] & kLower);
      x.push_back(x[k + m] ^ (y >> 1) ^ ((y & 1) ? a : 0));
      hits += Temper(x[k + n]) == out[k + n];
    }
    return hits;
  }
};
using Mt32 =
    Mt<uint32_t, 624, 397, 31, 0x9908b0dfu, 11, 0xffffffffu, 7, 0x9d2c5680u, 15, 0xefc60000u, 18>;
using Mt64 = Mt<uint64_t, 312, 156, 31, 0xb5026f5aa96619e9ull, 29, 0x5555555555555555ull, 17,
                0x71d67fffeda60000ull, 37, 0xfff7eee000000000ull, 43>;

// The check works: it predicts every later output of std::mt19937 and std::mt19937_64 (any
// seed, any starting point), so a Fill built on either fails the test below.
TEST(SecureRandom, PredictionCheckCatchesMt19937AndMt19937_64) {
  std::mt19937 g32(std::random_device{}());
  std::mt19937_64 g64(std::random_device{}());
  g32.discard(1000);
  g64.discard(77);
  std::vector<uint32_t> w32(700);
  std::vector<uint64_t> w64(400);
  for (auto& w : w32) w = g32();
  for (auto& w : w64) w = g64();
  EXPECT_EQ(Mt32::Predicted(w32), 700u - 624u);
  EXPECT_EQ(Mt64::Predicted(w64), 400u - 312u);
  // The same outputs as bytes, read back as Fill's are below.
  std::vector<uint8_t> bytes(w32.size() * 4);
  std::memcpy(bytes.data(), w32.data(), bytes.size());
  std::vector<uint32_t> back(w32.size());
  std::memcpy(back.data(), bytes.data(), bytes.size());
  EXPECT_EQ(Mt32::Predicted(back), 700u - 624u);
}

// Fill's bytes, read as consecutive 32-bit or 64-bit words (as an mt19937 or mt19937_64 behind
// it would write them), and U64's values one call after another: no output follows from the
// ones before (by chance: 2^-32 or 2^-64 per word).
TEST(SecureRandom, FillAndU64AreNotAMersenneTwister) {
  std::vector<uint32_t> w32(700);
  ASSERT_TRUE(SecureRandom::Fill(w32.data(), w32.size() * sizeof w32[0]).ok());
  EXPECT_EQ(Mt32::Predicted(w32), 0u);
  std::vector<uint64_t> w64(400);
  ASSERT_TRUE(SecureRandom::Fill(w64.data(), w64.size() * sizeof w64[0]).ok());
  EXPECT_EQ(Mt64::Predicted(w64), 0u);
  std::vector<uint64_t> u(400);
  for (auto& x : u) ASSERT_TRUE(SecureRandom::U64(&x).ok());
  EXPECT_EQ(Mt64::Predicted(u), 0u);
  std::vector<uint32_t> halves(2 * u.size());
  std::memcpy(halves.data(), u.data(), u.size() * sizeof u[0]);
  EXPECT_EQ(Mt32::Predicted(halves), 0u);
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
