// SPDX-License-Identifier: Apache-2.0
// Harness: the connect handshake. wire::DecodeClientHello is what kvserver's CmAcceptor runs on
// a connecting client's private data (anyone who reaches the port); wire::DecodeServerHello is
// what the client runs on the server's accept private data (and on the hello inside the
// exchange's PARAMS message, exchange.cc); wire::DecodeOpenReply on the payload of the OPEN reply,
// and wire::DecodeOpenRequest is what the server's worker runs on an OPEN's value.
// Invariants: the decoders copy the first sizeof(struct) bytes as they are (the images are
// canonical); an accepted ServerHello has non-zero credits; an accepted OpenReply is exactly its
// size, and its table geometry lies inside the region it advertises: the index (num_buckets + 1
// buckets) before the overflow slots, and the overflow slots inside the region, computed without
// wrapping; its size limits and credits are non-zero. A refused hello or reply is PROTOCOL_ERROR
// with a message; a refused OPEN request BAD_REQUEST.
#include <cstring>

#include "common/table/layout.h"
#include "common/wire.h"
#include "fuzz/fuzz_util.h"

namespace {
using namespace rkv;

void Seeds(const fuzz::SeedWriter& w) {
  wire::ClientHello c{wire::kHelloMagic, wire::kProtocolVersion, 0, 0};
  w.Write("client-hello", &c, sizeof c);
  wire::ServerHello h{};
  h.magic = wire::kHelloMagic;
  h.version = wire::kProtocolVersion;
  h.flags = wire::kHelloAuthRequired;
  h.credits = 16;
  for (size_t i = 0; i < sizeof h.server_nonce; ++i) h.server_nonce[i] = uint8_t(i * 7);
  w.Write("server-hello", &h, sizeof h);
  // rdma_cm pads private data, so longer inputs are legal for the hello decoders.
  std::string padded(reinterpret_cast<const char*>(&h), sizeof h);
  padded.append(196 - sizeof h, '\0');
  w.Write("server-hello-padded", padded);
  wire::OpenReply r{};
  r.magic = wire::kHelloMagic;
  r.version = wire::kProtocolVersion;
  r.instance_id = 99;
  r.region_size = 64ull << 20;
  r.rkey = 0x1234;
  r.num_buckets = 1024;
  r.hash_seed = 0xfeedfacecafebeefull;
  r.bucket_size = layout::kBucketSize;
  r.slot_size = layout::kSlotSize;
  r.overflow_offset = (uint64_t{r.num_buckets} + 1) * r.bucket_size;
  r.overflow_slots = 4096;
  r.max_key_size = wire::kMaxKeySize;
  r.max_value_size = wire::kMaxValueSize;
  r.max_request_size = wire::kMaxRequestSize;
  r.credits = 16;
  w.Write("open-reply", &r, sizeof r);
  wire::OpenRequest q{};
  q.client_nonce[0] = 1;
  w.Write("open-request", &q, sizeof q);
}

void CheckServerHello(const uint8_t* data, size_t size) {
  wire::ServerHello h{};
  Status s = wire::DecodeServerHello(data, size, &h);
  if (!s.ok()) {
    FUZZ_CHECK(s.code() == Code::kProtocolError && !s.message().empty());
    return;
  }
  FUZZ_CHECK(size >= sizeof h && std::memcmp(&h, data, sizeof h) == 0);
  FUZZ_CHECK(h.magic == wire::kHelloMagic && h.version == wire::kProtocolVersion);
  FUZZ_CHECK(h.credits > 0);
}

void CheckOpenReply(const uint8_t* data, size_t size) {
  wire::OpenReply h{};
  Status s = wire::DecodeOpenReply(std::string_view(reinterpret_cast<const char*>(data), size), &h);
  if (!s.ok()) {
    FUZZ_CHECK(s.code() == Code::kProtocolError && !s.message().empty());
    return;
  }
  FUZZ_CHECK(size == sizeof h && std::memcmp(&h, data, sizeof h) == 0);
  FUZZ_CHECK(h.magic == wire::kHelloMagic && h.version == wire::kProtocolVersion);
  FUZZ_CHECK(h.bucket_size == layout::kBucketSize && h.slot_size == layout::kSlotSize);
  FUZZ_CHECK(h.num_buckets > 0);
  // The client reads buckets 0..num_buckets (the last pair's second bucket) and the overflow
  // slots at overflow_offset: all of it must lie inside the region (unsigned 128-bit: no wrap).
  const unsigned __int128 index_end =
      (static_cast<unsigned __int128>(h.num_buckets) + 1) * h.bucket_size;
  const unsigned __int128 overflow_end =
      static_cast<unsigned __int128>(h.overflow_offset) +
      static_cast<unsigned __int128>(h.overflow_slots) * h.slot_size;
  FUZZ_CHECK(index_end <= h.region_size);
  FUZZ_CHECK(h.overflow_offset >= index_end);
  FUZZ_CHECK(overflow_end <= h.region_size);
  FUZZ_CHECK(h.max_key_size > 0 && h.max_value_size > 0 && h.max_request_size > 0);
  FUZZ_CHECK(h.credits > 0);
}

void CheckOpenRequest(const uint8_t* data, size_t size) {
  wire::OpenRequest q{};
  Status s =
      wire::DecodeOpenRequest(std::string_view(reinterpret_cast<const char*>(data), size), &q);
  if (!s.ok()) {
    FUZZ_CHECK(s.code() == Code::kBadRequest && !s.message().empty());
    return;
  }
  FUZZ_CHECK(size == sizeof q && std::memcmp(&q, data, sizeof q) == 0);
}

void CheckClientHello(const uint8_t* data, size_t size) {
  wire::ClientHello c{};
  Status s = wire::DecodeClientHello(data, size, &c);
  if (!s.ok()) {
    FUZZ_CHECK(s.code() == Code::kProtocolError && !s.message().empty());
    return;
  }
  FUZZ_CHECK(size >= sizeof c && std::memcmp(&c, data, sizeof c) == 0);
  FUZZ_CHECK(c.magic == wire::kHelloMagic && c.version == wire::kProtocolVersion);
}
}  // namespace

RKV_FUZZ_SEEDS(Seeds)

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  CheckClientHello(data, size);
  CheckServerHello(data, size);
  CheckOpenReply(data, size);
  CheckOpenRequest(data, size);
  return 0;
}
