// SPDX-License-Identifier: Apache-2.0
// Requests to a cluster's coordinator and its answers, as etcd values (docs/cluster.md,
// "Requests"): kvctl puts NAME/request (create-if-absent: one request at a time), the elected
// coordinator carries it out, then in one transaction deletes it and puts NAME/result.
//
// Request (32 bytes, little-endian): magic 0x51564b52 ("RKVQ") u32, version u16, kind u16
// (1 rebalance, 2 remove), nonce u64 (the asker's, random), server id u32 (remove: the server
// to drain; else 0), 0 u32, XXH3-64 of the 32 bytes with these 8 read as zero.
// Result (32 + message bytes): magic 0x53564b52 ("RKVS") u32, version u16, code u16 (rkv::Code),
// nonce u64 (the request's), slots assigned u32, slots moved u32, XXH3-64 as above, then a
// message of at most 1024 printable ASCII bytes (Encode turns any other byte into '?').
// Thread safety: value types and pure functions.
#ifndef RKV_COMMON_CLUSTER_CLUSTER_REQUEST_H_
#define RKV_COMMON_CLUSTER_CLUSTER_REQUEST_H_

#include <cstdint>
#include <string>
#include <string_view>

#include "rkv/status.h"

namespace rkv::cluster {

inline constexpr size_t kRequestBytes = 32;
inline constexpr size_t kMaxResultMessage = 1024;

struct ClusterRequest {
  enum Kind : uint16_t { kRebalance = 1, kRemove = 2 };
  Kind kind = kRebalance;
  uint64_t nonce = 0;
  uint32_t server_id = 0;
  std::string Encode() const;
  [[nodiscard]] static Status Decode(std::string_view bytes, ClusterRequest* out);
};

struct ClusterResult {
  Code code = Code::kOk;
  uint64_t nonce = 0;
  uint32_t assigned = 0, moved = 0;
  std::string message;  // truncated to kMaxResultMessage, non-printable bytes '?', by Encode
  std::string Encode() const;
  [[nodiscard]] static Status Decode(std::string_view bytes, ClusterResult* out);
};

}  // namespace rkv::cluster

#endif  // RKV_COMMON_CLUSTER_CLUSTER_REQUEST_H_
