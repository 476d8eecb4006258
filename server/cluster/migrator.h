// SPDX-License-Identifier: Apache-2.0
// Migrator: the source side of moving slots to another server (docs/cluster.md, "Migration";
// the argument in docs/design.md, "Reads while slots move"). A thread follows NAME/migration;
// when a record in state COPY names this server as its source, it:
//  1. connects to the target as a client (proving the cluster's --auth_token_file, and checking
//     the target proves it back: a process without the token gets no data) and sends
//     MIGRATE_BEGIN (the target purges what it holds of the slots and marks them IMPORTING);
//  2. tracks the slots' writes (dirty keys), copies every entry of the slots (one table pass),
//     then ships the keys written meanwhile, in rounds, paced to --migration_rate bytes/s;
//     the copies are pipelined (up to the target's request credits in flight on the one
//     connection, applied there in the order sent) and every one is answered before the
//     dirty set is taken, before the pause and before the commit;
//  3. pauses the slots' writes (MOVING: TRY_AGAIN to clients) and waits for the admitted ones,
//     ships the last dirty keys (now exact), sets the words NOT_OWNED, waits a read grace
//     period;
//  4. commits the hand-over: one etcd transaction comparing the map's and the record's mod
//     revisions and the target's member record (the same process that received the copy: not
//     dead, not restarted) puts the map with the slots given to the target (epoch + 1) and the
//     record DONE. If the record changed meanwhile, the map says whether the commit happened
//     (its answer may have been lost): the slots' owner there decides.
//     Until it is known to have failed (the record changed: a new coordinator cancelled it),
//     it keeps trying with writes paused: nothing is lost, PUTs fail clearly with TRY_AGAIN.
//  5. purges its copy of the slots.
// An ADD_REPLICA record (re-replication: the target becomes one more backup of slots this server
// is the primary of) runs the same copy, but keeps the slots' writes paused (MOVING) through
// the commit, which adds the target as a backup in the map, and resumes them (OWNED) once this
// server applied that map, so every later write is replicated to the new backup; no purge.
// A REPLACE_BACKUP record runs the same, and its commit puts the target in the replaced
// backup's place. A HANDOVER record (migrator_roles.cc) copies nothing: it pauses the slots,
// then commits the target (already their backup) as primary and this server as its backup.
// Any failure before the commit resumes the slots (OWNED again: the map still names this
// server, since only this commit could change that) and marks the record FAILED.
// Thread safety: counters from any thread. Ownership: borrows everything it is given (the
// ClusterNode's etcd client, the server's table and ownership table outlive it); owns its
// thread, stopped by the destructor (within about a second, or when a copy step fails).
#ifndef RKV_SERVER_CLUSTER_MIGRATOR_H_
#define RKV_SERVER_CLUSTER_MIGRATOR_H_

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "common/cluster/cluster_address.h"
#include "common/cluster/migration_record.h"
#include "common/cluster/slot_map.h"
#include "common/etcd/etcd_client.h"
#include "rkv/client.h"
#include "server/cluster/ownership_table.h"
#include "server/store/table.h"

namespace rkv::cluster {

struct MigratorOptions {
  ClusterAddress cluster;
  uint32_t my_id = 0;
  Options client;             // for the connection to the target (auth token, timeouts)
  uint64_t rate_bytes_s = 0;  // copy pacing; 0: unpaced
  // The epoch of the map this server applied last (ClusterNode): an ADD_REPLICA batch resumes
  // its slots' writes only once the map naming the new backup is applied here.
  std::function<uint64_t()> applied_epoch;
  // A replicated server: whether a slot holds a kept write (Replicator::HasKept); an
  // ADD_REPLICA batch with such a slot fails (re-replication tries again later).
  std::function<bool(uint32_t)> has_kept;
  // A replicated server: resolves a slot's kept write now (Replicator::Settle); an
  // ADD_REPLICA batch calls it for each slot before it copies.
  std::function<bool(uint32_t)> settle_kept;
  // A replicated server: whether this table lacks a write its backups hold
  // (Replicator::LacksWrite); a HANDOVER batch with such a slot fails, and so does a copy to a
  // backup (ADD_REPLICA, REPLACE_BACKUP; checked after the pause).
  std::function<bool(uint32_t)> lacks_write;
  // The membership's lease: progress reports (NAME/progress) are put under it (null or 0: none).
  std::function<int64_t()> lease;
};

class Migrator {
 public:
  Migrator(EtcdClient* etcd, Table* table, OwnershipTable* owners, MigratorOptions o);
  ~Migrator();
  Migrator(const Migrator&) = delete;
  Migrator& operator=(const Migrator&) = delete;
  void Start();
  uint64_t batches_done() const { return done_.load(); }
  uint64_t batches_failed() const { return failed_.load(); }
  uint64_t keys_sent() const { return keys_sent_.load(); }

 private:
  void Loop();
  bool Stopping();
  void Pause(int ms);
  // Carries out one record; the record's final state is written before it returns.
  void Run(const MigrationRecord& rec, int64_t rec_revision);
  // Steps 1-3; false (with *why) when the copy failed before anything was handed over.
  bool Copy(const MigrationRecord& rec, const std::string& host, uint16_t port, std::string* why);
  // Step 4. kUnknown only when stopping before the outcome was learnt (the words stay
  // NOT_OWNED: nothing is served wrongly).
  enum class Outcome { kCommitted, kCancelled, kUnknown };
  Outcome Commit(const MigrationRecord& rec, int64_t rec_revision);
  // migrator_roles.cc: why the map does not allow the record's roles for slot ("" if it
  // does); the record's change to *map (false: the map no longer allows it); whether a map
  // read after the record changed shows the commit; a HANDOVER's pause and commit.
  std::string RolesRefused(const MigrationRecord& rec, const SlotMap& map, uint32_t slot) const;
  bool EditMap(const MigrationRecord& rec, SlotMap* map) const;
  Outcome OutcomeIn(const MigrationRecord& rec, const SlotMap& map) const;
  void Handover(const MigrationRecord& rec, int64_t rec_revision);
  // Before any word changed: resumes the slots' words (OWNED), then Fail.
  void Resume(const MigrationRecord& rec, int64_t rec_revision, const std::string& why);
  // Marks the record FAILED (if it is still ours) and counts it.
  void Fail(const MigrationRecord& rec, int64_t rec_revision, const std::string& why);
  // Deletes this server's entries of slots it handed over, in batches, each only while the
  // slot keeps its NOT_OWNED word (OwnershipTable::BeginReclaim).
  void Purge(const std::vector<uint32_t>& slots);
  // Takes a slot that was not handed over back (OWNED), only while the map this server applied
  // names it as the slot's primary (a failover may have taken the slot while the migration ran;
  // ClusterNode::Apply installs the routing before it changes words, and releases a slot being
  // handed over that it no longer gives this server, so checking again after the swap closes
  // the race).
  void ResumeSlot(uint32_t slot) {
    if (!StillPrimary(slot) || !owners_->Resume(slot)) return;
    // Undone only if the word is still the one just stored: a map change that stored another
    // meanwhile (a backup role, a newer epoch) keeps it.
    const uint64_t w = owners_->Word(slot);
    if (!StillPrimary(slot) && WordState(w) == SlotState::kOwned)
      (void)owners_->CompareAndSet(slot, w, OwnerWord(WordEpoch(w), SlotState::kNotOwned));
  }
  // Whether the map this server applied last still names it as the slot's primary.
  bool StillPrimary(uint32_t slot) const {
    uint64_t epoch = 0;
    uint32_t owner = 0;
    owners_->Route(slot, &epoch, &owner);
    return owner == o_.my_id;
  }
  std::string Key(const char* rest) const { return o_.cluster.Prefix() + rest; }

  EtcdClient* const etcd_;
  Table* const table_;
  OwnershipTable* const owners_;
  const MigratorOptions o_;
  std::atomic<uint64_t> done_{0}, failed_{0}, keys_sent_{0};
  uint64_t last_nonce_ = 0;  // the loop thread's
  // The target's member record's create revision when the copy began (the loop thread's).
  int64_t target_record_ = 0;
  uint64_t committed_epoch_ = 0;  // the epoch of the map our commit put (the loop thread's)
  std::mutex mu_;
  std::condition_variable cv_;
  bool stop_ = false;  // guarded by mu_
  std::thread thread_;
};

}  // namespace rkv::cluster

#endif  // RKV_SERVER_CLUSTER_MIGRATOR_H_
