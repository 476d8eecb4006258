// SPDX-License-Identifier: Apache-2.0
// FailoverWatch: while it lives, every wait of one single-server connection (a GET's READ
// completions, a write's reply) gives up once the watched cluster map gives `slot` to a server
// other than `server` (a failover), instead of lasting rpc_timeout_ms. A stopped or cut-off
// primary sends neither a completion nor a disconnect; without this a client would sit out its
// whole rpc_timeout_ms after the cluster had long moved on (docs/cluster.md, "Clients").
// The wait ends as a lost connection does (Connection::SetAbandon: kConnectionLost, the
// connection broken): a read is then repeated at the new primary, a write is "outcome unknown".
// It never gives up before `after_ms` of waiting (counted from its first look, ~1024 empty
// polls into the wait), so an operation that had just started is not cut short by an
// unrelated map change. A client that does not watch the map (Options::watch_cluster_map off)
// re-reads it from etcd instead, kUnwatchedRefreshMs after the previous read ended, once the
// wait passed `after_ms` (it confirms its map that often anyway to read,
// common/cluster/map_lease.h); such a read (up to EtcdClient::kCallTimeoutMs) polls nothing
// while it lasts and may stretch the wait past its deadline by that much.
// Cost: none per operation beyond two pointer stores; while waiting, a clock read and an
// atomic load per look (Connection::Poll: every 1024 empty polls, every poll after
// kBusyPollMs); the map itself (the watcher's lock) only when its epoch moved since the last
// look. Constructing one allocates nothing.
// Thread safety: one thread (the connection's). Ownership: borrows the watcher and the
// connection, which must outlive it; the destructor clears the hook, so the hook never outlives
// this object however the call ends.
#ifndef RKV_CLIENT_FAILOVER_WATCH_H_
#define RKV_CLIENT_FAILOVER_WATCH_H_

#include <chrono>
#include <cstdint>
#include <functional>

#include "client/client_impl.h"
#include "common/cluster/map_watcher.h"

namespace rkv {

class FailoverWatch {
 public:
  static constexpr int kUnwatchedRefreshMs = 500;
  FailoverWatch(cluster::MapWatcher* watcher, ClientImpl* c, uint32_t slot, uint32_t server,
                uint64_t epoch, int after_ms);
  ~FailoverWatch() { c_->SetAbandon(nullptr); }
  FailoverWatch(const FailoverWatch&) = delete;
  FailoverWatch& operator=(const FailoverWatch&) = delete;
  // Whether a wait was given up (the map named another server for the slot).
  bool abandoned() const { return abandoned_; }

 private:
  bool Moved();

  cluster::MapWatcher* const watcher_;
  ClientImpl* const c_;
  const uint32_t slot_, server_;
  const std::chrono::milliseconds after_;
  uint64_t seen_epoch_;  // the watcher's epoch at the last look
  bool started_ = false;
  std::chrono::steady_clock::time_point since_{};  // the first look
  bool abandoned_ = false;
  std::chrono::steady_clock::time_point next_refresh_{};  // unwatched: the next etcd read
  const std::function<bool()> hook_;                      // [this]: held inline, no allocation
};

}  // namespace rkv

#endif  // RKV_CLIENT_FAILOVER_WATCH_H_
