// Harness: the rdma_cm connect private data. wire::DecodeClientHello is what kvserver's
// CmAcceptor runs on a connecting client's private data (anyone who reaches the port);
// wire::DecodeServerHello is what the client runs on the server's accept private data (and on
// the hello inside the exchange's PARAMS message, exchange.cc).
// Invariants: both decoders copy the first sizeof(hello) bytes as they are (the images are
// canonical); an accepted ServerHello's table geometry lies inside the region it advertises:
// the index (num_buckets + 1 buckets) before the overflow slots, and the overflow slots inside
// the region, computed without wrapping; its size limits and credits are non-zero. A refused
// hello is PROTOCOL_ERROR with a message.
#include <cstring>

#include "common/table/layout.h"
#include "common/wire.h"
#include "fuzz/fuzz_util.h"

namespace {
using namespace rkv;

void Seeds(const fuzz::SeedWriter& w) {
  wire::ClientHello c{wire::kHelloMagic, wire::kProtocolVersion, 0, 0x0123456789abcdefull};
  w.Write("client-hello", &c, sizeof c);
  wire::ServerHello h{};
  h.magic = wire::kHelloMagic;
  h.version = wire::kProtocolVersion;
  h.instance_id = 99;
  h.region_addr = 0x7f0000000000ull;
  h.region_size = 64ull << 20;
  h.rkey = 0x1234;
  h.num_buckets = 1024;
  h.hash_seed = 0xfeedfacecafebeefull;
  h.bucket_size = layout::kBucketSize;
  h.slot_size = layout::kSlotSize;
  h.overflow_offset = (uint64_t{h.num_buckets} + 1) * h.bucket_size;
  h.overflow_slots = 4096;
  h.max_key_size = wire::kMaxKeySize;
  h.max_value_size = wire::kMaxValueSize;
  h.max_request_size = wire::kMaxRequestSize;
  h.credits = 16;
  w.Write("server-hello", &h, sizeof h);
  // Both in one: rdma_cm pads private data, so longer inputs are legal for both decoders.
  std::string both(reinterpret_cast<const char*>(&h), sizeof h);
  both.append(8, '\0');
  w.Write("server-hello-padded", both);
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
  return 0;
}
