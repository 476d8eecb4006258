// SPDX-License-Identifier: Apache-2.0
#include "common/cluster/member_record.h"

#include <xxhash.h>

namespace rkv::cluster {
namespace {

// magic u32 | version u16 | port u16 | checksum u64 | id u32 | host_len u8 | zone_len u8 |
// reserved u16 (0) | instance u64 | host[64] | zone[32] (zero padded).
constexpr size_t kChecksumAt = 8, kHostAt = 32, kZoneAt = 96;
static_assert(kZoneAt + kMaxZoneBytes == kMemberRecordBytes, "member record layout");
static_assert(kHostAt + 64 == kZoneAt, "member record layout");

void Put(std::string* out, size_t at, uint64_t v, int bytes) {
  for (int i = 0; i < bytes; ++i) (*out)[at + size_t(i)] = char((v >> (8 * i)) & 0xff);
}
uint64_t Get(std::string_view in, size_t at, int bytes) {
  uint64_t v = 0;
  for (int i = bytes - 1; i >= 0; --i) v = (v << 8) | uint8_t(in[at + size_t(i)]);
  return v;
}
bool Printable(std::string_view s) {
  for (char c : s)
    if (c <= 0x20 || c >= 0x7f) return false;
  return true;
}
Status Bad(const std::string& why) { return Status(Code::kProtocolError, "member record: " + why); }
// XXH3-64 of the whole record with its checksum field read as zero.
uint64_t Checksum(std::string_view in) {
  std::string copy(in);
  copy.replace(kChecksumAt, 8, 8, '\0');
  return XXH3_64bits(copy.data(), copy.size());
}

}  // namespace

Status MemberRecord::Encode(std::string* out) const {
  if (host.empty() || host.size() > 64 || !Printable(host) || port == 0 ||
      zone.size() > kMaxZoneBytes || !Printable(zone) || id == 0)
    return Status(Code::kInvalidArgument,
                  "member record: host 1..64 printable bytes, port 1..65535, zone up to 32 "
                  "printable bytes, id > 0");
  out->assign(kMemberRecordBytes, '\0');
  Put(out, 0, kMemberMagic, 4);
  Put(out, 4, kMemberVersion, 2);
  Put(out, 6, port, 2);
  Put(out, 16, id, 4);
  Put(out, 20, host.size(), 1);
  Put(out, 21, zone.size(), 1);
  Put(out, 24, instance, 8);
  out->replace(kHostAt, host.size(), host);
  out->replace(kZoneAt, zone.size(), zone);
  Put(out, kChecksumAt, Checksum(*out), 8);
  return Status::Ok();
}

Status MemberRecord::Decode(std::string_view in, MemberRecord* out) {
  if (in.size() != kMemberRecordBytes)
    return Bad(std::to_string(in.size()) + " bytes, not " + std::to_string(kMemberRecordBytes));
  if (Get(in, 0, 4) != kMemberMagic) return Bad("bad magic");
  if (Get(in, 4, 2) != kMemberVersion) return Bad("unknown version");
  if (Checksum(in) != Get(in, kChecksumAt, 8)) return Bad("checksum mismatch");
  MemberRecord r;
  r.port = uint16_t(Get(in, 6, 2));
  r.id = uint32_t(Get(in, 16, 4));
  const size_t hl = size_t(Get(in, 20, 1)), zl = size_t(Get(in, 21, 1));
  if (Get(in, 22, 2) != 0 || hl == 0 || hl > 64 || zl > kMaxZoneBytes || r.port == 0 || r.id == 0)
    return Bad("malformed fields");
  r.instance = Get(in, 24, 8);
  r.host.assign(in.data() + kHostAt, hl);
  r.zone.assign(in.data() + kZoneAt, zl);
  for (size_t i = kHostAt + hl; i < kZoneAt; ++i)
    if (in[i] != '\0') return Bad("host padding is not zero");
  for (size_t i = kZoneAt + zl; i < kMemberRecordBytes; ++i)
    if (in[i] != '\0') return Bad("zone padding is not zero");
  if (!Printable(r.host) || !Printable(r.zone)) return Bad("unprintable host or zone");
  *out = std::move(r);
  return Status::Ok();
}

std::string EncodeId(uint32_t id) {
  std::string s(4, '\0');
  Put(&s, 0, id, 4);
  return s;
}

bool DecodeId(std::string_view bytes, uint32_t* id) {
  if (bytes.size() != 4) return false;
  *id = uint32_t(Get(bytes, 0, 4));
  return *id != 0;
}

}  // namespace rkv::cluster
