// SPDX-License-Identifier: Apache-2.0
#include "common/cluster/suspect_record.h"

#include "common/cluster/le_bytes.h"

namespace rkv::cluster {
namespace {

constexpr size_t kChecksumAt = 8, kReporterAt = 16, kBackupAt = 20, kEpochAt = 24;
static_assert(kEpochAt + 8 == kSuspectRecordBytes, "suspect record layout");

Status Bad(const std::string& why) {
  return Status(Code::kProtocolError, "suspect record: " + why);
}

}  // namespace

std::string SuspectRecord::KeySuffix() const {
  return "suspects/" + std::to_string(backup) + "/" + std::to_string(reporter);
}

Status SuspectRecord::Encode(std::string* out) const {
  if (reporter == 0 || backup == 0 || reporter == backup)
    return Status(Code::kInvalidArgument, "suspect record: two distinct ids > 0");
  out->assign(kSuspectRecordBytes, '\0');
  PutLE(out, 0, kSuspectMagic, 4);
  PutLE(out, 4, kSuspectVersion, 2);
  PutLE(out, kReporterAt, reporter, 4);
  PutLE(out, kBackupAt, backup, 4);
  PutLE(out, kEpochAt, map_epoch, 8);
  PutLE(out, kChecksumAt, ChecksumWithFieldZeroed(*out, kChecksumAt), 8);
  return Status::Ok();
}

Status SuspectRecord::Decode(std::string_view key_suffix, std::string_view in, SuspectRecord* out) {
  const std::string problem =
      FixedRecordProblem(in, kSuspectRecordBytes, kSuspectMagic, kSuspectVersion, kChecksumAt);
  if (!problem.empty()) return Bad(problem);
  SuspectRecord r;
  r.reporter = uint32_t(GetLE(in, kReporterAt, 4));
  r.backup = uint32_t(GetLE(in, kBackupAt, 4));
  r.map_epoch = GetLE(in, kEpochAt, 8);
  if (GetLE(in, 6, 2) != 0 || r.reporter == 0 || r.backup == 0 || r.reporter == r.backup)
    return Bad("malformed fields");
  if (key_suffix != r.KeySuffix()) return Bad("the key does not name the record's ids");
  *out = r;
  return Status::Ok();
}

}  // namespace rkv::cluster
