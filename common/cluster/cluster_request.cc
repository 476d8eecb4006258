// SPDX-License-Identifier: Apache-2.0
#include "common/cluster/cluster_request.h"

#include <xxhash.h>

#include <cstring>

#include "common/cluster/le_bytes.h"

namespace rkv::cluster {

namespace {
constexpr uint32_t kRequestMagic = 0x51564b52;
constexpr uint32_t kResultMagic = 0x53564b52;
constexpr uint16_t kVersion = 1;
constexpr size_t kSumAt = 24;

Status Bad(const std::string& what) {
  return Status(Code::kProtocolError, "cluster request/result in etcd: " + what);
}
}  // namespace

std::string ClusterRequest::Encode() const {
  std::string out(kRequestBytes, '\0');
  PutLE(&out, 0, kRequestMagic, 4);
  PutLE(&out, 4, kVersion, 2);
  PutLE(&out, 6, kind, 2);
  PutLE(&out, 8, nonce, 8);
  PutLE(&out, 16, server_id, 4);
  PutLE(&out, kSumAt, ChecksumWithFieldZeroed(out, kSumAt), 8);
  return out;
}

Status ClusterRequest::Decode(std::string_view b, ClusterRequest* out) {
  if (b.size() != kRequestBytes) return Bad("request of " + std::to_string(b.size()) + " bytes");
  if (GetLE(b, 0, 4) != kRequestMagic || GetLE(b, 4, 2) != kVersion)
    return Bad("request has a wrong magic or version");
  if (GetLE(b, kSumAt, 8) != ChecksumWithFieldZeroed(b, kSumAt))
    return Bad("request checksum mismatch");
  const uint64_t kind = GetLE(b, 6, 2);
  if (kind != kRebalance && kind != kRemove)
    return Bad("unknown request kind " + std::to_string(kind));
  if (GetLE(b, 20, 4) != 0) return Bad("request reserved bytes are not zero");
  out->kind = Kind(kind);
  out->nonce = GetLE(b, 8, 8);
  out->server_id = uint32_t(GetLE(b, 16, 4));
  if ((out->kind == kRemove) != (out->server_id != 0))
    return Bad("a remove names a server, a rebalance none");
  return Status::Ok();
}

std::string ClusterResult::Encode() const {
  std::string out(kRequestBytes, '\0');
  PutLE(&out, 0, kResultMagic, 4);
  PutLE(&out, 4, kVersion, 2);
  PutLE(&out, 6, uint16_t(code), 2);
  PutLE(&out, 8, nonce, 8);
  PutLE(&out, 16, assigned, 4);
  PutLE(&out, 20, moved, 4);
  // Printable ASCII only, so that Decode(Encode(x)) re-encodes to the same bytes: any other byte
  // becomes '?' (the message is for people).
  std::string text = message.substr(0, kMaxResultMessage);
  for (char& c : text)
    if (c < 0x20 || c > 0x7e) c = '?';
  out += text;
  PutLE(&out, kSumAt, ChecksumWithFieldZeroed(out, kSumAt), 8);
  return out;
}

Status ClusterResult::Decode(std::string_view b, ClusterResult* out) {
  if (b.size() < kRequestBytes || b.size() > kRequestBytes + kMaxResultMessage)
    return Bad("result of " + std::to_string(b.size()) + " bytes");
  if (GetLE(b, 0, 4) != kResultMagic || GetLE(b, 4, 2) != kVersion)
    return Bad("result has a wrong magic or version");
  if (GetLE(b, kSumAt, 8) != ChecksumWithFieldZeroed(b, kSumAt))
    return Bad("result checksum mismatch");
  if (GetLE(b, 6, 2) > uint64_t(Code::kUnavailable)) return Bad("result has an unknown code");
  out->code = Code(GetLE(b, 6, 2));
  out->nonce = GetLE(b, 8, 8);
  out->assigned = uint32_t(GetLE(b, 16, 4));
  out->moved = uint32_t(GetLE(b, 20, 4));
  // Encode wrote Printable text; anything else was not written by it.
  for (char c : b.substr(kRequestBytes))
    if (c < 0x20 || c > 0x7e) return Bad("result message has a byte that is not printable");
  out->message = std::string(b.substr(kRequestBytes));
  return Status::Ok();
}

}  // namespace rkv::cluster
