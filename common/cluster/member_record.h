// SPDX-License-Identifier: Apache-2.0
// MemberRecord: what a kvserver that joined a cluster puts under NAME/servers/ID in etcd,
// attached to its lease (docs/cluster.md, "Membership"): its id, the address clients dial, its
// failure domain and a random instance id of this process (a restart is a new instance).
// Encoding: 128 bytes, little-endian, fixed width, XXH3-64 checksum of the whole record with
// the checksum field read as zero; Decode
// checks every field (the bytes come from etcd).
// Thread safety: a value type.
#ifndef RKV_COMMON_CLUSTER_MEMBER_RECORD_H_
#define RKV_COMMON_CLUSTER_MEMBER_RECORD_H_

#include <cstdint>
#include <string>
#include <string_view>

#include "rkv/status.h"

namespace rkv::cluster {

inline constexpr uint32_t kMemberMagic = 0x534b5652;  // "RVKS" little-endian
inline constexpr uint16_t kMemberVersion = 1;
inline constexpr size_t kMemberRecordBytes = 128;
inline constexpr size_t kMaxZoneBytes = 32;

struct MemberRecord {
  uint32_t id = 0;
  std::string host;  // 1..64 printable bytes
  uint16_t port = 0;
  std::string zone;  // 0..32 printable bytes ("" : none declared)
  uint64_t instance = 0;

  // Fails (kInvalidArgument) on a field that does not fit the format.
  [[nodiscard]] Status Encode(std::string* out) const;
  [[nodiscard]] static Status Decode(std::string_view bytes, MemberRecord* out);
};

// The 4-byte little-endian value of NAME/ids/HOST:PORT and NAME/next_id.
std::string EncodeId(uint32_t id);
[[nodiscard]] bool DecodeId(std::string_view bytes, uint32_t* id);

}  // namespace rkv::cluster

#endif  // RKV_COMMON_CLUSTER_MEMBER_RECORD_H_
