// SPDX-License-Identifier: Apache-2.0
// DrainRecord (common/cluster/drain_record.h): round trip, the key it lives at, every corrupted
// byte and every wrong length refused, a key naming another id refused, a zero id neither
// encoded nor decoded.
#include "common/cluster/drain_record.h"

#include <gtest/gtest.h>

#include <string>

#include "common/cluster/le_bytes.h"

namespace rkv::cluster {
namespace {

DrainRecord Sample() {
  DrainRecord r;
  r.server = 70000;
  r.map_epoch = 0x0102030405060708ull;
  return r;
}

TEST(DrainRecord, RoundTripsAtItsKey) {
  const DrainRecord r = Sample();
  EXPECT_EQ(r.KeySuffix(), "draining/70000");
  std::string bytes;
  ASSERT_TRUE(r.Encode(&bytes).ok());
  ASSERT_EQ(bytes.size(), kDrainRecordBytes);
  EXPECT_EQ(GetLE(bytes, 0, 4), kDrainMagic);
  DrainRecord d;
  ASSERT_TRUE(DrainRecord::Decode(r.KeySuffix(), bytes, &d).ok());
  EXPECT_EQ(d.server, r.server);
  EXPECT_EQ(d.map_epoch, r.map_epoch);
}

TEST(DrainRecord, EveryCorruptionIsRefused) {
  std::string bytes;
  ASSERT_TRUE(Sample().Encode(&bytes).ok());
  const std::string key = Sample().KeySuffix();
  DrainRecord d;
  for (size_t i = 0; i < bytes.size(); ++i)
    for (uint8_t x : {0x01, 0x40, 0xff}) {
      std::string bad = bytes;
      bad[i] = char(bad[i] ^ x);
      EXPECT_EQ(DrainRecord::Decode(key, bad, &d).code(), Code::kProtocolError)
          << "byte " << i << " ^ " << int(x);
    }
  for (size_t n : {size_t(0), size_t(8), kDrainRecordBytes - 1})
    EXPECT_EQ(DrainRecord::Decode(key, bytes.substr(0, n), &d).code(), Code::kProtocolError);
  EXPECT_EQ(DrainRecord::Decode(key, bytes + '\0', &d).code(), Code::kProtocolError);
}

TEST(DrainRecord, TheKeyMustNameItsId) {
  std::string bytes;
  ASSERT_TRUE(Sample().Encode(&bytes).ok());
  DrainRecord d;
  for (const char* key :
       {"draining/70001", "draining/070000", "draining/70000/", "suspects/70000", "draining/", ""})
    EXPECT_EQ(DrainRecord::Decode(key, bytes, &d).code(), Code::kProtocolError) << key;
}

TEST(DrainRecord, AZeroIdIsNeitherEncodedNorDecoded) {
  DrainRecord r, d;
  std::string bytes;
  EXPECT_EQ(r.Encode(&bytes).code(), Code::kInvalidArgument);
  // A record with server 0 and a valid checksum: refused as meaningless.
  ASSERT_TRUE(Sample().Encode(&bytes).ok());
  PutLE(&bytes, 16, 0, 4);
  PutLE(&bytes, 8, 0, 8);
  PutLE(&bytes, 8, ChecksumWithFieldZeroed(bytes, 8), 8);
  EXPECT_EQ(DrainRecord::Decode("draining/0", bytes, &d).code(), Code::kProtocolError);
  // A non-zero reserved field with a valid checksum.
  ASSERT_TRUE(Sample().Encode(&bytes).ok());
  PutLE(&bytes, 20, 1, 4);
  PutLE(&bytes, 8, 0, 8);
  PutLE(&bytes, 8, ChecksumWithFieldZeroed(bytes, 8), 8);
  EXPECT_EQ(DrainRecord::Decode("draining/70000", bytes, &d).code(), Code::kProtocolError);
}

}  // namespace
}  // namespace rkv::cluster
