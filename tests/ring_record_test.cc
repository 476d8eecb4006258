// SPDX-License-Identifier: Apache-2.0
// Log ring records (common/cluster/ring_record.h): round trip of a write and of a wrap record;
// nothing there yet is told apart from garbage; every corrupted byte, a former lap's index, a
// length past the ring's end and a record still being written (a prefix placed) are refused;
// the writer's and the reader's wrap decisions agree.
#include "common/cluster/ring_record.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

namespace rkv::cluster {
namespace {

wire::ReplicateHeader Header(uint8_t kind, std::string_view key, std::string_view value) {
  wire::ReplicateHeader h{};
  h.epoch = 7;
  h.sequence = 42;
  h.sender_id = 3;
  h.kind = kind;
  h.digest = wire::ReplicateDigest(kind, key, value);
  return h;
}

std::string Encoded(uint64_t index, std::string_view key, std::string_view value) {
  std::string out(RingRecordBytes(key.size(), value.size()), '\x55');
  EncodeRingRecord(index, index * 10, Header(wire::kReplicatePut, key, value), key, value,
                   reinterpret_cast<uint8_t*>(out.data()));
  return out;
}

TEST(RingRecord, AWriteRoundTrips) {
  const std::string key = "user:17", value = "a value of some bytes";
  const std::string bytes = Encoded(9, key, value);
  EXPECT_EQ(bytes.size() % 8, 0u);
  EXPECT_EQ(bytes.size(), RingRecordBytes(key.size(), value.size()));
  std::string ring = bytes + std::string(128, '\0');  // the ring runs on
  RingRecordView v;
  ASSERT_TRUE(DecodeRingRecord(ring, 9, &v).ok());
  EXPECT_FALSE(v.wrap);
  EXPECT_EQ(v.index, 9u);
  EXPECT_EQ(v.order, 90u);
  EXPECT_EQ(v.length, bytes.size());
  EXPECT_EQ(v.key, key);
  EXPECT_EQ(v.value, value);
  EXPECT_EQ(v.header.epoch, 7u);
  EXPECT_EQ(v.header.sequence, 42u);
  EXPECT_EQ(v.header.sender_id, 3u);
  EXPECT_EQ(v.header.digest, wire::ReplicateDigest(wire::kReplicatePut, key, value));
  EXPECT_EQ(PeekRingLength(ring), bytes.size());
}

TEST(RingRecord, ADeleteAndAWrapRoundTrip) {
  std::string del(RingRecordBytes(3, 0), '\0');
  EncodeRingRecord(1, 10, Header(wire::kReplicateDelete, "abc", ""), "abc", "",
                   reinterpret_cast<uint8_t*>(del.data()));
  RingRecordView v;
  ASSERT_TRUE(DecodeRingRecord(del, 1, &v).ok());
  EXPECT_EQ(v.key, "abc");
  EXPECT_TRUE(v.value.empty());
  std::string wrap(kRingHeaderBytes, '\0');
  EncodeRingWrap(2, reinterpret_cast<uint8_t*>(wrap.data()));
  ASSERT_TRUE(DecodeRingRecord(wrap, 2, &v).ok());
  EXPECT_TRUE(v.wrap);
  EXPECT_EQ(v.length, kRingHeaderBytes);
}

TEST(RingRecord, NothingYetIsNotFoundAndGarbageIsRefused) {
  RingRecordView v;
  EXPECT_EQ(DecodeRingRecord(std::string(256, '\0'), 1, &v).code(), Code::kNotFound);
  EXPECT_EQ(DecodeRingRecord(std::string(256, '\x01'), 1, &v).code(), Code::kProtocolError);
  EXPECT_EQ(DecodeRingRecord(std::string(32, '\0'), 1, &v).code(), Code::kProtocolError);
}

TEST(RingRecord, EveryCorruptedByteIsRefused) {
  const std::string good = Encoded(5, "k", "v");
  for (size_t i = 0; i < good.size(); ++i) {
    std::string bad = good;
    bad[i] = char(bad[i] ^ 0x20);
    RingRecordView v;
    EXPECT_FALSE(DecodeRingRecord(bad, 5, &v).ok()) << "byte " << i;
  }
}

TEST(RingRecord, AnotherIndexIsMalformed) {
  // Complete (the checksum holds) but out of step: malformed, not unfinished.
  const std::string bytes = Encoded(5, "k", "v");
  RingRecordView v;
  EXPECT_EQ(DecodeRingRecord(bytes, 6, &v).code(), Code::kBadRequest);
  EXPECT_EQ(DecodeRingRecord(bytes, 4, &v).code(), Code::kBadRequest);
}

TEST(RingRecord, ARecordPastTheRingsEndOrStillBeingWrittenIsRefused) {
  const std::string bytes = Encoded(5, "key", std::string(301, 'x'));  // no padding
  RingRecordView v;
  // The ring ends before the record does (a length that lies).
  EXPECT_EQ(DecodeRingRecord(std::string_view(bytes).substr(0, bytes.size() - 8), 5, &v).code(),
            Code::kProtocolError);
  // A prefix placed, the rest still zero (or a former lap's zeroed bytes).
  for (size_t placed : {size_t(8), size_t(64), bytes.size() / 2, bytes.size() - 1}) {
    std::string partial = bytes.substr(0, placed) + std::string(bytes.size() - placed, '\0');
    EXPECT_FALSE(DecodeRingRecord(partial, 5, &v).ok()) << placed << " bytes placed";
  }
}

TEST(RingRecord, WriterAndReaderWrapAlike) {
  const RingLayout ring(kRingControlBytes + 1024);
  EXPECT_EQ(ring.capacity(), 1024u);
  EXPECT_EQ(ring.max_record(), 128u);
  bool wrap_record = false;
  size_t skipped = 0;
  // Room: no wrap.
  EXPECT_FALSE(ring.MustWrap(kRingControlBytes, 128, &wrap_record, &skipped));
  // 72 bytes left, a record of 80: a wrap record fits, and the reader finds it.
  const size_t at = ring.size() - 72;
  ASSERT_TRUE(ring.MustWrap(at, 80, &wrap_record, &skipped));
  EXPECT_TRUE(wrap_record);
  EXPECT_EQ(skipped, 72u);
  EXPECT_FALSE(ring.ImplicitWrap(at));
  // 72 bytes left: no wrap record, and the reader wraps on its own there.
  ASSERT_TRUE(ring.MustWrap(ring.size() - 64, 72, &wrap_record, &skipped));
  EXPECT_FALSE(wrap_record);
  EXPECT_EQ(skipped, 64u);
  EXPECT_TRUE(ring.ImplicitWrap(ring.size() - 64));
}

}  // namespace
}  // namespace rkv::cluster
