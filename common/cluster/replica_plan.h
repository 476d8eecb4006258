// SPDX-License-Identifier: Apache-2.0
// Replica planning (the coordinator's arithmetic for replicas; docs/cluster.md, "The plan for
// replicas"): each slot of a SlotMap has map.replicas() owners, r = 0 the primary and
// r = 1..R-1 its backups (kUnassigned: none).
// - PlanFailover: given the live server ids, the map after failover: dead backups leave their
//   slots (the live ones move forward, keeping their order, so r = 1.. are filled first); a slot
//   whose primary is down gets its first live backup as primary and keeps its other live
//   backups, in order (they may differ from the new primary by the former primary's last write;
//   the promoted server resyncs them before it takes reads and writes: Replicator::Resync);
//   a slot with no live replica stays as it is (stranded: its data is only on servers that are
//   down).
// - DropSuspectBackups: a primary that cannot reach a backup (a partial partition; its
//   SuspectRecord in etcd) loses that backup on its slots (the others move forward).
// - DropRingLossReplicas: a server that reported it may lack an acknowledged write of a slot
//   (its RingLossRecord) leaves that slot's replicas: as a backup it is dropped; as the
//   primary (a promotion that found the mark: it never serves) it gives way to the slot's first
//   live backup that reported no such loss, the other clean backups kept (resynced by the
//   promoted one, as after a failover). A slot where no replica that reported no loss of it
//   is live stays as it is (its reported replicas keep their entries: unavailable, never
//   wrong, never freed).
// - PlanReplicaAdds: which live servers should receive a copy of which slot, for slots whose
//   primary is live and that lack backups: spread over zones first, then over servers by their
//   replica count, never a server its primary reported (the avoid pairs). The caller copies each
//   slot and then assigns the new backup in the map.
// Invariants: neither function ever gives a server two replicas of one slot; the output map
// keeps the input's epoch (the caller raises it when it commits the map).
// Thread safety: pure functions.
#ifndef RKV_COMMON_CLUSTER_REPLICA_PLAN_H_
#define RKV_COMMON_CLUSTER_REPLICA_PLAN_H_

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "common/cluster/slot_map.h"
#include "rkv/status.h"

namespace rkv::cluster {

// A live server and the zone (failure domain) it declared; "" when none: such a server is
// never taken to share a zone with any other, including another one without a zone.
struct LiveServer {
  ServerEntry entry;
  std::string zone;
};

struct FailoverPlan {
  SlotMap map;                     // the map after failover, at the input's epoch
  std::vector<uint32_t> promoted;  // slots whose primary changed, in slot order
  // Backups removed from the map: the dead backups of every slot (a promoted one's included).
  uint32_t backups_dropped = 0;
  uint32_t stranded = 0;  // slots whose primary and all backups are down: left unchanged
};

// `live_ids`: ids of the live servers (ids absent from the map are ignored). Slots without a
// primary are left unchanged. kInvalidArgument when the map has no replicas per slot.
[[nodiscard]] Status PlanFailover(const SlotMap& map, const std::vector<uint32_t>& live_ids,
                                  FailoverPlan* out);

// A pair the maps must keep apart: `server` is never a backup of a slot whose primary is
// `primary` (from a SuspectRecord: the primary cannot reach that server).
struct Avoid {
  uint32_t primary = 0;
  uint32_t server = 0;
};

// `out`: the map with, on every slot whose primary is some pair's primary, that pair's server
// removed from its backups (the later backups move forward); `*dropped` counts the removals.
// The output keeps the input's epoch. kInvalidArgument when the map has no replicas per slot.
[[nodiscard]] Status DropSuspectBackups(const SlotMap& map, const std::vector<Avoid>& avoid,
                                        SlotMap* out, uint32_t* dropped);

// A server's report that it may lack an acknowledged write of a slot (RingLossRecord).
struct SlotLoss {
  uint32_t server = 0;
  uint32_t slot = 0;
};

// `out`: the map with every reported server taken out of the reported slot as described above;
// `*dropped` counts the replicas removed, `*promoted` the slots whose primary changed. A
// primary that is not live is left to PlanFailover (run on the output). The output keeps the
// input's epoch. kInvalidArgument when the map has no replicas per slot.
[[nodiscard]] Status DropRingLossReplicas(const SlotMap& map, const std::vector<SlotLoss>& losses,
                                          const std::vector<uint32_t>& live_ids, SlotMap* out,
                                          uint32_t* dropped, uint32_t* promoted);

struct ReplicaAdd {
  uint32_t slot = 0;
  uint32_t from_id = 0;  // the primary's id
  uint32_t to_id = 0;
};

struct ReplicaPlan {
  SlotMap map;                   // the input map with the live servers added to its server table
  std::vector<ReplicaAdd> adds;  // in slot order; not assigned in `map`
};

// For each slot (in slot order) whose primary is live and which has fewer than map.replicas()
// replicas assigned, the live servers holding no replica of it that should receive a copy (up
// to the missing number): a server whose zone none of the slot's replicas has first, then the
// one holding the fewest replicas (the map's, plus the adds planned so far), then the lowest
// id; never a server paired with the slot's primary in `avoid`, nor one that reported a loss of
// the slot (`losses`: it would be dropped again at once); a slot whose primary reported a loss
// of it gets none. A slot with no eligible server
// is skipped. Stops after `limit` adds (0: no limit).
// kInvalidArgument when a live server cannot enter the map (table full, or its id names
// another address).
[[nodiscard]] Status PlanReplicaAdds(const SlotMap& map, const std::vector<LiveServer>& live,
                                     size_t limit, ReplicaPlan* out,
                                     const std::vector<Avoid>& avoid = {},
                                     const std::vector<SlotLoss>& losses = {});

// How many of slot's replicas are assigned (0..map.replicas()).
uint32_t ReplicasOf(const SlotMap& map, uint32_t slot);

}  // namespace rkv::cluster

#endif  // RKV_COMMON_CLUSTER_REPLICA_PLAN_H_
