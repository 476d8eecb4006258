// SPDX-License-Identifier: Apache-2.0
// ClusterRouter: rkv::Client over a cluster (Client::Connect("etcd://HOST:PORT/NAME");
// docs/cluster.md, "Clients"). It follows the cluster's slot map (common/cluster/map_watcher.h:
// read at connect, then watched), routes each key to its slot's owner over a single-server
// connection (ClientImpl) opened on first use, and follows the cluster's redirections:
// - a write refused MOVED: re-read the map (at once, not waiting for the watch) and send it to
//   the owner the map names; TRY_AGAIN (the slot is being handed over): wait a little and
//   resend. Neither was applied, so resending is safe.
// - a GET: every round trip also reads the slot's ownership word (ClientImpl::ExpectOwner); a
//   word that does not say "owned at an epoch no newer than this map" fails the GET with MOVED
//   before anything it read is used, and the GET is retried the same way.
// Retries end at rpc_timeout_ms (the last MOVED or TRY_AGAIN is returned). A slot without an
// owner, or whose owner cannot be reached, is UNAVAILABLE (naming the slot and the server) at
// once. A write whose connection failed after it was sent is "outcome unknown"
// (CONNECTION_LOST), never resent; the broken connection is dropped and the next call opens a
// new one. With replicas, an operation that waits on a server the watched map has since
// replaced as the slot's primary (a failover) stops waiting (after at least kAbandonAfterMs;
// client/failover_watch.h): a write is then "outcome unknown" the same way, a GET (or a
// MultiGet batch) is read again at the new primary. A stopped or cut-off primary sends neither
// a reply nor a disconnect (and a cut-off one completes no READ): the wait would otherwise last
// rpc_timeout_ms. (With watch_cluster_map off the wait re-reads the map itself, every 500 ms.)
// MultiGet and Execute: cluster_router_batch.cc.
// Thread safety: none (one thread at a time, as Client); the map watcher's thread only swaps
// the map under its own lock. Ownership: owns the etcd client, the watcher and every
// connection.
#ifndef RKV_CLIENT_CLUSTER_ROUTER_H_
#define RKV_CLIENT_CLUSTER_ROUTER_H_

#include <chrono>
#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "client/client_impl.h"
#include "common/cluster/cluster_address.h"
#include "common/cluster/map_watcher.h"
#include "common/etcd/etcd_client.h"
#include "rkv/client.h"

namespace rkv {

class ClusterRouter {
 public:
  [[nodiscard]] static Status Open(const cluster::ClusterAddress& address, const Options& options,
                                   std::unique_ptr<ClusterRouter>* out);
  ~ClusterRouter();
  Status Get(std::string_view key, std::string* value);
  Status MultiGet(const std::vector<std::string_view>& keys, std::vector<std::string>* values,
                  std::vector<Status>* statuses);
  Status Put(std::string_view key, std::string_view value);
  Status Delete(std::string_view key);
  Status Execute(BatchOp* ops, size_t n);  // cluster_router_batch.cc
  // Every server's stats: first the sums of the additive figures, then each server's figures
  // as "server<ID>.<name> <value>".
  Status Stats(std::string* text);
  Status Reconnect();
  const ClientCounters& counters();
  const ServerInfo& info() const { return info_; }

 private:
  ClusterRouter(cluster::ClusterAddress address, Options options)
      : address_(std::move(address)), options_(std::move(options)) {}
  enum class Kind { kGet, kPut, kDelete };
  // Runs `kind` for `key` at its owner, following MOVED and TRY_AGAIN until rpc_timeout_ms.
  Status Route(Kind kind, std::string_view key, std::string_view value, std::string* result);
  // A PUT (put) or DELETE of `key` to `c`, the slot's owner (index `owner` of `map`); with
  // replicas its wait for the reply is abandoned once the watched map names another primary.
  Status Write(ClientImpl* c, const cluster::SlotMap& map, uint16_t owner, uint32_t slot, bool put,
               std::string_view key, std::string_view value);
  // A GET of `key` at `c` (index `owner` of `map`); with replicas its READ wait is abandoned
  // once the watched map names another primary (the connection is then broken: Route retries).
  Status ReadAt(ClientImpl* c, const cluster::SlotMap& map, uint16_t owner, uint32_t slot,
                std::string_view key, std::string* value);
  // One round of Execute's writes (at most one per key), pipelined on every owner at once; a
  // write refused MOVED or TRY_AGAIN, or without a reachable owner, goes through Route after.
  void ExecuteWrites(BatchOp* ops, const std::vector<size_t>& round);
  // The connection to server `id` of `map` (opened on first use). Null with *s set on failure.
  // `slot` (kAnySlot: none): with replicas, a connect it is needed for ends early once the
  // watched map gives the slot to another server (a cut-off server answers no connect; rdma_cm
  // mode only: the manual modes' exchange does not ask). Such a server is not marked down.
  static constexpr uint32_t kAnySlot = ~0u;
  ClientImpl* ConnectionTo(const cluster::SlotMap& map, uint16_t index, Status* s,
                           uint32_t slot = kAnySlot);
  // A replicated cluster's GETs need the map confirmed within its lease
  // (common/cluster/map_lease.h): re-reads it if not (again while etcd answers but too slowly,
  // up to rpc_timeout_ms); false (and *s UNAVAILABLE) if etcd fails, never answers in time, or
  // holds a map the watcher refused.
  static constexpr int kDownRefreshMs = 100;
  std::chrono::steady_clock::time_point next_down_refresh_{};
  bool LeaseHeld(const cluster::SlotMap& map, Status* s);
  void Drop(uint32_t id);
  // The current map: re-taken from the watcher only when its epoch moved (one atomic load per
  // operation otherwise; no lock on the GET path).
  const cluster::SlotMap* Map() {
    if (!map_ || watcher_->epoch() != map_->epoch()) map_ = watcher_->current();
    return map_.get();
  }

  const cluster::ClusterAddress address_;
  const Options options_;
  std::unique_ptr<EtcdClient> etcd_;
  std::unique_ptr<cluster::MapWatcher> watcher_;
  std::shared_ptr<const cluster::SlotMap> map_;            // Map()'s
  std::map<uint32_t, std::unique_ptr<ClientImpl>> conns_;  // by server id
  ClientCounters closed_;                                  // counters of dropped connections
  ClientCounters sum_;  // counters(): closed_ + open connections + routing
  uint64_t redirects_ = 0, map_refreshes_ = 0, abandoned_waits_ = 0;
  static constexpr int kAbandonAfterMs = 200;  // an operation's least wait before abandoning
  // Servers whose connect failed: not dialled again before this time (fail fast), and why.
  std::map<uint32_t, std::chrono::steady_clock::time_point> down_until_;
  std::map<uint32_t, std::string> down_why_;
  ServerInfo info_;
};

}  // namespace rkv

#endif  // RKV_CLIENT_CLUSTER_ROUTER_H_
