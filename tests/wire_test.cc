// SPDX-License-Identifier: Apache-2.0
#include "common/wire.h"

#include <gtest/gtest.h>

#include <cstring>
#include <vector>

namespace rkv::wire {
TEST(Wire, RequestRoundTrip) {
  std::vector<char> buf(kMaxRequestSize);
  std::string key("k\0ey", 4), value(1000, 'v');
  size_t n = EncodeRequest(Op::kPut, 42, key, value, buf.data(), buf.size());
  ASSERT_EQ(n, sizeof(RequestHeader) + 4 + 1000);
  Request r;
  ASSERT_TRUE(DecodeRequest(buf.data(), n, &r).ok());
  EXPECT_EQ(r.op, Op::kPut);
  EXPECT_EQ(r.request_id, 42u);
  EXPECT_EQ(r.key, key);
  EXPECT_EQ(r.value, value);
}
TEST(Wire, MalformedRequests) {
  std::vector<char> buf(256);
  size_t n = EncodeRequest(Op::kDelete, 1, "key", "", buf.data(), buf.size());
  Request r;
  EXPECT_EQ(DecodeRequest(buf.data(), 10, &r).code(), Code::kBadRequest);     // truncated
  EXPECT_EQ(DecodeRequest(buf.data(), n - 1, &r).code(), Code::kBadRequest);  // length mismatch
  EXPECT_EQ(DecodeRequest(buf.data(), n + 1, &r).code(), Code::kBadRequest);
  buf[6] = 12;  // unknown op (11, RING_GRANT, is the last one)
  EXPECT_EQ(DecodeRequest(buf.data(), n, &r).code(), Code::kBadRequest);
  buf[6] = 0;
  EXPECT_EQ(DecodeRequest(buf.data(), n, &r).code(), Code::kBadRequest);
  buf[6] = 2;
  buf[0] ^= 1;  // magic
  EXPECT_EQ(DecodeRequest(buf.data(), n, &r).code(), Code::kBadRequest);
  buf[0] ^= 1;
  RequestHeader h;
  std::memcpy(&h, buf.data(), sizeof(h));
  h.key_size = 0xffffffff;  // overflow attempt
  std::memcpy(buf.data(), &h, sizeof(h));
  EXPECT_EQ(DecodeRequest(buf.data(), n, &r).code(), Code::kBadRequest);
}
// Protocol 7 adds the migration ops 7..9 (server to server): they decode like the others.
TEST(Wire, MigrationOpsDecode) {
  std::vector<char> buf(256);
  const std::string slots("\x05\0\0\0\x06\0\0\0", 8);
  for (Op op : {Op::kMigrateBegin, Op::kMigratePut, Op::kMigrateDelete}) {
    const std::string value = op == Op::kMigratePut ? "v" : "";
    size_t n = EncodeRequest(op, 5, op == Op::kMigrateBegin ? slots : "key", value, buf.data(),
                             buf.size());
    Request r;
    ASSERT_TRUE(DecodeRequest(buf.data(), n, &r).ok()) << int(op);
    EXPECT_EQ(r.op, op);
    EXPECT_EQ(r.value, value);
  }
  EXPECT_EQ(static_cast<int>(Op::kMigrateDelete), 9);
}
// REPLICATE (10) carries its 24-byte header before the key; the largest key and value fit.
TEST(Wire, ReplicateFitsTheLargestEntry) {
  EXPECT_EQ(static_cast<int>(Op::kReplicate), 10);
  std::vector<char> buf(kMaxRequestSize);
  const std::string key(sizeof(ReplicateHeader) + kMaxKeySize, 'k');
  const std::string value(kMaxValueSize, 'v');
  size_t n = EncodeRequest(Op::kReplicate, 9, key, value, buf.data(), buf.size());
  ASSERT_EQ(n, kMaxRequestSize);
  Request r;
  ASSERT_TRUE(DecodeRequest(buf.data(), n, &r).ok());
  EXPECT_EQ(r.key.size(), key.size());
}
TEST(Wire, EncodeRefusesOverflow) {
  char buf[30];
  EXPECT_EQ(EncodeRequest(Op::kPut, 1, "key", "value", buf, sizeof(buf)), 0u);
}
TEST(Wire, ReplyRoundTrip) {
  char buf[kMaxReplySize];
  size_t n = EncodeReply(Op::kStats, 7, Code::kTableFull, "x 1\n", buf, sizeof(buf));
  Reply r;
  ASSERT_TRUE(DecodeReply(buf, n, &r).ok());
  EXPECT_EQ(r.status, Code::kTableFull);
  EXPECT_EQ(r.request_id, 7u);
  EXPECT_EQ(r.payload, "x 1\n");
  EXPECT_FALSE(DecodeReply(buf, n - 1, &r).ok());
}
// Statuses up to UNAVAILABLE (17; MOVED 15, TRY_AGAIN 16 with a MovedPayload) decode; beyond
// it a reply is refused.
TEST(Wire, ClusterStatusesDecode) {
  char buf[kMaxReplySize];
  MovedPayload m{9, 1234, 4};
  const std::string payload =
      std::string(reinterpret_cast<const char*>(&m), sizeof m) + "slot 1234 moved";
  for (Code c : {Code::kMoved, Code::kTryAgain, Code::kUnavailable}) {
    size_t n = EncodeReply(Op::kPut, 8, c, payload, buf, sizeof(buf));
    Reply r;
    ASSERT_TRUE(DecodeReply(buf, n, &r).ok()) << CodeName(c);
    EXPECT_EQ(r.status, c);
    EXPECT_EQ(r.payload, payload);
  }
  size_t n = EncodeReply(Op::kPut, 8, Code(18), "", buf, sizeof(buf));
  Reply r;
  EXPECT_EQ(DecodeReply(buf, n, &r).code(), Code::kProtocolError);
  n = EncodeReply(Op::kPut, 8, Code(0xffff), "", buf, sizeof(buf));
  EXPECT_EQ(DecodeReply(buf, n, &r).code(), Code::kProtocolError);
}
TEST(Wire, ServerHelloValidation) {
  ServerHello h{};
  h.magic = kHelloMagic;
  h.version = kProtocolVersion;
  h.flags = kHelloAuthRequired;
  h.credits = 4;
  for (size_t i = 0; i < kNonceSize; ++i) h.server_nonce[i] = uint8_t(i + 1);
  ServerHello out;
  ASSERT_TRUE(DecodeServerHello(&h, sizeof(h), &out).ok());
  EXPECT_EQ(out.flags, kHelloAuthRequired);
  EXPECT_EQ(out.server_nonce[15], 16);
  EXPECT_EQ(DecodeServerHello(&h, sizeof(h) - 1, &out).code(), Code::kProtocolError);
  EXPECT_EQ(DecodeServerHello(nullptr, sizeof(h), &out).code(), Code::kProtocolError);
  ServerHello bad = h;
  bad.version = 99;
  EXPECT_NE(DecodeServerHello(&bad, sizeof(bad), &out).message().find("protocol 99"),
            std::string::npos);
  bad = h;
  bad.magic = 0;
  EXPECT_FALSE(DecodeServerHello(&bad, sizeof(bad), &out).ok());
  bad = h;
  bad.credits = 0;
  EXPECT_NE(DecodeServerHello(&bad, sizeof(bad), &out).message().find("credits"),
            std::string::npos);
}

TEST(Wire, OpenRequestLengthChecked) {
  OpenRequest r{};
  r.client_nonce[0] = 7;
  r.mac[31] = 9;
  std::string v(reinterpret_cast<const char*>(&r), sizeof r);
  OpenRequest out;
  ASSERT_TRUE(DecodeOpenRequest(v, &out).ok());
  EXPECT_EQ(out.client_nonce[0], 7);
  EXPECT_EQ(out.mac[31], 9);
  EXPECT_EQ(DecodeOpenRequest(v.substr(0, 47), &out).code(), Code::kBadRequest);
  EXPECT_EQ(DecodeOpenRequest(v + "x", &out).code(), Code::kBadRequest);
  EXPECT_EQ(DecodeOpenRequest({}, &out).code(), Code::kBadRequest);
  // OPEN is op 6: a request carrying it decodes.
  std::vector<char> buf(kMaxRequestSize);
  size_t n = EncodeRequest(Op::kOpen, 1, {}, v, buf.data(), buf.size());
  Request req;
  ASSERT_TRUE(DecodeRequest(buf.data(), n, &req).ok());
  EXPECT_EQ(req.op, Op::kOpen);
  EXPECT_EQ(req.value.size(), sizeof(OpenRequest));
}

TEST(Wire, UnauthenticatedReplyDecodes) {
  char buf[64];
  size_t n = EncodeReply(Op::kPut, 3, Code::kUnauthenticated, "no", buf, sizeof buf);
  Reply r;
  ASSERT_TRUE(DecodeReply(buf, n, &r).ok());
  EXPECT_EQ(r.status, Code::kUnauthenticated);
  EXPECT_STREQ(CodeName(Code::kUnauthenticated), "UNAUTHENTICATED");
}

TEST(Wire, OpenReplyValidation) {
  OpenReply h{};
  h.magic = kHelloMagic;
  h.version = kProtocolVersion;
  h.region_size = 1 << 20;
  h.num_buckets = 16;
  h.bucket_size = 1024;
  h.slot_size = 128;
  h.overflow_offset = 17 * 1024;  // 16 home buckets + the last one's neighbour
  h.overflow_slots = 14;
  h.max_key_size = 1024;
  h.max_value_size = 65536;
  h.max_request_size = kMaxRequestSize;
  h.credits = 4;
  auto decode = [](const OpenReply& r, size_t len = sizeof(OpenReply)) {
    OpenReply out;
    return DecodeOpenReply(std::string_view(reinterpret_cast<const char*>(&r), len), &out);
  };
  EXPECT_TRUE(decode(h).ok());
  EXPECT_EQ(decode(h, 20).code(), Code::kProtocolError);
  EXPECT_EQ(decode(h, sizeof(h) - 1).code(), Code::kProtocolError);
  OpenReply bad = h;
  bad.version = 99;
  EXPECT_NE(decode(bad).message().find("protocol 99"), std::string::npos);
  bad = h;
  bad.magic = 0;
  EXPECT_FALSE(decode(bad).ok());
  bad = h;
  bad.num_buckets = 1 << 20;  // beyond region
  EXPECT_FALSE(decode(bad).ok());
  bad = h;
  bad.credits = 0;
  EXPECT_NE(decode(bad).message().find("credits"), std::string::npos);
  bad = h;
  bad.overflow_offset = 16 * 1024;  // overlaps bucket 16, the second candidate of bucket 15
  EXPECT_FALSE(decode(bad).ok());
  bad = h;
  bad.bucket_size = 2048;  // the GET path reads 1 KiB buckets: any other size is refused
  EXPECT_NE(decode(bad).message().find("bucket size 2048"), std::string::npos);
  bad = h;
  bad.slot_size = 64;
  EXPECT_FALSE(decode(bad).ok());
}

// The ownership table (protocol 7): owner_slots words of 8 bytes at owner_offset, after the
// overflow area and inside the region; none (0 slots) means the server is not in a cluster.
TEST(Wire, OpenReplyOwnerTableValidation) {
  OpenReply h{};
  h.magic = kHelloMagic;
  h.version = kProtocolVersion;
  h.region_size = 1 << 20;
  h.num_buckets = 16;
  h.bucket_size = 1024;
  h.slot_size = 128;
  h.overflow_offset = 17 * 1024;
  h.overflow_slots = 14;
  h.max_key_size = 1024;
  h.max_value_size = 65536;
  h.max_request_size = kMaxRequestSize;
  h.credits = 4;
  const uint64_t table_end = 17 * 1024 + 14 * 128;
  h.owner_slots = 1024;
  h.owner_offset = table_end;
  auto decode = [](const OpenReply& r) {
    OpenReply out;
    Status s = DecodeOpenReply(std::string_view(reinterpret_cast<const char*>(&r), sizeof r), &out);
    if (s.ok()) {
      EXPECT_EQ(out.owner_slots, r.owner_slots);
      EXPECT_EQ(out.owner_offset, r.owner_offset);
    } else {
      EXPECT_EQ(s.code(), Code::kProtocolError);
    }
    return s;
  };
  EXPECT_TRUE(decode(h).ok());
  OpenReply ok = h;
  ok.owner_slots = 1;
  EXPECT_TRUE(decode(ok).ok());
  ok.owner_slots = 65536;  // the slot map's largest
  EXPECT_TRUE(decode(ok).ok());
  ok = h;
  ok.owner_offset = table_end + 4096;  // a gap after the table is allowed
  EXPECT_TRUE(decode(ok).ok());
  ok.owner_offset = h.region_size - 8 * h.owner_slots;  // ending exactly at the region's end
  EXPECT_TRUE(decode(ok).ok());
  ok = h;
  ok.owner_slots = 0;  // not in a cluster
  ok.owner_offset = 0;
  EXPECT_TRUE(decode(ok).ok());

  OpenReply bad = h;
  for (uint32_t n : {3u, 100u, 1023u, 1025u, 0x80000001u, 131072u, 0xffffffffu}) {
    bad.owner_slots = n;
    EXPECT_FALSE(decode(bad).ok()) << n << " slots";
  }
  bad = h;
  for (uint64_t off : {table_end + 1, table_end + 4, table_end + 7}) {
    bad.owner_offset = off;
    EXPECT_FALSE(decode(bad).ok()) << "offset " << off << " not a multiple of 8";
  }
  bad = h;
  bad.owner_offset = table_end - 8;  // overlaps the overflow area
  EXPECT_FALSE(decode(bad).ok());
  bad.owner_offset = 0;  // over the index
  EXPECT_FALSE(decode(bad).ok());
  bad.owner_offset = h.region_size - 8 * h.owner_slots + 8;  // one word past the end
  EXPECT_FALSE(decode(bad).ok());
  bad.owner_offset = h.region_size;
  EXPECT_FALSE(decode(bad).ok());
  bad.owner_offset = h.region_size + 8;
  EXPECT_FALSE(decode(bad).ok());
  bad.owner_offset = ~uint64_t{7};  // near 2^64: compared without wrapping
  EXPECT_FALSE(decode(bad).ok());
  bad = h;
  bad.owner_slots = 65536;
  bad.region_size = table_end + 8 * 65536 - 8;  // the table does not fit
  EXPECT_FALSE(decode(bad).ok());
  bad = h;
  bad.owner_slots = 0;  // an offset without slots
  EXPECT_NE(decode(bad).message().find("without slots"), std::string::npos);
  bad.owner_offset = 8;
  EXPECT_FALSE(decode(bad).ok());
}
}  // namespace rkv::wire
