// SPDX-License-Identifier: Apache-2.0
// Harness: DecodeConnParams, the decoder of the 128-byte connection parameter record a peer
// sends in manual mode (inside every exchange message, exchange.cc) and that the server returns
// to a client's PARAMS request (client/connection.cc), plus the formatters that print a decoded
// peer record into logs and `kvctl info/check` tables.
// Invariants: an accepted record re-encodes to the input on every byte the decoder reads (the
// two flag bytes normalised to 0/1; bytes 59..63, 76..79 and 88..127 are padding the decoder
// ignores); the decoded fields are in their ranges (24-bit QP number and PSN, MTU codes,
// timers); decoding the re-encoding gives the same record. A refused record is PROTOCOL_ERROR
// with a message.
#include "common/verbs/conn_params.h"

#include <cstring>

#include "fuzz/fuzz_util.h"

namespace {
using namespace rkv;

constexpr size_t kMtuExplicitAt = 42, kGrhRequiredAt = 58, kFieldsEnd = 88;
// Padding: after grh_required, after rkey.
bool Padding(size_t i) { return (i >= 59 && i < 64) || (i >= 76 && i < 80); }

void Seeds(const fuzz::SeedWriter& w) {
  uint8_t rec[kConnParamsSize];
  ConnParams p;  // defaults: RC on Ethernet, port 1, MTU 1024
  p.qp_num = 0x11;
  p.psn = 0xabcdef;
  for (int i = 0; i < 16; ++i) p.gid[i] = uint8_t(i == 10 || i == 11 ? 0xff : i > 11 ? 10 : 0);
  EncodeConnParams(p, rec);
  w.Write("client-roce", rec, sizeof rec);
  p.remote_addr = 0x7f0012340000ull;
  p.rkey = 0x1f2e;
  p.region_size = 1ull << 30;
  EncodeConnParams(p, rec);
  w.Write("server-roce", rec, sizeof rec);
  ConnParams ib;
  ib.link_layer = kLinkInfiniBand;
  ib.lid = 7;
  ib.sl = 3;
  ib.grh_required = 1;
  ib.mtu_explicit = 1;
  ib.path_mtu = 5;
  ib.active_mtu = 5;
  ib.transport = Transport::kUD;
  ib.qkey = 0x11111111;
  EncodeConnParams(ib, rec);
  w.Write("ud-infiniband", rec, sizeof rec);
}
}  // namespace

RKV_FUZZ_SEEDS(Seeds)

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  ConnParams p;
  Status s = DecodeConnParams(data, size, &p);
  if (!s.ok()) {
    FUZZ_CHECK(s.code() == Code::kProtocolError && !s.message().empty());
    return 0;
  }
  FUZZ_CHECK(size >= kConnParamsSize);
  FUZZ_CHECK(static_cast<uint8_t>(p.transport) <= 2);
  FUZZ_CHECK(p.link_layer == kLinkInfiniBand || p.link_layer == kLinkEthernet);
  FUZZ_CHECK(p.port_num != 0 && p.sl <= 15);
  FUZZ_CHECK(p.qp_num <= 0xffffff && p.psn <= 0xffffff);
  FUZZ_CHECK(MtuEnumToBytes(p.path_mtu) != 0 && MtuEnumToBytes(p.active_mtu) != 0);
  FUZZ_CHECK(MtuBytesToEnum(MtuEnumToBytes(p.path_mtu)) == p.path_mtu);
  FUZZ_CHECK(p.min_rnr_timer <= 31 && p.timeout <= 31 && p.retry_cnt <= 7 && p.rnr_retry <= 7);
  FUZZ_CHECK(p.mtu_explicit <= 1 && p.grh_required <= 1);

  uint8_t out[kConnParamsSize];
  EncodeConnParams(p, out);
  for (size_t i = 0; i < kFieldsEnd; ++i) {
    if (Padding(i)) continue;
    if (i == kMtuExplicitAt || i == kGrhRequiredAt)
      FUZZ_CHECK(out[i] == (data[i] != 0));
    else
      FUZZ_CHECK(out[i] == data[i]);
  }
  ConnParams again;
  FUZZ_CHECK(DecodeConnParams(out, sizeof out, &again).ok());
  uint8_t out2[kConnParamsSize];
  EncodeConnParams(again, out2);
  FUZZ_CHECK(std::memcmp(out, out2, sizeof out) == 0);

  // The formatters print a peer's record into fixed buffers: any decoded record must fit.
  ConnParams local;
  FUZZ_CHECK(!FormatConnParams(p).empty());
  FUZZ_CHECK(!FormatParamsLine(local, p).empty());
  FUZZ_CHECK(!FormatParamsLine(p, p).empty());
  FUZZ_CHECK(!FormatParamTable(local, p).empty());
  FUZZ_CHECK(GidToString(p.gid).size() == 39);
  return 0;
}
