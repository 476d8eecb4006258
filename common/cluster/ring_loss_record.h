// SPDX-License-Identifier: Apache-2.0
// RingLossRecord: a server's report of the slots it may lack an acknowledged write of
// (OwnershipTable::RingLoss: a log ring record of the slot was refused there after its writer
// was told it was placed; docs/replication-rings.md, "A refused record"). The server puts it at
// NAME/ringloss/SERVER (decimal id) under its own membership lease whenever the set of marked
// slots changes, and deletes it when the set is empty. While it lists a slot, the coordinator
// takes that server out of the slot's replicas (server/cluster/coordinator_replicas.cc): a
// backup is dropped (the others move forward); a primary that is one (a promotion that found
// the mark: it never serves) gives way to the slot's first live backup that lists no such
// loss; a slot with no such backup stays as it is (unavailable, never wrong).
// Encoding: 32 bytes of header and 4 per slot, little-endian, fixed width:
//   magic u32 "RKRL" | version u16 | reserved u16 (0) | checksum u64 | server u32 |
//   count u32 | map_epoch u64 (the server's applied map when it wrote; information) |
//   count x slot u32 (strictly ascending)
// The checksum is XXH3-64 of the whole record with the checksum field read as zero. Decode
// checks every field (the bytes come from etcd), that the length is the count's and at most
// kRingLossMaxSlots, and that the key names the server.
// Thread safety: a value type.
#ifndef RKV_COMMON_CLUSTER_RING_LOSS_RECORD_H_
#define RKV_COMMON_CLUSTER_RING_LOSS_RECORD_H_

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "rkv/status.h"

namespace rkv::cluster {

inline constexpr uint32_t kRingLossMagic = 0x4c524b52;  // "RKRL" little-endian
inline constexpr uint16_t kRingLossVersion = 1;
inline constexpr size_t kRingLossHeaderBytes = 32;
inline constexpr uint32_t kRingLossMaxSlots = 65536;  // SlotMap's most slots

struct RingLossRecord {
  uint32_t server = 0;
  uint64_t map_epoch = 0;
  std::vector<uint32_t> slots;  // strictly ascending, 1..kRingLossMaxSlots of them

  // The key's part after the cluster prefix: "ringloss/SERVER".
  std::string KeySuffix() const;
  // kInvalidArgument for server 0, no slots, too many, or slots not strictly ascending.
  [[nodiscard]] Status Encode(std::string* out) const;
  // `key_suffix`: the etcd key after the cluster prefix; it must name the record's server.
  [[nodiscard]] static Status Decode(std::string_view key_suffix, std::string_view bytes,
                                     RingLossRecord* out);
};

}  // namespace rkv::cluster

#endif  // RKV_COMMON_CLUSTER_RING_LOSS_RECORD_H_
