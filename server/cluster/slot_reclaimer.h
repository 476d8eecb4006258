// SPDX-License-Identifier: Apache-2.0
// SlotReclaimer: frees the entries of slots this server no longer holds any replica of (a
// backup replaced by a rebalance or dropped by a failover, a primary failed over while it was
// alive), so that a rebalance onto new servers gives the old ones their memory back
// (docs/cluster.md, "Rebalancing replicated slots"). ClusterNode::Apply reports each slot it
// releases (Released: the NOT_OWNED word it stored); a thread, about a second later, scans the
// table once for the entries of every reported slot and deletes them, slot by slot, only while
// the slot's word is still the one reported. Nothing writes to a NOT_OWNED slot, so what is
// deleted is never a value any replica needs. While a batch of a slot's entries is deleted the
// slot is marked reclaiming (OwnershipTable::BeginReclaim): if a newer map makes it a BACKUP
// or OWNED meanwhile, its REPLICATEs and writes are refused (asked again) until the batch is
// done, so none lands between the word check and a delete; and the deletion counts as a write
// in flight, so a MIGRATE_BEGIN (IMPORTING, then it waits for the slot's writes in flight)
// purges and takes copies only after it. A word that left a NOT_OWNED value returns to it
// only through an abandoned import (server/cluster/import_sweeper.h), whose copy is no
// replica's either; a new role takes a newer map's epoch. So an unchanged word means a slot
// that holds no replica's data. Deletions go through the table as
// any delete (logged on a durable server: a restart does not bring them back). No lock of the
// map's is held: a slow disk delays only the reclaim. Deletes the table refused (a durable
// server's log failing: a full disk) are tried again, the slot reported anew kRetryMs later
// (doubled while they keep failing, up to kMaxRetryMs), as long as its word is unchanged.
// Thread safety: Released from any thread (Apply); ReclaimNow from one thread at a time (the
// reclaimer's own, or a test before Start). Ownership: borrows the table and the ownership
// table (the server's, which outlive it); owns its thread, stopped by the destructor (after
// the batch of deletes under way).
#ifndef RKV_SERVER_CLUSTER_SLOT_RECLAIMER_H_
#define RKV_SERVER_CLUSTER_SLOT_RECLAIMER_H_

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <map>
#include <mutex>
#include <thread>

#include "server/cluster/ownership_table.h"
#include "server/store/table.h"

namespace rkv::cluster {

class SlotReclaimer {
 public:
  SlotReclaimer(Table* table, OwnershipTable* owners);
  ~SlotReclaimer();
  SlotReclaimer(const SlotReclaimer&) = delete;
  SlotReclaimer& operator=(const SlotReclaimer&) = delete;
  void Start();
  // `slot` now holds `word` (NOT_OWNED): its entries are no replica's.
  void Released(uint32_t slot, uint64_t word);
  // Reclaims every slot reported so far; the number of entries deleted.
  size_t ReclaimNow();
  uint64_t reclaimed() const { return reclaimed_.load(); }
  static constexpr int kRetryMs = 5000;
  static constexpr int kMaxRetryMs = 60000;

 private:
  void Loop();
  bool Stopping();

  Table* const table_;
  OwnershipTable* const owners_;
  std::mutex mu_;
  std::condition_variable cv_;
  std::map<uint32_t, uint64_t> pending_;  // slot -> its released word; guarded by mu_ (bounded
                                          // by the slot count)
  // Slots whose deletes failed, reported again at retry_at_; guarded by mu_ (bounded by the
  // slot count).
  std::map<uint32_t, uint64_t> retry_;
  std::chrono::steady_clock::time_point retry_at_{};
  int retry_ms_ = kRetryMs;  // guarded by mu_
  bool stop_ = false;        // guarded by mu_
  std::atomic<uint64_t> reclaimed_{0};
  std::thread thread_;
};

}  // namespace rkv::cluster

#endif  // RKV_SERVER_CLUSTER_SLOT_RECLAIMER_H_
