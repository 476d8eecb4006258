// SPDX-License-Identifier: Apache-2.0
// ClusterAddress: where a cluster lives, as users write it: etcd://HOST:PORT[,HOST:PORT...]/NAME
// (etcd over http) or etcds://... (https; with --etcd_cacert and friends). HOST is a name, an
// IPv4 address or a bracketed IPv6 address; NAME is 1..64 of [A-Za-z0-9._-]. The endpoints are
// members of one etcd cluster (EtcdTransport fails over between them); the cluster's keys live
// under /rkv/cluster/NAME/ (docs/cluster.md).
// Thread safety: pure functions and a value type.
#ifndef RKV_COMMON_CLUSTER_CLUSTER_ADDRESS_H_
#define RKV_COMMON_CLUSTER_CLUSTER_ADDRESS_H_

#include <string>
#include <string_view>
#include <vector>

#include "rkv/status.h"

namespace rkv::cluster {

struct ClusterAddress {
  std::vector<std::string> endpoints;  // http(s)://HOST:PORT each
  std::string name;
  // The etcd key prefix of the cluster, ending in '/'.
  std::string Prefix() const { return "/rkv/cluster/" + name + "/"; }
};

// True if `s` starts with etcd:// or etcds:// (a cluster, not ADDR:PORT of one server).
bool IsClusterAddress(std::string_view s);
// Parses a cluster address; errors say which part is wrong.
[[nodiscard]] Status ParseClusterAddress(std::string_view s, ClusterAddress* out);

}  // namespace rkv::cluster

#endif  // RKV_COMMON_CLUSTER_CLUSTER_ADDRESS_H_
