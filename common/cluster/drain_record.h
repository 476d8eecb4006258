// SPDX-License-Identifier: Apache-2.0
// DrainRecord: `kvctl cluster remove` of a live server in a replicated cluster (docs/cluster.md,
// "Removing a server with replicas"), and a server stepping down for a failing log ("A failing
// disk": server/cluster/disk_step_down.h, which puts it itself). The coordinator puts it at
// NAME/draining/SERVER (decimal id) under that server's own membership lease, so it goes when the
// server's registration goes (a server that restarts registers anew and may hold replicas again).
// While it exists the coordinator counts the server as down for placement: its primaries fail over
// to their backups, it leaves every slot's backups, and re-replication never picks it. Encoding: 32
// bytes, little-endian, fixed width:
//   magic u32 "RKDR" | version u16 | reserved u16 (0) | checksum u64 | server u32 |
//   reserved u32 (0) | map_epoch u64 (the map when the removal was asked for; information)
// The checksum is XXH3-64 of the 32 bytes with the checksum field read as zero. Decode checks
// every field (the bytes come from etcd) and that the id is the key's.
// Thread safety: a value type.
#ifndef RKV_COMMON_CLUSTER_DRAIN_RECORD_H_
#define RKV_COMMON_CLUSTER_DRAIN_RECORD_H_

#include <cstdint>
#include <string>
#include <string_view>

#include "rkv/status.h"

namespace rkv::cluster {

inline constexpr uint32_t kDrainMagic = 0x52444b52;  // "RKDR" little-endian
inline constexpr uint16_t kDrainVersion = 1;
inline constexpr size_t kDrainRecordBytes = 32;

struct DrainRecord {
  uint32_t server = 0;
  uint64_t map_epoch = 0;

  // The key's part after the cluster prefix: "draining/SERVER".
  std::string KeySuffix() const { return "draining/" + std::to_string(server); }
  // kInvalidArgument for a zero id.
  [[nodiscard]] Status Encode(std::string* out) const;
  // `key_suffix`: the etcd key after the cluster prefix; it must name the record's id.
  [[nodiscard]] static Status Decode(std::string_view key_suffix, std::string_view bytes,
                                     DrainRecord* out);
};

}  // namespace rkv::cluster

#endif  // RKV_COMMON_CLUSTER_DRAIN_RECORD_H_
