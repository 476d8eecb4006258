// SPDX-License-Identifier: Apache-2.0
#include "common/cluster/migration_record.h"

#include <xxhash.h>

#include <cstring>

#include "common/cluster/le_bytes.h"

namespace rkv::cluster {

namespace {
constexpr uint32_t kMagic = 0x47564b52;
constexpr uint16_t kVersion = 1;
constexpr size_t kHeader = 40;
constexpr size_t kSumAt = 32;

Status Bad(const std::string& what) {
  return Status(Code::kProtocolError, "migration record in etcd: " + what);
}
}  // namespace

std::string MigrationRecord::Encode() const {
  std::string out(kHeader + 4 * slots.size(), '\0');
  PutLE(&out, 0, kMagic, 4);
  PutLE(&out, 4, kVersion, 2);
  PutLE(&out, 6, state, 2);
  PutLE(&out, 8, nonce, 8);
  PutLE(&out, 16, from_id, 4);
  PutLE(&out, 20, to_id, 4);
  PutLE(&out, 24, slots.size(), 4);
  PutLE(&out, 28, kind, 4);
  for (size_t i = 0; i < slots.size(); ++i) PutLE(&out, kHeader + 4 * i, slots[i], 4);
  PutLE(&out, kSumAt, ChecksumWithFieldZeroed(out, kSumAt), 8);
  return out;
}

Status MigrationRecord::Decode(std::string_view b, MigrationRecord* out) {
  if (b.size() < kHeader) return Bad(std::to_string(b.size()) + " bytes, shorter than its header");
  if (GetLE(b, 0, 4) != kMagic || GetLE(b, 4, 2) != kVersion) return Bad("wrong magic or version");
  const uint64_t count = GetLE(b, 24, 4);
  if (count == 0 || count > kMaxMigrationSlots || b.size() != kHeader + 4 * count)
    return Bad("slot count " + std::to_string(count) + " does not fit its " +
               std::to_string(b.size()) + " bytes");
  if (GetLE(b, kSumAt, 8) != ChecksumWithFieldZeroed(b, kSumAt)) return Bad("checksum mismatch");
  const uint64_t state = GetLE(b, 6, 2);
  if (state < kCopy || state > kFailed) return Bad("unknown state " + std::to_string(state));
  const uint64_t kind = GetLE(b, 28, 4);
  if (kind > kAddReplica) return Bad("unknown kind " + std::to_string(kind));
  out->kind = Kind(kind);
  out->state = State(state);
  out->nonce = GetLE(b, 8, 8);
  out->from_id = uint32_t(GetLE(b, 16, 4));
  out->to_id = uint32_t(GetLE(b, 20, 4));
  if (out->from_id == out->to_id) return Bad("a migration from a server to itself");
  out->slots.resize(count);
  for (size_t i = 0; i < count; ++i) {
    out->slots[i] = uint32_t(GetLE(b, kHeader + 4 * i, 4));
    if (i > 0 && out->slots[i] <= out->slots[i - 1]) return Bad("slots not ascending");
  }
  return Status::Ok();
}

}  // namespace rkv::cluster
