// SPDX-License-Identifier: Apache-2.0
// The map lease (docs/design.md, "Replicas and failover"): GETs are one-sided, and a primary
// that was stopped (SIGSTOP, a long pause) still has a NIC that serves READs of its region, so
// after a failover its ownership words may keep saying OWNED to a client whose map is old. Two
// rules close that window, assuming only that clocks advance at rates within kMaxClockDrift of
// each other (no synchronised clocks):
//  - a cluster client trusts its map for GETs for at most kMapLeaseMs after the start of the
//    last etcd read (linearizable) that confirmed it; past that it reads the map again first;
//  - a promoted backup takes client writes only PromotionFence() after it applied the map that
//    promoted it (a read of the map started before the promotion commit is at most kMapLeaseMs
//    old by then, on any clock within the drift bound), so until then every value a client can
//    read at the old primary is still current.
// Thread safety: constants.
#ifndef RKV_COMMON_CLUSTER_MAP_LEASE_H_
#define RKV_COMMON_CLUSTER_MAP_LEASE_H_

#include <chrono>

namespace rkv::cluster {

inline constexpr int kMapLeaseMs = 500;
inline constexpr double kMaxClockDrift = 0.01;  // 1%: quartz is within 0.01%
inline constexpr int kFenceMarginMs = 100;

inline std::chrono::milliseconds PromotionFence() {
  return std::chrono::milliseconds(int(kMapLeaseMs * (1 + kMaxClockDrift)) + kFenceMarginMs);
}

}  // namespace rkv::cluster

#endif  // RKV_COMMON_CLUSTER_MAP_LEASE_H_
