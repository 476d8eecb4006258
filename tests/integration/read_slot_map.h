// SPDX-License-Identifier: Apache-2.0
// ReadSlotMap: the test programs' one read of a cluster's slot map from etcd (repl_probe,
// abandon_probe): parses etcd://HOST:PORT[,...]/NAME, reads NAME's map key once and decodes
// it. Not a watch: the caller gets the map of that moment. Thread safety: none needed (no
// shared state). Errors name the step that failed.
#ifndef RKV_TESTS_INTEGRATION_READ_SLOT_MAP_H_
#define RKV_TESTS_INTEGRATION_READ_SLOT_MAP_H_

#include <memory>
#include <string>

#include "common/cluster/cluster_address.h"
#include "common/cluster/slot_map.h"
#include "common/etcd/etcd_client.h"
#include "rkv/status.h"

namespace rkv::integration {

[[nodiscard]] inline Status ReadSlotMap(const std::string& cluster, cluster::SlotMap* map) {
  cluster::ClusterAddress address;
  Status s = cluster::ParseClusterAddress(cluster, &address);
  if (!s.ok()) return Status(s.code(), "--cluster: " + s.message());
  EtcdSettings settings;
  settings.endpoints = address.endpoints;
  std::unique_ptr<EtcdClient> etcd;
  s = EtcdClient::Open(settings, &etcd);
  if (!s.ok()) return Status(s.code(), "etcd: " + s.message());
  bool found = false;
  EtcdKv kv;
  s = etcd->Get(address.Prefix() + "map", &found, &kv, nullptr);
  if (s.ok() && !found) s = Status(Code::kNotFound, "no map");
  if (s.ok()) s = cluster::SlotMap::Decode(kv.value, map);
  if (!s.ok()) return Status(s.code(), "reading the map: " + s.message());
  return Status::Ok();
}

}  // namespace rkv::integration

#endif  // RKV_TESTS_INTEGRATION_READ_SLOT_MAP_H_
