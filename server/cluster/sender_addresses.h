// SPDX-License-Identifier: Apache-2.0
// SenderAddresses: where each server of the applied map registered (its --listen address,
// resolved to IPv4), so that a backup takes a REPLICATE only over a connection that comes from
// the address of the server the message names as its sender (docs/cluster.md, "Replication";
// docs/security.md). A primary's replication links connect from its own --listen address
// (Options::local_address), so its REPLICATEs pass; a process elsewhere that holds the
// cluster's token cannot pose as a primary unless it can send from that address. (Servers that
// share one address cannot be told apart this way: the epoch, primary and sequence checks
// still apply.)
// Update runs when a map is applied, on the map watcher's thread: a host given as a dotted quad
// costs nothing; a name is resolved once per distinct host string (again only while it does
// not resolve), never on a request's path. Check runs on the workers, for each REPLICATE (a
// lock and a hash lookup).
// Thread safety: every method from any thread (one mutex). Bounded by the map's servers.
#ifndef RKV_SERVER_CLUSTER_SENDER_ADDRESSES_H_
#define RKV_SERVER_CLUSTER_SENDER_ADDRESSES_H_

#include <cstdint>
#include <mutex>
#include <string>
#include <unordered_map>

#include "common/cluster/slot_map.h"
#include "rkv/status.h"

namespace rkv::cluster {

class SenderAddresses {
 public:
  // Takes the map's servers and epoch.
  void Update(const SlotMap& map);
  enum class Verdict {
    kMatch,     // server `id` registered at this address
    kUnknown,   // cannot tell yet (answer "ask again"): the message's epoch is newer than the
                // map applied here (none yet included), or the sender's host did not resolve
    kMismatch,  // server `id` registered elsewhere, or no server `id` is in a map at least as
                // new as the message's
  };
  // `epoch`: the map epoch the message was sent at; `ipv4`: the connection's peer address,
  // network byte order (as in sockaddr_in; 0: none known).
  Verdict Check(uint32_t id, uint64_t epoch, uint32_t ipv4) const;
  // Check as the answer to the REPLICATE: OK (kMatch), UNAVAILABLE "ask again" (kUnknown) or
  // INVALID_ARGUMENT naming the sender (kMismatch).
  [[nodiscard]] Status Admit(uint32_t id, uint64_t epoch, uint32_t ipv4) const;

 private:
  mutable std::mutex mu_;
  uint64_t epoch_ = 0;                           // guarded by mu_: the map's
  bool any_ = false;                             // guarded by mu_: a map was applied
  std::unordered_map<uint32_t, uint32_t> ipv4_;  // guarded by mu_: server id -> its address
  // Host string -> its address (0: did not resolve); the watcher thread's alone.
  std::unordered_map<std::string, uint32_t> resolved_;
};

}  // namespace rkv::cluster

#endif  // RKV_SERVER_CLUSTER_SENDER_ADDRESSES_H_
