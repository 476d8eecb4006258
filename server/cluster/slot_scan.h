// SPDX-License-Identifier: Apache-2.0
// ScanSlots: every entry of the table whose key falls in a set of slots, for migration (the
// source's copy, the receiver's purge). One pass over the buckets (Table::CollectBucket: each
// entry consistent, taken under its bucket's lock for the copy only); an entry moved between
// buckets during the pass may be seen twice or not at all, so a copy also ships every key
// written since before the pass (OwnershipTable's dirty keys).
// Thread safety: as Table::CollectBucket (any thread, concurrent with writers).
#ifndef RKV_SERVER_CLUSTER_SLOT_SCAN_H_
#define RKV_SERVER_CLUSTER_SLOT_SCAN_H_

#include <functional>
#include <string>
#include <vector>

#include "server/cluster/ownership_table.h"
#include "server/store/table.h"

namespace rkv::cluster {

// in_set: num_slots flags. fn returns false to stop the pass (then ScanSlots returns false).
bool ScanSlots(const Table& table, const OwnershipTable& owners, const std::vector<bool>& in_set,
               const std::function<bool(const std::string& key, const std::string& value)>& fn);

}  // namespace rkv::cluster

#endif  // RKV_SERVER_CLUSTER_SLOT_SCAN_H_
