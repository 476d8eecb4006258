// SPDX-License-Identifier: Apache-2.0
#include "server/cluster/import_check.h"

#include <algorithm>
#include <string>

#include "common/cluster/migration_record.h"

namespace rkv::cluster {

Status CheckImportRecord(EtcdClient* etcd, const ClusterAddress& cluster, uint32_t my_id,
                         uint64_t nonce, const std::vector<uint32_t>& slots) {
  if (my_id == 0) return Status(Code::kUnavailable, "this server has not joined the cluster yet");
  bool found = false;
  EtcdKv kv;
  Status s = etcd->Get(cluster.Prefix() + "migration", &found, &kv, nullptr);
  if (!s.ok()) return Status(s.code(), "reading the migration record: " + s.message());
  MigrationRecord rec;
  if (found) s = MigrationRecord::Decode(kv.value, &rec);
  if (!found || !s.ok() || rec.nonce != nonce || rec.state != MigrationRecord::kCopy ||
      rec.to_id != my_id)
    return Status(Code::kInvalidArgument,
                  "no migration " + std::to_string(nonce) + " copying to this server (server " +
                      std::to_string(my_id) + ") is under way in etcd: refused");
  for (uint32_t slot : slots)
    if (std::find(rec.slots.begin(), rec.slots.end(), slot) == rec.slots.end())
      return Status(Code::kInvalidArgument, "slot " + std::to_string(slot) +
                                                " is not one migration " + std::to_string(nonce) +
                                                " copies: refused");
  return Status::Ok();
}

}  // namespace rkv::cluster
