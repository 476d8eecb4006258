// SPDX-License-Identifier: Apache-2.0
// MapWatcher: follows a cluster's slot map (NAME/map in etcd) for a server or a client.
//
// Start reads the map once (it must exist and decode). A thread then watches NAME/map from the
// next revision; every new value that decodes, with the first map's slot count and seed and a
// higher epoch, becomes the current map and is handed to `on_map` (on the watcher's thread, in
// epoch order). Anything else — a value that does not decode, changes the slot count or seed,
// or goes back in epoch, or the key deleted — is refused: counted in bad_maps(), logged once
// per value, and the last good map stays current (nothing is served from a map rkv cannot
// trust). While etcd cannot be reached the current map stays and the thread retries every
// 200 ms. Refresh() reads the map now (a client told MOVED does not wait for the watch).
// A replicated cluster's map is held under a lease (Confirmed(); common/cluster/map_lease.h).
// Thread safety: current(), epoch(), Refresh() and bad_maps() from any thread; on_map runs on
// one thread at a time. Ownership: borrows the EtcdClient (it outlives the watcher); owns its
// thread, which the destructor stops (within a watch's 1 s deadline).
#ifndef RKV_COMMON_CLUSTER_MAP_WATCHER_H_
#define RKV_COMMON_CLUSTER_MAP_WATCHER_H_

#include <atomic>
#include <condition_variable>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <thread>

#include "common/cluster/cluster_address.h"
#include "common/cluster/slot_map.h"
#include "common/etcd/etcd_client.h"
#include "common/mutex.h"
#include "rkv/status.h"

namespace rkv::cluster {

class MapWatcher {
 public:
  using OnMap = std::function<void(const SlotMap&)>;
  // Reads the map (kNotFound naming `cluster init` if absent; the decoder's error if it does not
  // decode) and starts the thread. on_map (may be empty) is called with the first map before
  // Start returns, on the caller's thread.
  // watch false: no thread; the map changes only by Refresh().
  [[nodiscard]] static Status Start(EtcdClient* etcd, const ClusterAddress& cluster, OnMap on_map,
                                    std::unique_ptr<MapWatcher>* out, bool watch = true);
  ~MapWatcher();
  MapWatcher(const MapWatcher&) = delete;
  MapWatcher& operator=(const MapWatcher&) = delete;

  std::shared_ptr<const SlotMap> current() const;
  uint64_t epoch() const { return epoch_.load(std::memory_order_acquire); }
  // Reads NAME/map now and adopts it if it is newer (as the watch would).
  [[nodiscard]] Status Refresh();
  // Whether a thread watches the map (Start's `watch`); if not, only Refresh changes it.
  bool watching() const { return thread_.joinable(); }
  uint64_t bad_maps() const { return bad_maps_.load(); }
  // Whether the current map was confirmed by an etcd read begun less than kMapLeaseMs ago
  // (common/cluster/map_lease.h). The watch thread of a replicated cluster's map confirms it
  // every third of the lease; Refresh confirms it too. Lock-free.
  bool Confirmed() const;

 private:
  MapWatcher(EtcdClient* etcd, std::string key, OnMap on_map)
      : etcd_(etcd), key_(std::move(key)), on_map_(std::move(on_map)) {}
  // Decodes and checks `value`; adopts it if newer. False if refused.
  bool Offer(const std::string& value, int64_t mod_revision);
  void Loop();
  static int64_t NowNs();

  EtcdClient* const etcd_;
  const std::string key_;
  const OnMap on_map_;
  std::atomic<uint64_t> epoch_{0};
  std::atomic<uint64_t> bad_maps_{0};
  std::atomic<int64_t> confirmed_ns_{0};  // steady ns when the last confirming read began
  mutable Mutex mu_;
  std::shared_ptr<const SlotMap> map_ GUARDED_BY(mu_);
  int64_t revision_ GUARDED_BY(mu_) = 0;       // mod revision of map_ in etcd
  bool last_refused_ GUARDED_BY(mu_) = false;  // the value at revision_ was refused
  std::mutex apply_mu_;                        // one on_map at a time, in epoch order
  std::mutex stop_mu_;
  std::condition_variable stop_cv_;
  bool stop_ = false;  // guarded by stop_mu_
  std::thread thread_;
};

}  // namespace rkv::cluster

#endif  // RKV_COMMON_CLUSTER_MAP_WATCHER_H_
