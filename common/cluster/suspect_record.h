// SPDX-License-Identifier: Apache-2.0
// SuspectRecord: a primary's report that it cannot reach one of its backups although that
// backup is still registered (a partial partition: docs/cluster.md, "Partial partitions").
// The primary puts it at NAME/suspects/BACKUP/REPORTER (decimal ids) under its own membership
// lease, so it goes when the reporter goes; the reporter deletes it once it can connect to the
// backup again. While it exists, the coordinator keeps BACKUP out of the backups of REPORTER's
// slots (it drops it where it is one, and never adds it there).
// Encoding: 32 bytes, little-endian, fixed width:
//   magic u32 "RKSP" | version u16 | reserved u16 (0) | checksum u64 | reporter u32 |
//   backup u32 | map_epoch u64 (the reporter's applied map when it reported; information)
// The checksum is XXH3-64 of the 32 bytes with the checksum field read as zero. Decode checks
// every field (the bytes come from etcd) and that the ids are the key's.
// Thread safety: a value type.
#ifndef RKV_COMMON_CLUSTER_SUSPECT_RECORD_H_
#define RKV_COMMON_CLUSTER_SUSPECT_RECORD_H_

#include <cstdint>
#include <string>
#include <string_view>

#include "rkv/status.h"

namespace rkv::cluster {

inline constexpr uint32_t kSuspectMagic = 0x50534b52;  // "RKSP" little-endian
inline constexpr uint16_t kSuspectVersion = 1;
inline constexpr size_t kSuspectRecordBytes = 32;

struct SuspectRecord {
  uint32_t reporter = 0;  // the primary that cannot reach `backup`
  uint32_t backup = 0;
  uint64_t map_epoch = 0;

  // The key's part after the cluster prefix: "suspects/BACKUP/REPORTER".
  std::string KeySuffix() const;
  // kInvalidArgument for a zero id or reporter == backup.
  [[nodiscard]] Status Encode(std::string* out) const;
  // `key_suffix`: the etcd key after the cluster prefix; it must name the record's ids.
  [[nodiscard]] static Status Decode(std::string_view key_suffix, std::string_view bytes,
                                     SuspectRecord* out);
};

}  // namespace rkv::cluster

#endif  // RKV_COMMON_CLUSTER_SUSPECT_RECORD_H_
