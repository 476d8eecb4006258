// SPDX-License-Identifier: Apache-2.0
// MigrationRecord: one batch of slots moving from one server to another, as the coordinator
// puts it at NAME/migration (one batch at a time; docs/cluster.md, "Migration").
// The coordinator creates it (state COPY) fenced by its leadership; the source server copies
// the slots, pauses their writes, and commits the hand-over in one transaction that compares
// both the map's and this record's mod revisions, putting the new map and this record with
// state DONE (or FAILED, with the slots left where they were). A record that changed or
// vanished (a new coordinator cancelled it) can no longer be committed, so the source resumes.
// Encoding (little-endian): magic 0x47564b52 u32, version u16, state u16 (1 COPY, 2 DONE,
// 3 FAILED), nonce u64, from id u32, to id u32, count u32 (1..kMaxMigrationSlots), kind u32
// (0 MOVE: the slots' primary moves to `to`; 1 ADD_REPLICA: `to` becomes one more backup;
// 2 REPLACE_BACKUP: `to` takes the place of backup `replaced`; 3 HANDOVER: `to`, a backup of
// every slot, becomes its primary and `from` takes its place as a backup), XXH3-64 of the
// whole value with these 8 bytes read as zero (bytes 32..39); version 2 only: replaced id u32
// and a zero u32 (bytes 40..47); then count u32 slots (ascending, distinct). Kinds 0 and 1
// are written as version 1 (40-byte header), 2 and 3 as version 2 (48 bytes); `replaced` is
// nonzero exactly for REPLACE_BACKUP and differs from `from` and `to`.
// Thread safety: a value type.
#ifndef RKV_COMMON_CLUSTER_MIGRATION_RECORD_H_
#define RKV_COMMON_CLUSTER_MIGRATION_RECORD_H_

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "rkv/status.h"

namespace rkv::cluster {

inline constexpr uint32_t kMaxMigrationSlots = 4096;

struct MigrationRecord {
  enum State : uint16_t { kCopy = 1, kDone = 2, kFailed = 3 };
  enum Kind : uint32_t { kMove = 0, kAddReplica = 1, kReplaceBackup = 2, kHandover = 3 };
  State state = kCopy;
  Kind kind = kMove;
  uint64_t nonce = 0;
  uint32_t from_id = 0, to_id = 0;
  uint32_t replaced_id = 0;  // REPLACE_BACKUP only
  std::vector<uint32_t> slots;
  // Kinds that copy the slots to `to` as a new backup (the source stays their primary).
  bool CopiesToBackup() const { return kind == kAddReplica || kind == kReplaceBackup; }
  std::string Encode() const;
  [[nodiscard]] static Status Decode(std::string_view bytes, MigrationRecord* out);
};

}  // namespace rkv::cluster

#endif  // RKV_COMMON_CLUSTER_MIGRATION_RECORD_H_
