// SPDX-License-Identifier: Apache-2.0
#include "common/cluster/migration_progress.h"

#include "common/cluster/le_bytes.h"

namespace rkv::cluster {
namespace {

constexpr size_t kPhaseAt = 6, kChecksumAt = 8, kNonceAt = 16, kKeysAt = 24, kBytesAt = 32,
                 kScannedAt = 40;
static_assert(kScannedAt + 8 == kProgressBytes, "migration progress layout");

Status Bad(const std::string& why) {
  return Status(Code::kProtocolError, "migration progress: " + why);
}

}  // namespace

std::string MigrationProgress::Encode() const {
  std::string out(kProgressBytes, '\0');
  PutLE(&out, 0, kProgressMagic, 4);
  PutLE(&out, 4, kProgressVersion, 2);
  PutLE(&out, kPhaseAt, phase, 2);
  PutLE(&out, kNonceAt, nonce, 8);
  PutLE(&out, kKeysAt, keys, 8);
  PutLE(&out, kBytesAt, bytes, 8);
  PutLE(&out, kScannedAt, scanned, 8);
  PutLE(&out, kChecksumAt, ChecksumWithFieldZeroed(out, kChecksumAt), 8);
  return out;
}

Status MigrationProgress::Decode(std::string_view in, MigrationProgress* out) {
  const std::string problem =
      FixedRecordProblem(in, kProgressBytes, kProgressMagic, kProgressVersion, kChecksumAt);
  if (!problem.empty()) return Bad(problem);
  const uint64_t phase = GetLE(in, kPhaseAt, 2);
  if (phase < kCopy || phase > kCommit) return Bad("unknown phase " + std::to_string(phase));
  MigrationProgress p;
  p.phase = Phase(phase);
  p.nonce = GetLE(in, kNonceAt, 8);
  p.keys = GetLE(in, kKeysAt, 8);
  p.bytes = GetLE(in, kBytesAt, 8);
  p.scanned = GetLE(in, kScannedAt, 8);
  *out = p;
  return Status::Ok();
}

}  // namespace rkv::cluster
