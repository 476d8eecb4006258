// SPDX-License-Identifier: Apache-2.0
// SlotReclaimer: frees the entries of slots this server no longer holds any replica of (a
// backup replaced by a rebalance or dropped by a failover, a primary failed over while it was
// alive), so that a rebalance onto new servers gives the old ones their memory back
// (docs/cluster.md, "Rebalancing replicated slots"). ClusterNode::Apply reports each slot it
// releases (Released: the NOT_OWNED word it stored); a thread, about a second later, scans the
// table once for the entries of every reported slot and deletes them, slot by slot, only while
// the slot's word is still the one reported. Nothing writes to a NOT_OWNED slot, so what is
// deleted is never a value any replica needs. The races, and what closes them:
//  - the map makes the slot a BACKUP (or OWNED) again: Apply stores words under `words_mu`,
//    which the deletion of a slot's entries holds (and checks the word under);
//  - a MIGRATE_BEGIN imports the slot (IMPORTING, stored outside words_mu): the deletion counts
//    itself in flight on the slot before it checks the word (BeginIfWord), and MIGRATE_BEGIN
//    waits for the slot's writes in flight after storing IMPORTING, before it purges and
//    before any copy arrives; so either the word check fails or the import waits.
// A word does not return to the same NOT_OWNED value once it left it (a new role takes a newer
// map's epoch), so an unchanged word means an unchanged slot. Deletions are not logged (as a
// migration's purge): a durable server that restarts may find them again, and a later import
// of the slot purges them.
// Thread safety: Released from any thread (Apply, under words_mu); ReclaimNow from one thread at
// a time (the reclaimer's own, or a test before Start). Ownership: borrows the table, the
// ownership table and the lock (the ClusterNode's and the server's, which outlive it); owns its
// thread, stopped by the destructor.
#ifndef RKV_SERVER_CLUSTER_SLOT_RECLAIMER_H_
#define RKV_SERVER_CLUSTER_SLOT_RECLAIMER_H_

#include <atomic>
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
  SlotReclaimer(Table* table, OwnershipTable* owners, std::mutex* words_mu);
  ~SlotReclaimer();
  SlotReclaimer(const SlotReclaimer&) = delete;
  SlotReclaimer& operator=(const SlotReclaimer&) = delete;
  void Start();
  // `slot` now holds `word` (NOT_OWNED): its entries are no replica's.
  void Released(uint32_t slot, uint64_t word);
  // Reclaims every slot reported so far; the number of entries deleted.
  size_t ReclaimNow();
  uint64_t reclaimed() const { return reclaimed_.load(); }

 private:
  void Loop();
  static constexpr size_t kKeysPerHold = 1024;  // entries deleted per hold of words_mu

  Table* const table_;
  OwnershipTable* const owners_;
  std::mutex* const words_mu_;
  std::mutex mu_;
  std::condition_variable cv_;
  std::map<uint32_t, uint64_t> pending_;  // slot -> its released word; guarded by mu_ (bounded
                                          // by the slot count)
  bool stop_ = false;                     // guarded by mu_
  std::atomic<uint64_t> reclaimed_{0};
  std::thread thread_;
};

}  // namespace rkv::cluster

#endif  // RKV_SERVER_CLUSTER_SLOT_RECLAIMER_H_
