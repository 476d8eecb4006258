// SPDX-License-Identifier: Apache-2.0
#include "common/cluster/drain_record.h"

#include "common/cluster/le_bytes.h"

namespace rkv::cluster {
namespace {

constexpr size_t kChecksumAt = 8, kServerAt = 16, kReservedAt = 20, kEpochAt = 24;
static_assert(kEpochAt + 8 == kDrainRecordBytes, "drain record layout");

Status Bad(const std::string& why) { return Status(Code::kProtocolError, "drain record: " + why); }

}  // namespace

Status DrainRecord::Encode(std::string* out) const {
  if (server == 0) return Status(Code::kInvalidArgument, "drain record: a server id > 0");
  out->assign(kDrainRecordBytes, '\0');
  PutLE(out, 0, kDrainMagic, 4);
  PutLE(out, 4, kDrainVersion, 2);
  PutLE(out, kServerAt, server, 4);
  PutLE(out, kEpochAt, map_epoch, 8);
  PutLE(out, kChecksumAt, ChecksumWithFieldZeroed(*out, kChecksumAt), 8);
  return Status::Ok();
}

Status DrainRecord::Decode(std::string_view key_suffix, std::string_view in, DrainRecord* out) {
  const std::string problem =
      FixedRecordProblem(in, kDrainRecordBytes, kDrainMagic, kDrainVersion, kChecksumAt);
  if (!problem.empty()) return Bad(problem);
  DrainRecord r;
  r.server = uint32_t(GetLE(in, kServerAt, 4));
  r.map_epoch = GetLE(in, kEpochAt, 8);
  if (GetLE(in, 6, 2) != 0 || GetLE(in, kReservedAt, 4) != 0 || r.server == 0)
    return Bad("malformed fields");
  if (key_suffix != r.KeySuffix()) return Bad("the key does not name the record's id");
  *out = r;
  return Status::Ok();
}

}  // namespace rkv::cluster
