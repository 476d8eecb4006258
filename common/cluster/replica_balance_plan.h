// SPDX-License-Identifier: Apache-2.0
// Replica balance planning (the coordinator's arithmetic for `cluster rebalance` in a
// replicated cluster; docs/cluster.md, "Rebalancing replicated slots"): which role changes
// bring the live servers toward holding an even share of the replicas and of the primaries.
// Two kinds of step, each a MigrationRecord the slot's primary carries out:
//  - REPLACE_BACKUP: a server holding too many replicas gives up a backup place of a slot to a
//    server holding too few (copied to it first; the slot never has fewer backups);
//  - HANDOVER: a server that is primary of too many slots hands one to a backup of it (no
//    copy: the backup holds every acknowledged write); when no backup of its slots is primary
//    of too few, a chain of hand-overs (a -> b in one slot, b -> c in another, ...) ends at
//    one that is, and the servers between keep their count.
// Only slots whose every replica place is filled by a live server take part (a slot short of
// backups or with a down replica is failover's and re-replication's). A backup leaves a slot
// only for a server that keeps the slot's zones at least as spread: when the leaving backup's
// zone is not among the slot's other replicas', neither is the new one's ("" is a zone of its
// own). One call plans one round: each slot gets at most one step, and a round's steps assume
// the earlier ones done. Replica shares come first: a round that moves a backup off an
// overloaded server may leave its primaries for the next round. Every step strictly lowers
// the sum of squared shares (replicas, then primaries), so repeated rounds end.
// Thread safety: a pure function.
#ifndef RKV_COMMON_CLUSTER_REPLICA_BALANCE_PLAN_H_
#define RKV_COMMON_CLUSTER_REPLICA_BALANCE_PLAN_H_

#include <cstdint>
#include <vector>

#include "common/cluster/replica_plan.h"
#include "common/cluster/slot_map.h"

namespace rkv::cluster {

struct RoleStep {
  enum Kind : uint8_t { kReplaceBackup, kHandover };
  Kind kind = kReplaceBackup;
  uint32_t slot = 0;
  uint32_t primary_id = 0;   // the slot's primary: it carries the step out
  uint32_t to_id = 0;        // the new backup (REPLACE_BACKUP) or the new primary (HANDOVER)
  uint32_t replaced_id = 0;  // REPLACE_BACKUP: the backup that leaves the slot
};

// One round of steps, in slot order. `live`: the live servers that may hold replicas (a server
// being removed is left out); servers of `live` that are not in the map hold nothing yet and
// are counted (the caller has added them to the map's server table, or they get no step).
// `avoid` (pairs from SuspectRecords: the primary cannot reach the server): no step makes a
// map in which a slot's backup is paired with its primary. A REPLACE_BACKUP never gives a
// backup place to a server paired with the slot's primary; a HANDOVER never goes to a server
// paired with any other replica of the slot (the old primary included).
std::vector<RoleStep> PlanReplicaBalance(const SlotMap& map, const std::vector<LiveServer>& live,
                                         const std::vector<Avoid>& avoid = {});

}  // namespace rkv::cluster

#endif  // RKV_COMMON_CLUSTER_REPLICA_BALANCE_PLAN_H_
