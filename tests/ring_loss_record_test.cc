// SPDX-License-Identifier: Apache-2.0
// RingLossRecord (common/cluster/ring_loss_record.h): round trip at its key, every corrupted
// byte and every wrong length refused, a key naming another server refused, and records that
// cannot mean anything (server 0, no slots, slots out of order or repeated) neither encoded nor
// decoded.
#include "common/cluster/ring_loss_record.h"

#include <gtest/gtest.h>

#include <string>

#include "common/cluster/le_bytes.h"

namespace rkv::cluster {
namespace {

RingLossRecord Sample() {
  RingLossRecord r;
  r.server = 70000;
  r.map_epoch = 0x0102030405060708ull;
  r.slots = {0, 7, 65535};
  return r;
}

TEST(RingLossRecord, RoundTripsAtItsKey) {
  const RingLossRecord r = Sample();
  EXPECT_EQ(r.KeySuffix(), "ringloss/70000");
  std::string bytes;
  ASSERT_TRUE(r.Encode(&bytes).ok());
  ASSERT_EQ(bytes.size(), kRingLossHeaderBytes + 4 * r.slots.size());
  EXPECT_EQ(GetLE(bytes, 0, 4), kRingLossMagic);
  RingLossRecord d;
  ASSERT_TRUE(RingLossRecord::Decode(r.KeySuffix(), bytes, &d).ok());
  EXPECT_EQ(d.server, r.server);
  EXPECT_EQ(d.map_epoch, r.map_epoch);
  EXPECT_EQ(d.slots, r.slots);
}

TEST(RingLossRecord, EveryCorruptionIsRefused) {
  std::string bytes;
  ASSERT_TRUE(Sample().Encode(&bytes).ok());
  const std::string key = Sample().KeySuffix();
  RingLossRecord d;
  for (size_t i = 0; i < bytes.size(); ++i)
    for (uint8_t x : {0x01, 0x40, 0xff}) {
      std::string bad = bytes;
      bad[i] = char(bad[i] ^ x);
      EXPECT_EQ(RingLossRecord::Decode(key, bad, &d).code(), Code::kProtocolError)
          << "byte " << i << " ^ " << int(x);
    }
  for (size_t n : {size_t(0), size_t(8), kRingLossHeaderBytes, bytes.size() - 1})
    EXPECT_EQ(RingLossRecord::Decode(key, bytes.substr(0, n), &d).code(), Code::kProtocolError);
  EXPECT_EQ(RingLossRecord::Decode(key, bytes + std::string(4, '\0'), &d).code(),
            Code::kProtocolError);
}

TEST(RingLossRecord, TheKeyMustNameItsServer) {
  std::string bytes;
  ASSERT_TRUE(Sample().Encode(&bytes).ok());
  RingLossRecord d;
  for (const char* key :
       {"ringloss/7000", "ringloss/070000", "ringloss/70000/", "suspects/70000", ""})
    EXPECT_EQ(RingLossRecord::Decode(key, bytes, &d).code(), Code::kProtocolError) << key;
}

TEST(RingLossRecord, MeaninglessRecordsAreNeitherEncodedNorDecoded) {
  std::string out;
  for (auto change :
       {+[](RingLossRecord* r) { r->server = 0; }, +[](RingLossRecord* r) { r->slots.clear(); },
        +[](RingLossRecord* r) {
          r->slots = {3, 3};
        },
        +[](RingLossRecord* r) {
          r->slots = {4, 3};
        },
        +[](RingLossRecord* r) { r->slots.assign(kRingLossMaxSlots + 1, 0); }}) {
    RingLossRecord r = Sample();
    change(&r);
    EXPECT_EQ(r.Encode(&out).code(), Code::kInvalidArgument);
  }
  // Slots out of order, with a valid checksum: refused by Decode too.
  std::string bytes;
  ASSERT_TRUE(Sample().Encode(&bytes).ok());
  PutLE(&bytes, kRingLossHeaderBytes, 7, 4);  // slots 7, 7, 65535
  PutLE(&bytes, 8, ChecksumWithFieldZeroed(bytes, 8), 8);
  RingLossRecord d;
  EXPECT_EQ(RingLossRecord::Decode(Sample().KeySuffix(), bytes, &d).code(), Code::kProtocolError);
}

}  // namespace
}  // namespace rkv::cluster
