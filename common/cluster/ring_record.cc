// SPDX-License-Identifier: Apache-2.0
#include "common/cluster/ring_record.h"

#define XXH_STATIC_LINKING_ONLY  // XXH3_state_t on the stack: no allocation per record
#include <xxhash.h>

#include <cstring>
#include <string>

namespace rkv::cluster {
namespace {

constexpr size_t kLengthAt = 4, kIndexAt = 8, kSumAt = 16, kOrderAt = 24, kHeaderAt = 32,
                 kKeySizeAt = 64, kValueSizeAt = 68;
static_assert(kHeaderAt + sizeof(wire::ReplicateHeader) == kKeySizeAt, "ring record layout");
static_assert(kValueSizeAt + 4 == kRingHeaderBytes, "ring record layout");

void Put(uint8_t* out, size_t at, uint64_t v, int bytes) {
  for (int i = 0; i < bytes; ++i) out[at + size_t(i)] = uint8_t((v >> (8 * i)) & 0xff);
}
uint64_t Get(const uint8_t* in, size_t at, int bytes) {
  uint64_t v = 0;
  for (int i = bytes - 1; i >= 0; --i) v = (v << 8) | in[at + size_t(i)];
  return v;
}
// XXH3-64 of in[0 .. length) with the checksum field read as zero, without a copy.
uint64_t Checksum(const uint8_t* in, size_t length) {
  static const uint8_t kZero[8] = {};
  XXH3_state_t st;
  XXH3_64bits_reset(&st);
  XXH3_64bits_update(&st, in, kSumAt);
  XXH3_64bits_update(&st, kZero, sizeof kZero);
  XXH3_64bits_update(&st, in + kSumAt + 8, length - kSumAt - 8);
  return XXH3_64bits_digest(&st);
}
void Finish(uint64_t index, size_t length, uint8_t* out) {
  Put(out, 0, kRingRecordMagic, 4);
  Put(out, kLengthAt, length, 4);
  Put(out, kIndexAt, index, 8);
  Put(out, kSumAt, 0, 8);
  Put(out, kSumAt, Checksum(out, length), 8);
}
Status Bad(const std::string& why) { return Status(Code::kProtocolError, "ring record: " + why); }
Status Malformed(const std::string& why) {
  return Status(Code::kBadRequest, "ring record: " + why);
}

}  // namespace

void EncodeRingRecord(uint64_t index, uint64_t order, const wire::ReplicateHeader& h,
                      std::string_view key, std::string_view value, uint8_t* out) {
  const size_t length = RingRecordBytes(key.size(), value.size());
  std::memset(out, 0, length);
  Put(out, kOrderAt, order, 8);
  std::memcpy(out + kHeaderAt, &h, sizeof h);  // little-endian fields (x86 and ARM)
  Put(out, kKeySizeAt, key.size(), 4);
  Put(out, kValueSizeAt, value.size(), 4);
  if (!key.empty()) std::memcpy(out + kRingHeaderBytes, key.data(), key.size());
  if (!value.empty()) std::memcpy(out + kRingHeaderBytes + key.size(), value.data(), value.size());
  Finish(index, length, out);
}

void EncodeRingWrap(uint64_t index, uint8_t* out) {
  std::memset(out, 0, kRingHeaderBytes);
  Finish(index, kRingHeaderBytes, out);  // header kind 0: a wrap
}

size_t PeekRingLength(std::string_view in) {
  if (in.size() < 8) return 0;
  return size_t(Get(reinterpret_cast<const uint8_t*>(in.data()), kLengthAt, 4));
}

Status DecodeRingRecord(std::string_view in, uint64_t index, RingRecordView* out) {
  const auto* p = reinterpret_cast<const uint8_t*>(in.data());
  if (in.size() < kRingHeaderBytes) return Bad("fewer bytes than a header to the ring's end");
  if (Get(p, 0, 8) == 0 && Get(p, kIndexAt, 8) == 0)
    return Status(Code::kNotFound, "ring record: none yet");
  if (Get(p, 0, 4) != kRingRecordMagic) return Bad("bad magic");
  const size_t length = size_t(Get(p, kLengthAt, 4));
  if (length < kRingHeaderBytes || length % 8 != 0 || length > in.size())
    return Bad("length " + std::to_string(length) + " out of range");
  if (Checksum(p, length) != Get(p, kSumAt, 8)) return Bad("checksum mismatch");
  // Complete from here on (the checksum holds): what fails now is malformed, not unfinished.
  if (Get(p, kIndexAt, 8) != index)
    return Malformed("index " + std::to_string(Get(p, kIndexAt, 8)) + ", not " +
                     std::to_string(index));
  RingRecordView v;
  v.index = index;
  v.length = length;
  v.order = Get(p, kOrderAt, 8);
  std::memcpy(&v.header, p + kHeaderAt, sizeof v.header);
  const size_t key_size = size_t(Get(p, kKeySizeAt, 4)),
               value_size = size_t(Get(p, kValueSizeAt, 4));
  if (key_size > length || value_size > length || RingRecordBytes(key_size, value_size) != length)
    return Malformed("key and value sizes do not match the length");
  v.wrap = v.header.kind == kRingWrapKind;
  if (v.wrap && length != kRingHeaderBytes) return Malformed("a wrap record with a key or value");
  v.key = in.substr(kRingHeaderBytes, key_size);
  v.value = in.substr(kRingHeaderBytes + key_size, value_size);
  for (size_t i = kRingHeaderBytes + key_size + value_size; i < length; ++i)
    if (p[i] != 0) return Malformed("non-zero padding");
  *out = v;
  return Status::Ok();
}

bool RingLayout::MustWrap(size_t at, size_t bytes, bool* wrap_record, size_t* skipped) const {
  if (size_ - at >= bytes) return false;
  *wrap_record = size_ - at >= kRingHeaderBytes;
  *skipped = size_ - at;
  return true;
}

}  // namespace rkv::cluster
