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
// A client's watcher (Start's keep_confirmed) keeps it confirmed on demand: a thread of its own
// reads the map every third of the lease while Confirmed() was asked in the last
// kKeepConfirmedMs (a client doing GETs), and reads nothing while nobody asks (an idle or
// write-only client; a server, which never asks). Each etcd read is a linearizable read at
// the leader's quorum, so an idle client costs etcd only its watch.
// Thread safety: current(), epoch(), Refresh(), Confirmed() and the counters from any thread;
// on_map runs on one thread at a time. Ownership: borrows the EtcdClient (it outlives the
// watcher); owns its threads, which the destructor stops (a watch call in progress is
// interrupted within ~20 ms; a read in progress ends by its own deadline). A watch call lasts
// up to 1 s.
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
  // keep_confirmed (with watch): keep a leased map confirmed while Confirmed() is being asked
  // (a cluster client's GETs), from a thread of its own.
  [[nodiscard]] static Status Start(EtcdClient* etcd, const ClusterAddress& cluster, OnMap on_map,
                                    std::unique_ptr<MapWatcher>* out, bool watch = true,
                                    bool keep_confirmed = false);
  // How long after the last Confirmed() a keep_confirmed watcher goes on confirming.
  static constexpr int kKeepConfirmedMs = 3000;
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
  // (common/cluster/map_lease.h). Refresh confirms it, and so does a keep_confirmed watcher's
  // thread while this is being asked. Lock-free (a relaxed load and, at most every 50 ms, a
  // store; waking the confirming thread after an idle stretch takes a lock).
  bool Confirmed() const;
  // etcd requests made: reads of the map (Start, Refresh, confirmations) and watch calls.
  uint64_t reads() const { return reads_.load(std::memory_order_relaxed); }
  uint64_t watches() const { return watches_.load(std::memory_order_relaxed); }

 private:
  MapWatcher(EtcdClient* etcd, std::string key, OnMap on_map)
      : etcd_(etcd), key_(std::move(key)), on_map_(std::move(on_map)) {}
  // Decodes and checks `value`; adopts it if newer. False if refused.
  bool Offer(const std::string& value, int64_t mod_revision);
  void Loop();
  // A keep_confirmed watcher's second thread: Refresh every third of the lease while wanted.
  void ConfirmLoop();
  // Waits up to `ms` or until stopped (or, with `until_wanted`, until Confirmed() is asked).
  void Pause(int ms, bool until_wanted = false);
  bool Stopping();
  bool Wanted(int64_t now) const {
    return now - wanted_ns_.load(std::memory_order_relaxed) < int64_t(kKeepConfirmedMs) * 1000000;
  }
  static int64_t NowNs();

  EtcdClient* const etcd_;
  const std::string key_;
  const OnMap on_map_;
  std::atomic<uint64_t> epoch_{0};
  std::atomic<uint64_t> bad_maps_{0};
  std::atomic<int64_t> confirmed_ns_{0};  // steady ns when the last confirming read began
  bool keep_confirmed_ = false;           // set by Start before the threads begin
  mutable std::atomic<int64_t> wanted_ns_{INT64_MIN / 2};  // the last Confirmed() (50 ms steps)
  std::atomic<uint64_t> reads_{0};
  std::atomic<uint64_t> watches_{0};
  mutable Mutex mu_;
  std::shared_ptr<const SlotMap> map_ GUARDED_BY(mu_);
  int64_t revision_ GUARDED_BY(mu_) = 0;       // mod revision of map_ in etcd
  bool last_refused_ GUARDED_BY(mu_) = false;  // the value at revision_ was refused
  std::mutex apply_mu_;                        // one on_map at a time, in epoch order
  mutable std::mutex stop_mu_;                 // mutable: Confirmed() wakes the confirming thread
  mutable std::condition_variable stop_cv_;
  bool stop_ = false;  // guarded by stop_mu_
  std::thread thread_;
  std::thread confirmer_;  // keep_confirmed only
};

}  // namespace rkv::cluster

#endif  // RKV_COMMON_CLUSTER_MAP_WATCHER_H_
