// SPDX-License-Identifier: Apache-2.0
#include "common/wire.h"

#include <xxhash.h>

#include <cstring>

#include "common/table/layout.h"

namespace rkv::wire {
namespace {
Status Proto(const std::string& m) { return Status(Code::kProtocolError, m); }
}  // namespace

Status DecodeServerHello(const void* data, size_t len, ServerHello* out) {
  if (data == nullptr || len < sizeof(ServerHello))
    return Proto("server hello too short: " + std::to_string(len) + " bytes, need " +
                 std::to_string(sizeof(ServerHello)) + " (not an rkv server?)");
  std::memcpy(out, data, sizeof(*out));
  if (out->magic != kHelloMagic) return Proto("server hello has bad magic (not an rkv server?)");
  if (out->version != kProtocolVersion)
    return Proto("server speaks protocol " + std::to_string(out->version) + ", client speaks " +
                 std::to_string(kProtocolVersion));
  if (out->credits == 0) return Proto("server hello: zero request credits");
  return Status::Ok();
}

Status DecodeOpenRequest(std::string_view value, OpenRequest* out) {
  if (value.size() != sizeof(OpenRequest))
    return Status(Code::kBadRequest, "OPEN request value of " + std::to_string(value.size()) +
                                         " bytes, need " + std::to_string(sizeof(OpenRequest)));
  std::memcpy(out, value.data(), sizeof(*out));
  return Status::Ok();
}

Status DecodeOpenReply(std::string_view payload, OpenReply* out) {
  if (payload.size() != sizeof(OpenReply))
    return Proto("OPEN reply of " + std::to_string(payload.size()) + " bytes, need " +
                 std::to_string(sizeof(OpenReply)));
  std::memcpy(out, payload.data(), sizeof(*out));
  if (out->magic != kHelloMagic) return Proto("OPEN reply has bad magic");
  if (out->version != kProtocolVersion)
    return Proto("OPEN reply speaks protocol " + std::to_string(out->version));
  if (out->num_buckets == 0 || out->bucket_size != layout::kBucketSize ||
      out->slot_size != layout::kSlotSize)
    return Proto("OPEN reply has an invalid table geometry (bucket size " +
                 std::to_string(out->bucket_size) + ", slot size " +
                 std::to_string(out->slot_size) + "; this client reads " +
                 std::to_string(layout::kBucketSize) + " and " + std::to_string(layout::kSlotSize) +
                 ")");
  uint64_t index_end = (uint64_t{out->num_buckets} + 1) * out->bucket_size;  // + the last pair's
  uint64_t ovf_bytes = uint64_t{out->overflow_slots} * out->slot_size;
  // Compared without wrapping (an overflow_offset near 2^64 passed as a small end: fuzz/hello).
  if (index_end > out->region_size || out->overflow_offset < index_end ||
      out->overflow_offset > out->region_size ||
      ovf_bytes > out->region_size - out->overflow_offset)
    return Proto("OPEN reply: table geometry exceeds the advertised region size");
  if (out->max_key_size == 0 || out->max_value_size == 0 || out->max_request_size == 0)
    return Proto("OPEN reply: zero size limits");
  if (out->credits == 0) return Proto("OPEN reply: zero request credits");
  if (out->owner_slots != 0) {
    const uint32_t n = out->owner_slots;
    if ((n & (n - 1)) != 0 || n > 65536 || out->owner_offset % 8 != 0 ||
        out->owner_offset < ovf_bytes + out->overflow_offset ||
        out->owner_offset > out->region_size ||
        uint64_t{n} * 8 > out->region_size - out->owner_offset)
      return Proto("OPEN reply: ownership table (" + std::to_string(n) + " slots at offset " +
                   std::to_string(out->owner_offset) +
                   ") is not a power of two of slots after "
                   "the table inside the region");
  } else if (out->owner_offset != 0) {
    return Proto("OPEN reply: an ownership table offset without slots");
  }
  return Status::Ok();
}

Status DecodeClientHello(const void* data, size_t len, ClientHello* out) {
  if (data == nullptr || len < sizeof(ClientHello))
    return Proto("client hello too short: " + std::to_string(len) + " bytes");
  std::memcpy(out, data, sizeof(*out));
  if (out->magic != kHelloMagic) return Proto("client hello has bad magic");
  if (out->version != kProtocolVersion)
    return Proto("client speaks protocol " + std::to_string(out->version) + ", server speaks " +
                 std::to_string(kProtocolVersion));
  return Status::Ok();
}

size_t EncodeRequest(Op op, uint64_t request_id, std::string_view key, std::string_view value,
                     void* buf, size_t cap) {
  size_t total = sizeof(RequestHeader) + key.size() + value.size();
  if (total > cap) return 0;
  RequestHeader h{kRequestMagic,
                  kProtocolVersion,
                  static_cast<uint8_t>(op),
                  0,
                  request_id,
                  static_cast<uint32_t>(key.size()),
                  static_cast<uint32_t>(value.size())};
  auto* p = static_cast<char*>(buf);
  std::memcpy(p, &h, sizeof(h));
  if (!key.empty()) std::memcpy(p + sizeof(h), key.data(), key.size());
  if (!value.empty()) std::memcpy(p + sizeof(h) + key.size(), value.data(), value.size());
  return total;
}

uint64_t ReplicateDigest(uint8_t kind, std::string_view key, std::string_view value) {
  return XXH3_64bits_withSeed(value.data(), value.size(),
                              XXH3_64bits_withSeed(key.data(), key.size(), kind));
}

Status DecodeRequest(const void* data, size_t len, Request* out) {
  RequestHeader h;
  if (len < sizeof(h))
    return Status(Code::kBadRequest, "request of " + std::to_string(len) +
                                         " bytes is shorter than its 24-byte header");
  std::memcpy(&h, data, sizeof(h));
  if (h.magic != kRequestMagic) return Status(Code::kBadRequest, "request has bad magic");
  if (h.version != kProtocolVersion)
    return Status(Code::kBadRequest, "request protocol version " + std::to_string(h.version));
  if (h.op < 1 || h.op > kMaxOp)
    return Status(Code::kBadRequest, "unknown request op " + std::to_string(h.op));
  if (uint64_t{h.key_size} + h.value_size + sizeof(h) != len)
    return Status(Code::kBadRequest,
                  "request length " + std::to_string(len) + " does not match header (key " +
                      std::to_string(h.key_size) + ", value " + std::to_string(h.value_size) + ")");
  const char* p = static_cast<const char*>(data) + sizeof(h);
  out->op = static_cast<Op>(h.op);
  out->request_id = h.request_id;
  out->key = std::string_view(p, h.key_size);
  out->value = std::string_view(p + h.key_size, h.value_size);
  return Status::Ok();
}

size_t EncodeReply(Op op, uint64_t request_id, Code status, std::string_view payload, void* buf,
                   size_t cap) {
  if (payload.size() > kMaxReplyPayload) payload = payload.substr(0, kMaxReplyPayload);
  size_t total = sizeof(ReplyHeader) + payload.size();
  if (total > cap) return 0;
  ReplyHeader h{kReplyMagic,
                static_cast<uint16_t>(status),
                static_cast<uint8_t>(op),
                0,
                request_id,
                static_cast<uint32_t>(payload.size()),
                0};
  std::memcpy(buf, &h, sizeof(h));
  if (!payload.empty())
    std::memcpy(static_cast<char*>(buf) + sizeof(h), payload.data(), payload.size());
  return total;
}

Status DecodeReply(const void* data, size_t len, Reply* out) {
  ReplyHeader h;
  if (len < sizeof(h)) return Proto("reply shorter than its header");
  std::memcpy(&h, data, sizeof(h));
  if (h.magic != kReplyMagic) return Proto("reply has bad magic");
  if (sizeof(h) + uint64_t{h.payload_size} != len) return Proto("reply length mismatch");
  if (h.status > static_cast<uint16_t>(Code::kUnavailable))
    return Proto("reply has unknown status");
  out->status = static_cast<Code>(h.status);
  out->op = static_cast<Op>(h.op);
  out->request_id = h.request_id;
  out->payload = std::string_view(static_cast<const char*>(data) + sizeof(h), h.payload_size);
  return Status::Ok();
}

}  // namespace rkv::wire
