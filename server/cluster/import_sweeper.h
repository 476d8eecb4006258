// SPDX-License-Identifier: Apache-2.0
// ImportSweeper: gives back the slots of imports that will never complete. A MIGRATE_BEGIN
// marks slots IMPORTING here and the source's copy fills them; the map naming this server
// (the migration's commit) makes them OWNED or BACKUP. When the migration fails instead (its
// source died, a new coordinator cancelled it, the map changed under it) or a process with the
// cluster's token began an import and went away, nothing else ever touches those slots: their
// partial copies would hold memory for good and `cluster status` would show them importing.
// The sweeper, every `period`, looks at the slots that were IMPORTING with the same word and
// import ticket (OwnershipTable::ImportTicket) at its last pass too; for those it reads, from
// etcd, NAME/migration and then NAME/map (linearizable reads, in that order), and releases a
// slot (NOT_OWNED, its entries handed to the slot reclaimer, once the migration writes
// admitted before ended) when Abandoned says so: the record is not a copy to this server that
// names the slot, and the map (of this cluster's slot count and seed, no newer than the map
// this server applied) does not name this server as any replica of it. Why that is safe
// (docs/design.md, "Abandoned imports"): an import becomes live only through the commit of the
// record that began it, which compares that record's revision; a record that changed can no longer
// commit, and a later record that names the slot again begins with a new MIGRATE_BEGIN, hence a new
// ticket, and DropImport releases a slot only while the ticket and word it saw are still there
// (atomically with BeginImport). A committed import the map no longer names was moved or failed
// away since, as Apply would release it. Thread safety: SweepOnce from one thread at a time (the
// sweeper's own, or a test before Start). Ownership: borrows the etcd client, the ownership table
// and the reclaimer (the node's, which outlive it: the node destroys the sweeper first); owns its
// thread, stopped by the destructor.
#ifndef RKV_SERVER_CLUSTER_IMPORT_SWEEPER_H_
#define RKV_SERVER_CLUSTER_IMPORT_SWEEPER_H_

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <map>
#include <mutex>
#include <thread>
#include <utility>

#include "common/cluster/cluster_address.h"
#include "common/cluster/migration_record.h"
#include "common/cluster/slot_map.h"
#include "common/etcd/etcd_client.h"
#include "rkv/status.h"
#include "server/cluster/ownership_table.h"
#include "server/cluster/slot_reclaimer.h"

namespace rkv::cluster {

struct ImportSweeperOptions {
  EtcdClient* etcd = nullptr;
  ClusterAddress cluster;
  uint32_t my_id = 0;
  OwnershipTable* owners = nullptr;
  SlotReclaimer* reclaimer = nullptr;  // null: slots are released, their entries kept
  // The epoch of the map this server applied last: a slot is released only once it is at
  // least the epoch of the map read from etcd (an older map, applied after the release, could
  // otherwise give the slot a role again; null: not checked).
  std::function<uint64_t()> applied_epoch;
  // Runs `release` while no map is being applied (ClusterNode's words lock).
  std::function<void(const std::function<void()>& release)> under_map_lock =
      [](const std::function<void()>& release) { release(); };
  std::chrono::milliseconds period{5000};
};

class ImportSweeper {
 public:
  explicit ImportSweeper(ImportSweeperOptions o) : o_(std::move(o)) {}
  ~ImportSweeper();
  ImportSweeper(const ImportSweeper&) = delete;
  ImportSweeper& operator=(const ImportSweeper&) = delete;
  void Start();
  // One pass; *released: slots given back in it. An etcd failure changes nothing.
  [[nodiscard]] Status SweepOnce(size_t* released);
  uint64_t released() const { return released_.load(); }
  // The rule: `record` (null: none in etcd) and `map` (null: none) as read in that order.
  static bool Abandoned(uint32_t slot, uint32_t my_id, const MigrationRecord* record,
                        const SlotMap* map);

 private:
  void Loop();

  const ImportSweeperOptions o_;
  // slot -> (word, ticket) seen IMPORTING at the last pass; only the sweeper's thread
  // (bounded by the slot count).
  std::map<uint32_t, std::pair<uint64_t, uint64_t>> seen_;
  std::atomic<uint64_t> released_{0};
  std::mutex mu_;
  std::condition_variable cv_;
  bool stop_ = false;  // guarded by mu_
  std::thread thread_;
};

}  // namespace rkv::cluster

#endif  // RKV_SERVER_CLUSTER_IMPORT_SWEEPER_H_
