// SPDX-License-Identifier: Apache-2.0
// Harness: wire::DecodeRequest, the server's decoder of every request a client SENDs (kvserver's
// workers and RpcExecutor run it on bytes straight from the receive queue).
// Invariants: an accepted request's key and value lie inside the input and fill it exactly after
// the 24-byte header, its op is not 0, and EncodeRequest gives back the input (the
// format is canonical apart from the flags byte, which the decoder ignores and the encoder
// writes as 0). A refused one is BAD_REQUEST with a message. An OPEN's value goes on to
// wire::DecodeOpenRequest, which accepts exactly its 48 bytes.
#include <cstring>
#include <vector>

#include "common/wire.h"
#include "fuzz/fuzz_util.h"

namespace {
using namespace rkv;

void Seeds(const fuzz::SeedWriter& w) {
  std::vector<uint8_t> buf(wire::kMaxRequestSize);
  auto add = [&](const char* name, wire::Op op, std::string_view key, std::string_view value) {
    size_t n = wire::EncodeRequest(op, 42, key, value, buf.data(), buf.size());
    w.Write(name, buf.data(), n);
  };
  add("put", wire::Op::kPut, "user:1", "hello world");
  add("put-empty-value", wire::Op::kPut, "k", "");
  add("put-max-key", wire::Op::kPut, std::string(wire::kMaxKeySize, 'k'), "v");
  add("delete", wire::Op::kDelete, "user:1", "");
  add("stats", wire::Op::kStats, "", "");
  add("params", wire::Op::kParams, "", "");
  add("snapshot", wire::Op::kSnapshot, "", "");
  wire::OpenRequest open{};
  add("open", wire::Op::kOpen, "",
      std::string_view(reinterpret_cast<const char*>(&open), sizeof open));
}
}  // namespace

RKV_FUZZ_SEEDS(Seeds)

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  wire::Request req{};
  Status s = wire::DecodeRequest(data, size, &req);
  if (!s.ok()) {
    FUZZ_CHECK(s.code() == Code::kBadRequest && !s.message().empty());
    return 0;
  }
  const char* begin = reinterpret_cast<const char*>(data);
  FUZZ_CHECK(size >= sizeof(wire::RequestHeader));
  FUZZ_CHECK(req.key.data() == begin + sizeof(wire::RequestHeader));
  FUZZ_CHECK(req.value.data() == req.key.data() + req.key.size());
  FUZZ_CHECK(sizeof(wire::RequestHeader) + req.key.size() + req.value.size() == size);
  FUZZ_CHECK(static_cast<uint8_t>(req.op) != 0);

  if (req.op == wire::Op::kOpen) {  // the worker's next step: the OPEN value, exactly 48 bytes
    wire::OpenRequest open{};
    Status o = wire::DecodeOpenRequest(req.value, &open);
    FUZZ_CHECK(o.ok() == (req.value.size() == sizeof open));
    if (o.ok()) FUZZ_CHECK(std::memcmp(&open, req.value.data(), sizeof open) == 0);
  }

  std::vector<uint8_t> out(size);
  FUZZ_CHECK(wire::EncodeRequest(req.op, req.request_id, req.key, req.value, out.data(),
                                 out.size()) == size);
  std::vector<uint8_t> in(data, data + size);
  in[offsetof(wire::RequestHeader, flags)] = 0;
  FUZZ_CHECK(out == in);
  return 0;
}
