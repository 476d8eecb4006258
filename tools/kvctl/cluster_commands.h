// SPDX-License-Identifier: Apache-2.0
// kvctl's `cluster` commands against a cluster address (etcd://HOST:PORT[,...]/NAME;
// docs/cluster.md): `cluster init [--slots=N] [--replicas=R]` creates the cluster's slot map
// once (refused if it exists: one transaction, create-if-absent); `cluster status [--json]`
// shows the map's epoch, each server (from the map and from the live membership records),
// whether it is live, and its slots; `cluster rebalance` and `cluster remove ADDR:PORT` put a
// request for the elected coordinator (common/cluster/cluster_request.h) and wait for its
// answer. Errors are one line on stderr.
// Thread safety: single-threaded (kvctl's main).
#ifndef RKV_TOOLS_KVCTL_CLUSTER_COMMANDS_H_
#define RKV_TOOLS_KVCTL_CLUSTER_COMMANDS_H_

#include <string>
#include <vector>

#include "common/cluster/cluster_address.h"
#include "common/etcd/etcd_transport.h"

namespace rkv::kvctl {

struct ClusterArgs {
  cluster::ClusterAddress address;
  EtcdSettings etcd;               // TLS and auth (endpoints from `address`)
  std::vector<std::string> words;  // after "cluster": init | status
  uint32_t slots = 16384;
  uint32_t replicas = 1;
  bool json = false;
  int wait_ms = 600000;  // rebalance/remove: how long to wait for the coordinator's answer
};

// Runs the command; returns kvctl's exit status (0 OK, 2 an error, printed).
int RunClusterCommand(const ClusterArgs& a);

}  // namespace rkv::kvctl

#endif  // RKV_TOOLS_KVCTL_CLUSTER_COMMANDS_H_
