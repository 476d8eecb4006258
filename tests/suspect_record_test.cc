// SPDX-License-Identifier: Apache-2.0
// SuspectRecord (common/cluster/suspect_record.h): round trip, the key it lives at, every
// corrupted byte and every wrong length refused, a key naming other ids refused, and records
// that cannot mean anything (zero ids, a server suspecting itself) neither encoded nor decoded.
#include "common/cluster/suspect_record.h"

#include <gtest/gtest.h>

#include <string>

#include "common/cluster/le_bytes.h"

namespace rkv::cluster {
namespace {

SuspectRecord Sample() {
  SuspectRecord r;
  r.reporter = 3;
  r.backup = 70000;
  r.map_epoch = 0x0102030405060708ull;
  return r;
}

TEST(SuspectRecord, RoundTripsAtItsKey) {
  const SuspectRecord r = Sample();
  EXPECT_EQ(r.KeySuffix(), "suspects/70000/3");
  std::string bytes;
  ASSERT_TRUE(r.Encode(&bytes).ok());
  ASSERT_EQ(bytes.size(), kSuspectRecordBytes);
  EXPECT_EQ(GetLE(bytes, 0, 4), kSuspectMagic);
  SuspectRecord d;
  ASSERT_TRUE(SuspectRecord::Decode(r.KeySuffix(), bytes, &d).ok());
  EXPECT_EQ(d.reporter, r.reporter);
  EXPECT_EQ(d.backup, r.backup);
  EXPECT_EQ(d.map_epoch, r.map_epoch);
}

TEST(SuspectRecord, EveryCorruptionIsRefused) {
  std::string bytes;
  ASSERT_TRUE(Sample().Encode(&bytes).ok());
  const std::string key = Sample().KeySuffix();
  SuspectRecord d;
  for (size_t i = 0; i < bytes.size(); ++i)
    for (uint8_t x : {0x01, 0x40, 0xff}) {
      std::string bad = bytes;
      bad[i] = char(bad[i] ^ x);
      EXPECT_EQ(SuspectRecord::Decode(key, bad, &d).code(), Code::kProtocolError)
          << "byte " << i << " ^ " << int(x);
    }
  for (size_t n : {size_t(0), size_t(8), kSuspectRecordBytes - 1})
    EXPECT_EQ(SuspectRecord::Decode(key, bytes.substr(0, n), &d).code(), Code::kProtocolError);
  EXPECT_EQ(SuspectRecord::Decode(key, bytes + '\0', &d).code(), Code::kProtocolError);
}

TEST(SuspectRecord, TheKeyMustNameItsIds) {
  std::string bytes;
  ASSERT_TRUE(Sample().Encode(&bytes).ok());
  SuspectRecord d;
  for (const char* key : {"suspects/3/70000", "suspects/70000/4", "suspects/70000/3/",
                          "suspects/70000/03", "servers/70000/3", ""})
    EXPECT_EQ(SuspectRecord::Decode(key, bytes, &d).code(), Code::kProtocolError) << key;
}

TEST(SuspectRecord, MeaninglessRecordsAreRefused) {
  std::string bytes;
  for (auto [reporter, backup] : {std::pair<uint32_t, uint32_t>{0, 2}, {2, 0}, {5, 5}}) {
    SuspectRecord r;
    r.reporter = reporter;
    r.backup = backup;
    EXPECT_EQ(r.Encode(&bytes).code(), Code::kInvalidArgument) << reporter << " " << backup;
    // The same fields written by hand, with a valid checksum, do not decode either.
    bytes.assign(kSuspectRecordBytes, '\0');
    PutLE(&bytes, 0, kSuspectMagic, 4);
    PutLE(&bytes, 4, kSuspectVersion, 2);
    PutLE(&bytes, 16, reporter, 4);
    PutLE(&bytes, 20, backup, 4);
    PutLE(&bytes, 8, ChecksumWithFieldZeroed(bytes, 8), 8);
    SuspectRecord d;
    EXPECT_EQ(SuspectRecord::Decode(r.KeySuffix(), bytes, &d).code(), Code::kProtocolError);
  }
}

}  // namespace
}  // namespace rkv::cluster
