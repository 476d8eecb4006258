// SPDX-License-Identifier: Apache-2.0
// RingWritersToRevoke: which primaries' log rings a backup revokes before it applies a new map
// (docs/replication-rings.md, "Revocation: the fence"): for every slot this server backs in
// either map, the slot's former and new primary when its primary changed or this server's
// backup role did; every server of either map when maps were skipped (a primary named only in
// a skipped map may hold a ring here; its writes are two-sided from then on) or there is no
// map before. Never this server itself.
// Thread safety: a pure function.
#ifndef RKV_SERVER_CLUSTER_RING_REVOCATIONS_H_
#define RKV_SERVER_CLUSTER_RING_REVOCATIONS_H_

#include <cstdint>
#include <vector>

#include "common/cluster/slot_map.h"

namespace rkv::cluster {

// `before`: the map applied so far (null: none); `me`: this server's id. Sorted, distinct.
std::vector<uint32_t> RingWritersToRevoke(const SlotMap* before, const SlotMap& after, uint32_t me);

}  // namespace rkv::cluster

#endif  // RKV_SERVER_CLUSTER_RING_REVOCATIONS_H_
