// SPDX-License-Identifier: Apache-2.0
#include "common/cluster/migration_record.h"

#include <xxhash.h>

#include <cstring>

#include "common/cluster/le_bytes.h"

namespace rkv::cluster {

namespace {
constexpr uint32_t kMagic = 0x47564b52;
constexpr uint16_t kVersion1 = 1, kVersion2 = 2;
constexpr size_t kHeader1 = 40, kHeader2 = 48;
constexpr size_t kSumAt = 32;

Status Bad(const std::string& what) {
  return Status(Code::kProtocolError, "migration record in etcd: " + what);
}
}  // namespace

std::string MigrationRecord::Encode() const {
  const bool v2 = kind > kAddReplica;
  const size_t header = v2 ? kHeader2 : kHeader1;
  std::string out(header + 4 * slots.size(), '\0');
  PutLE(&out, 0, kMagic, 4);
  PutLE(&out, 4, v2 ? kVersion2 : kVersion1, 2);
  PutLE(&out, 6, state, 2);
  PutLE(&out, 8, nonce, 8);
  PutLE(&out, 16, from_id, 4);
  PutLE(&out, 20, to_id, 4);
  PutLE(&out, 24, slots.size(), 4);
  PutLE(&out, 28, kind, 4);
  if (v2) PutLE(&out, 40, replaced_id, 4);
  for (size_t i = 0; i < slots.size(); ++i) PutLE(&out, header + 4 * i, slots[i], 4);
  PutLE(&out, kSumAt, ChecksumWithFieldZeroed(out, kSumAt), 8);
  return out;
}

Status MigrationRecord::Decode(std::string_view b, MigrationRecord* out) {
  if (b.size() < kHeader1) return Bad(std::to_string(b.size()) + " bytes, shorter than its header");
  const uint64_t version = GetLE(b, 4, 2);
  if (GetLE(b, 0, 4) != kMagic || (version != kVersion1 && version != kVersion2))
    return Bad("wrong magic or version");
  const size_t header = version == kVersion2 ? kHeader2 : kHeader1;
  const uint64_t count = GetLE(b, 24, 4);
  if (b.size() < header || count == 0 || count > kMaxMigrationSlots ||
      b.size() != header + 4 * count)
    return Bad("slot count " + std::to_string(count) + " does not fit its " +
               std::to_string(b.size()) + " bytes");
  if (GetLE(b, kSumAt, 8) != ChecksumWithFieldZeroed(b, kSumAt)) return Bad("checksum mismatch");
  const uint64_t state = GetLE(b, 6, 2);
  if (state < kCopy || state > kFailed) return Bad("unknown state " + std::to_string(state));
  const uint64_t kind = GetLE(b, 28, 4);
  if (kind > kHandover) return Bad("unknown kind " + std::to_string(kind));
  if ((kind > kAddReplica) != (version == kVersion2))
    return Bad("kind " + std::to_string(kind) + " in a version " + std::to_string(version) +
               " record");
  out->kind = Kind(kind);
  out->state = State(state);
  out->nonce = GetLE(b, 8, 8);
  out->from_id = uint32_t(GetLE(b, 16, 4));
  out->to_id = uint32_t(GetLE(b, 20, 4));
  out->replaced_id = version == kVersion2 ? uint32_t(GetLE(b, 40, 4)) : 0;
  if (version == kVersion2 && GetLE(b, 44, 4) != 0) return Bad("reserved field not zero");
  if (out->from_id == out->to_id) return Bad("a migration from a server to itself");
  if ((kind == kReplaceBackup) != (out->replaced_id != 0) ||
      (out->replaced_id != 0 &&
       (out->replaced_id == out->from_id || out->replaced_id == out->to_id)))
    return Bad("replaced server " + std::to_string(out->replaced_id) + " for kind " +
               std::to_string(kind));
  out->slots.resize(count);
  for (size_t i = 0; i < count; ++i) {
    out->slots[i] = uint32_t(GetLE(b, header + 4 * i, 4));
    if (i > 0 && out->slots[i] <= out->slots[i - 1]) return Bad("slots not ascending");
  }
  return Status::Ok();
}

}  // namespace rkv::cluster
