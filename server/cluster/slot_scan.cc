// SPDX-License-Identifier: Apache-2.0
#include "server/cluster/slot_scan.h"

#include <algorithm>
#include <utility>

namespace rkv::cluster {

bool ScanSlots(const Table& table, const OwnershipTable& owners, const std::vector<bool>& in_set,
               const std::function<bool(const std::string& key, const std::string& value)>& fn,
               const std::function<void(uint64_t buckets)>& on_buckets) {
  std::vector<std::pair<std::string, std::string>> entries;
  const uint32_t buckets = table.geometry().num_buckets;
  for (uint32_t b = 0; b <= buckets; ++b) {
    if (on_buckets && b % kBucketsPerNote == 0) on_buckets(b);
    entries.clear();
    table.CollectBucket(b, &entries);
    for (const auto& [key, value] : entries)
      if (in_set[owners.SlotOf(key)] && !fn(key, value)) return false;
  }
  return true;
}

std::map<uint32_t, std::vector<std::string>> KeysBySlot(const Table& table,
                                                        const OwnershipTable& owners,
                                                        const std::vector<bool>& in_set) {
  std::map<uint32_t, std::vector<std::string>> keys;
  ScanSlots(table, owners, in_set, [&](const std::string& k, const std::string&) {
    keys[owners.SlotOf(k)].push_back(k);
    return true;
  });
  return keys;
}

size_t DeleteHeld(Table* table, const std::vector<std::string>& keys,
                  const std::function<bool()>& hold, const std::function<void()>& release,
                  const std::function<bool()>& stop, bool* complete, size_t* failed) {
  size_t deleted = 0, i = 0, refused = 0;
  while (i < keys.size() && !(stop && stop())) {
    if (!hold()) break;  // the slot changed: no longer the caller's to clear
    for (size_t end = std::min(keys.size(), i + kKeysPerHold); i < end; ++i) {
      const Status s = table->Delete(keys[i]);
      if (s.ok())
        ++deleted;
      else if (!s.IsNotFound())
        ++refused;
    }
    release();
  }
  if (complete != nullptr) *complete = i == keys.size();
  if (failed != nullptr) *failed = refused;
  return deleted;
}

}  // namespace rkv::cluster
