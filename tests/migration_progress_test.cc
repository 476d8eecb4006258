// SPDX-License-Identifier: Apache-2.0
// MigrationProgress (common/cluster/migration_progress.h): round trip, every corrupted byte and
// every wrong length refused, an unknown phase refused; ProgressWatch
// (server/cluster/progress_watch.h): a batch is stalled only once its own reports stopped
// changing for the limit (another batch's reports, or none, do not count as progress).
#include "common/cluster/migration_progress.h"

#include <gtest/gtest.h>

#include <chrono>
#include <string>

#include "common/cluster/le_bytes.h"
#include "server/cluster/progress_watch.h"

namespace rkv::cluster {
namespace {

MigrationProgress Sample() {
  MigrationProgress p;
  p.phase = MigrationProgress::kCatchUp;
  p.nonce = 0x0102030405060708ull;
  p.keys = 1234567;
  p.bytes = 0xfedcba9876ull;
  p.scanned = 4096 * 3;
  return p;
}

TEST(MigrationProgress, RoundTrips) {
  const std::string bytes = Sample().Encode();
  ASSERT_EQ(bytes.size(), kProgressBytes);
  EXPECT_EQ(GetLE(bytes, 0, 4), kProgressMagic);
  MigrationProgress d;
  ASSERT_TRUE(MigrationProgress::Decode(bytes, &d).ok());
  EXPECT_TRUE(d == Sample());
}

TEST(MigrationProgress, EveryCorruptionIsRefused) {
  const std::string bytes = Sample().Encode();
  MigrationProgress d;
  for (size_t i = 0; i < bytes.size(); ++i)
    for (uint8_t x : {0x01, 0x40, 0xff}) {
      std::string bad = bytes;
      bad[i] = char(bad[i] ^ x);
      EXPECT_EQ(MigrationProgress::Decode(bad, &d).code(), Code::kProtocolError)
          << "byte " << i << " ^ " << int(x);
    }
  for (size_t n : {size_t(0), size_t(8), kProgressBytes - 1})
    EXPECT_EQ(MigrationProgress::Decode(bytes.substr(0, n), &d).code(), Code::kProtocolError);
  EXPECT_EQ(MigrationProgress::Decode(bytes + '\0', &d).code(), Code::kProtocolError);
  for (uint16_t phase : {0, 5, 0xffff}) {  // a well-formed record of an unknown phase
    std::string odd = bytes;
    PutLE(&odd, 6, phase, 2);
    PutLE(&odd, 8, ChecksumWithFieldZeroed(odd, 8), 8);
    EXPECT_EQ(MigrationProgress::Decode(odd, &d).code(), Code::kProtocolError) << phase;
  }
}

TEST(ProgressWatch, StalledOnlyWhenItsOwnReportsStopChanging) {
  using std::chrono::seconds;
  const auto t0 = ProgressWatch::Clock::now();
  ProgressWatch w(7, t0, std::chrono::milliseconds(60000), std::chrono::milliseconds(300000));
  EXPECT_FALSE(w.Stalled(t0 + seconds(299)));  // before the first report: the longer limit
  EXPECT_TRUE(w.Stalled(t0 + seconds(301)));
  MigrationProgress p;
  p.nonce = 7;
  p.keys = 10;
  w.Saw(true, &p, t0 + seconds(50));
  EXPECT_FALSE(w.Stalled(t0 + seconds(109)));
  w.Saw(true, &p, t0 + seconds(100));  // the same report again: no progress
  EXPECT_TRUE(w.Stalled(t0 + seconds(111)));
  MigrationProgress other = p;
  other.nonce = 8;
  other.keys = 99;
  w.Saw(true, &other, t0 + seconds(105));   // another batch's report
  w.Saw(true, nullptr, t0 + seconds(106));  // none readable
  EXPECT_TRUE(w.Stalled(t0 + seconds(111)));
  p.phase = MigrationProgress::kPaused;  // a phase change is progress too
  w.Saw(true, &p, t0 + seconds(110));
  EXPECT_FALSE(w.Stalled(t0 + seconds(169)));
  p.scanned = 4096;  // so is a scan that went on
  w.Saw(true, &p, t0 + seconds(160));
  EXPECT_FALSE(w.Stalled(t0 + seconds(219)));
  EXPECT_TRUE(w.Stalled(t0 + seconds(221)));
}

TEST(ProgressWatch, TimeWhileEtcdCannotBeReadDoesNotCount) {
  using std::chrono::seconds;
  const auto t0 = ProgressWatch::Clock::now();
  ProgressWatch w(7, t0, std::chrono::milliseconds(60000), std::chrono::milliseconds(60000));
  MigrationProgress p;
  p.nonce = 7;
  w.Saw(true, &p, t0);
  w.Saw(false, nullptr, t0 + seconds(10));  // etcd away for minutes
  EXPECT_FALSE(w.Stalled(t0 + seconds(200)));
  w.Saw(true, &p, t0 + seconds(200));  // back, the same report: a whole limit from now
  EXPECT_FALSE(w.Stalled(t0 + seconds(259)));
  EXPECT_TRUE(w.Stalled(t0 + seconds(261)));
}

}  // namespace
}  // namespace rkv::cluster
