// SPDX-License-Identifier: Apache-2.0
#include "common/cluster/member_record.h"

#include <xxhash.h>

#include "common/cluster/le_bytes.h"

namespace rkv::cluster {
namespace {

// magic u32 | version u16 | port u16 | checksum u64 | id u32 | host_len u8 | zone_len u8 |
// reserved u16 (0) | instance u64 | host[64] | zone[32] (zero padded).
constexpr size_t kChecksumAt = 8, kHostAt = 32, kZoneAt = 96;
static_assert(kZoneAt + kMaxZoneBytes == kMemberRecordBytes, "member record layout");
static_assert(kHostAt + 64 == kZoneAt, "member record layout");

bool Printable(std::string_view s) {
  for (char c : s)
    if (c <= 0x20 || c >= 0x7f) return false;
  return true;
}
Status Bad(const std::string& why) { return Status(Code::kProtocolError, "member record: " + why); }

}  // namespace

Status MemberRecord::Encode(std::string* out) const {
  if (host.empty() || host.size() > 64 || !Printable(host) || port == 0 ||
      zone.size() > kMaxZoneBytes || !Printable(zone) || id == 0)
    return Status(Code::kInvalidArgument,
                  "member record: host 1..64 printable bytes, port 1..65535, zone up to 32 "
                  "printable bytes, id > 0");
  out->assign(kMemberRecordBytes, '\0');
  PutLE(out, 0, kMemberMagic, 4);
  PutLE(out, 4, kMemberVersion, 2);
  PutLE(out, 6, port, 2);
  PutLE(out, 16, id, 4);
  PutLE(out, 20, host.size(), 1);
  PutLE(out, 21, zone.size(), 1);
  PutLE(out, 24, instance, 8);
  out->replace(kHostAt, host.size(), host);
  out->replace(kZoneAt, zone.size(), zone);
  PutLE(out, kChecksumAt, ChecksumWithFieldZeroed(*out, kChecksumAt), 8);
  return Status::Ok();
}

Status MemberRecord::Decode(std::string_view in, MemberRecord* out) {
  const std::string problem =
      FixedRecordProblem(in, kMemberRecordBytes, kMemberMagic, kMemberVersion, kChecksumAt);
  if (!problem.empty()) return Bad(problem);
  MemberRecord r;
  r.port = uint16_t(GetLE(in, 6, 2));
  r.id = uint32_t(GetLE(in, 16, 4));
  const size_t hl = size_t(GetLE(in, 20, 1)), zl = size_t(GetLE(in, 21, 1));
  if (GetLE(in, 22, 2) != 0 || hl == 0 || hl > 64 || zl > kMaxZoneBytes || r.port == 0 || r.id == 0)
    return Bad("malformed fields");
  r.instance = GetLE(in, 24, 8);
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
  PutLE(&s, 0, id, 4);
  return s;
}

bool DecodeId(std::string_view bytes, uint32_t* id) {
  if (bytes.size() != 4) return false;
  *id = uint32_t(GetLE(bytes, 0, 4));
  return *id != 0;
}

}  // namespace rkv::cluster
