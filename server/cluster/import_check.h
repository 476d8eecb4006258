// SPDX-License-Identifier: Apache-2.0
// CheckImportRecord: MIGRATE_BEGIN's check against etcd (docs/cluster.md, "Migration"; the
// argument in docs/design.md, "Abandoned imports"). A target takes a BEGIN only from the
// source of the migration etcd holds now: NAME/migration is a COPY to this server with the
// nonce the BEGIN carries, and its slots include every slot the BEGIN names. So a source that
// stalled past its record (replaced or cancelled by a coordinator) cannot take over, or purge,
// a newer import of the same slots, and a process with the cluster's token but no etcd access
// cannot begin an import at all (the nonce is random, and only etcd holds it).
// Thread safety: a function; the etcd client may be shared (EtcdClient is thread-safe).
#ifndef RKV_SERVER_CLUSTER_IMPORT_CHECK_H_
#define RKV_SERVER_CLUSTER_IMPORT_CHECK_H_

#include <cstdint>
#include <vector>

#include "common/cluster/cluster_address.h"
#include "common/etcd/etcd_client.h"
#include "rkv/status.h"

namespace rkv::cluster {

// OK, or INVALID_ARGUMENT naming why the BEGIN is refused (UNAVAILABLE/TIMEOUT-like codes when
// etcd cannot be read; my_id 0: this server has not joined yet).
[[nodiscard]] Status CheckImportRecord(EtcdClient* etcd, const ClusterAddress& cluster,
                                       uint32_t my_id, uint64_t nonce,
                                       const std::vector<uint32_t>& slots);

}  // namespace rkv::cluster

#endif  // RKV_SERVER_CLUSTER_IMPORT_CHECK_H_
