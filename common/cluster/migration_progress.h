// SPDX-License-Identifier: Apache-2.0
// MigrationProgress: how far the source of the running migration batch got (docs/cluster.md,
// "Migration"). The source puts it at NAME/progress under its own membership lease (a dead
// source's goes with its registration) about every kEveryMs while it copies, and at each phase
// change, and its copy's table scan reports how far it got even when it finds few keys. The
// coordinator cancels a batch whose progress, for its nonce, stopped changing
// (server/cluster/progress_watch.h), instead of after a fixed time: a large batch at a low
// --migration_rate may run long, and is not cancelled while it advances.
// Encoding: 48 bytes, little-endian, fixed width:
//   magic u32 "RKMP" | version u16 | phase u16 (1 COPY, 2 CATCH_UP, 3 PAUSED, 4 COMMIT) |
//   checksum u64 | nonce u64 (the migration record's) | keys u64 | bytes u64 (sent so far) |
//   scanned u64 (buckets the copy's table scans went through)
// The checksum is XXH3-64 of the 48 bytes with the checksum field read as zero. Decode checks
// every field (the bytes come from etcd).
// Thread safety: a value type.
#ifndef RKV_COMMON_CLUSTER_MIGRATION_PROGRESS_H_
#define RKV_COMMON_CLUSTER_MIGRATION_PROGRESS_H_

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "rkv/status.h"

namespace rkv::cluster {

inline constexpr uint32_t kProgressMagic = 0x504d4b52;  // "RKMP" little-endian
inline constexpr uint16_t kProgressVersion = 1;
inline constexpr size_t kProgressBytes = 48;

struct MigrationProgress {
  enum Phase : uint16_t { kCopy = 1, kCatchUp = 2, kPaused = 3, kCommit = 4 };
  static constexpr int kEveryMs = 2000;
  Phase phase = kCopy;
  uint64_t nonce = 0;
  uint64_t keys = 0;
  uint64_t bytes = 0;
  uint64_t scanned = 0;

  bool operator==(const MigrationProgress& o) const {
    return phase == o.phase && nonce == o.nonce && keys == o.keys && bytes == o.bytes &&
           scanned == o.scanned;
  }
  std::string Encode() const;
  [[nodiscard]] static Status Decode(std::string_view bytes, MigrationProgress* out);
};

}  // namespace rkv::cluster

#endif  // RKV_COMMON_CLUSTER_MIGRATION_PROGRESS_H_
