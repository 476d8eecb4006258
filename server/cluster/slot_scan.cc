// SPDX-License-Identifier: Apache-2.0
#include "server/cluster/slot_scan.h"

namespace rkv::cluster {

bool ScanSlots(const Table& table, const OwnershipTable& owners, const std::vector<bool>& in_set,
               const std::function<bool(const std::string& key, const std::string& value)>& fn) {
  std::vector<std::pair<std::string, std::string>> entries;
  const uint32_t buckets = table.geometry().num_buckets;
  for (uint32_t b = 0; b <= buckets; ++b) {
    entries.clear();
    table.CollectBucket(b, &entries);
    for (const auto& [key, value] : entries)
      if (in_set[owners.SlotOf(key)] && !fn(key, value)) return false;
  }
  return true;
}

}  // namespace rkv::cluster
