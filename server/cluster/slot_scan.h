// SPDX-License-Identifier: Apache-2.0
// ScanSlots: every entry of the table whose key falls in a set of slots, for migration (the
// source's copy, the receiver's purge). KeysBySlot and DeleteHeld: the deletions of slots a
// server clears (a migration's purges, the slot reclaimer), in batches each admitted by a hold
// on the slot (OwnershipTable::BeginReclaim, BeginPurge) that fails once the slot is no longer
// the caller's to clear. One pass over the buckets (Table::CollectBucket: each
// entry consistent, taken under its bucket's lock for the copy only); an entry moved between
// buckets during the pass may be seen twice or not at all, so a copy also ships every key
// written since before the pass (OwnershipTable's dirty keys).
// Thread safety: as Table::CollectBucket (any thread, concurrent with writers).
#ifndef RKV_SERVER_CLUSTER_SLOT_SCAN_H_
#define RKV_SERVER_CLUSTER_SLOT_SCAN_H_

#include <cstddef>
#include <cstdint>
#include <functional>
#include <map>
#include <string>
#include <vector>

#include "server/cluster/ownership_table.h"
#include "server/store/table.h"

namespace rkv::cluster {

// in_set: num_slots flags. fn returns false to stop the pass (then ScanSlots returns false).
// on_buckets (may be null): told how many buckets the pass went through, every kBucketsPerNote.
inline constexpr uint32_t kBucketsPerNote = 4096;
bool ScanSlots(const Table& table, const OwnershipTable& owners, const std::vector<bool>& in_set,
               const std::function<bool(const std::string& key, const std::string& value)>& fn,
               const std::function<void(uint64_t buckets)>& on_buckets = nullptr);

// The keys of the slots in `in_set` (one ScanSlots pass), by slot.
std::map<uint32_t, std::vector<std::string>> KeysBySlot(const Table& table,
                                                        const OwnershipTable& owners,
                                                        const std::vector<bool>& in_set);

// Deletes `keys` in batches of kKeysPerHold: each batch only if hold() admits it (it counts
// the batch in flight on the slot), release() after it. Stops at the first refused hold, or
// when stop() (may be null) says so. The number of entries deleted; *complete (may be null):
// every key was gone through; *failed (may be null): deletes the table refused other than
// NOT_FOUND (a durable server's log failing).
inline constexpr size_t kKeysPerHold = 64;
size_t DeleteHeld(Table* table, const std::vector<std::string>& keys,
                  const std::function<bool()>& hold, const std::function<void()>& release,
                  const std::function<bool()>& stop = nullptr, bool* complete = nullptr,
                  size_t* failed = nullptr);

}  // namespace rkv::cluster

#endif  // RKV_SERVER_CLUSTER_SLOT_SCAN_H_
