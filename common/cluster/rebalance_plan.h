// SPDX-License-Identifier: Apache-2.0
// Rebalance planning (the coordinator's arithmetic; docs/cluster.md, "Rebalance"): given the
// slot map and the live servers, which unassigned slots each live server takes and which owned
// slots must move so that every live server holds floor(S/L) or ceil(S/L) of the S slots that
// are unassigned or held by live servers (L live servers). Slots of servers that are in the map
// but not live are left where they are: without replicas their data is only there, so the
// map keeps naming them (clients get a clear error) until that server comes back.
// `remove` (a server id, or 0): that server is drained: it takes no slot, and all of its slots
// move to the others.
// Thread safety: pure functions.
#ifndef RKV_COMMON_CLUSTER_REBALANCE_PLAN_H_
#define RKV_COMMON_CLUSTER_REBALANCE_PLAN_H_

#include <cstdint>
#include <vector>

#include "common/cluster/slot_map.h"
#include "rkv/status.h"

namespace rkv::cluster {

struct SlotMove {
  uint32_t slot = 0;
  uint32_t from_id = 0;  // the current owner's id
  uint32_t to_id = 0;
};

struct RebalancePlan {
  SlotMap assigned;             // the map with the live servers added and unassigned slots given
  std::vector<SlotMove> moves;  // owned slots to migrate, in slot order
};

// Adds a live server to `map`'s server table (or finds it) and sets *index; kInvalidArgument
// naming it when it cannot enter (table full, or its id names another address).
[[nodiscard]] Status AddLiveServer(SlotMap* map, const ServerEntry& e, uint16_t* index);

// `live`: the live servers' entries (their ids and addresses, from their member records).
// kInvalidArgument when no live server can take slots (none, or only `remove`), or the server
// table would overflow.
[[nodiscard]] Status PlanRebalance(const SlotMap& map, const std::vector<ServerEntry>& live,
                                   uint32_t remove, RebalancePlan* out);

}  // namespace rkv::cluster

#endif  // RKV_COMMON_CLUSTER_REBALANCE_PLAN_H_
