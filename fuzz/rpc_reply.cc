// SPDX-License-Identifier: Apache-2.0
// Harness: wire::DecodeReply, the client's decoder of every reply the server sends (run on the
// bytes of the client's receive buffer).
// Invariants: an accepted reply's payload lies inside the input and fills it after the 24-byte
// header, its status is a known Code, and EncodeReply gives back the input when the payload fits
// the server's limit (the format is canonical apart from the flags and reserved fields, which the
// decoder ignores and the encoder writes as 0). A refused one is PROTOCOL_ERROR with a message.
// A successful OPEN's payload goes on to wire::DecodeOpenReply (fuzz/hello checks its geometry).
#include <cstring>
#include <vector>

#include "common/wire.h"
#include "fuzz/fuzz_util.h"

namespace {
using namespace rkv;

void Seeds(const fuzz::SeedWriter& w) {
  std::vector<uint8_t> buf(wire::kMaxReplySize);
  auto add = [&](const char* name, wire::Op op, Code code, std::string_view payload) {
    size_t n = wire::EncodeReply(op, 7, code, payload, buf.data(), buf.size());
    w.Write(name, buf.data(), n);
  };
  add("put-ok", wire::Op::kPut, Code::kOk, "");
  add("delete-not-found", wire::Op::kDelete, Code::kNotFound, "no such key");
  add("stats", wire::Op::kStats, Code::kOk, "connections 1\nrpc_put 10\nrpc_get 0\n");
  add("params", wire::Op::kParams, Code::kOk, std::string(128, '\x01'));
  add("bad-request", static_cast<wire::Op>(0), Code::kBadRequest, "request has bad magic");
  add("full", wire::Op::kPut, Code::kTableFull, std::string(wire::kMaxReplyPayload, 'x'));
  add("open", wire::Op::kOpen, Code::kOk, std::string(sizeof(wire::OpenReply), '\0'));
  add("unauthenticated", wire::Op::kOpen, Code::kUnauthenticated, "OPEN refused");
}
}  // namespace

RKV_FUZZ_SEEDS(Seeds)

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  wire::Reply r{};
  Status s = wire::DecodeReply(data, size, &r);
  if (!s.ok()) {
    FUZZ_CHECK(s.code() == Code::kProtocolError && !s.message().empty());
    return 0;
  }
  const char* begin = reinterpret_cast<const char*>(data);
  FUZZ_CHECK(r.payload.data() == begin + sizeof(wire::ReplyHeader));
  FUZZ_CHECK(sizeof(wire::ReplyHeader) + r.payload.size() == size);
  FUZZ_CHECK(std::string(CodeName(r.status)) != "UNKNOWN");

  if (r.op == wire::Op::kOpen && r.status == Code::kOk) {  // the client's next step
    wire::OpenReply open{};
    if (wire::DecodeOpenReply(r.payload, &open).ok())
      FUZZ_CHECK(r.payload.size() == sizeof open &&
                 std::memcmp(&open, r.payload.data(), sizeof open) == 0);
  }

  if (r.payload.size() > wire::kMaxReplyPayload) return 0;  // the encoder cuts such payloads
  std::vector<uint8_t> out(size);
  FUZZ_CHECK(wire::EncodeReply(r.op, r.request_id, r.status, r.payload, out.data(), out.size()) ==
             size);
  std::vector<uint8_t> in(data, data + size);
  in[offsetof(wire::ReplyHeader, flags)] = 0;
  std::memset(&in[offsetof(wire::ReplyHeader, reserved)], 0, sizeof(uint32_t));
  FUZZ_CHECK(out == in);
  return 0;
}
