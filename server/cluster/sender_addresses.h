// SPDX-License-Identifier: Apache-2.0
// SenderAddresses: where each server of the applied map registered (its --listen address,
// resolved to IPv4), so that a backup takes a REPLICATE only over a connection that comes from
// the address of the server the message names as its sender (docs/cluster.md, "Replication").
// A primary's replication links connect from its own --listen address (Options::local_address),
// so its REPLICATEs pass; a client that holds the cluster's token but runs elsewhere cannot
// pose as a primary. (Servers that share one address cannot be told apart this way: the
// epoch, primary and sequence checks still apply.)
// Update runs when a map is applied (names are resolved there, never on a request's path);
// Check on the workers, for each REPLICATE (a lock and a hash lookup).
// Thread safety: every method from any thread (one mutex). Bounded by the map's servers.
#ifndef RKV_SERVER_CLUSTER_SENDER_ADDRESSES_H_
#define RKV_SERVER_CLUSTER_SENDER_ADDRESSES_H_

#include <cstdint>
#include <mutex>
#include <unordered_map>

#include "common/cluster/slot_map.h"

namespace rkv::cluster {

class SenderAddresses {
 public:
  // Takes the map's servers; a host that does not resolve to IPv4 matches no connection.
  void Update(const SlotMap& map);
  enum class Verdict {
    kMatch,     // server `id` registered at this address
    kUnknown,   // no server `id` in the applied map (yet: a newer map may name it; ask again)
    kMismatch,  // server `id` registered elsewhere (or its host does not resolve to IPv4)
  };
  // `ipv4`: the connection's peer address, network byte order (as in sockaddr_in).
  Verdict Check(uint32_t id, uint32_t ipv4) const;

 private:
  mutable std::mutex mu_;
  std::unordered_map<uint32_t, uint32_t> ipv4_;  // guarded by mu_: server id -> its address
};

}  // namespace rkv::cluster

#endif  // RKV_SERVER_CLUSTER_SENDER_ADDRESSES_H_
