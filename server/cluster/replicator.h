// SPDX-License-Identifier: Apache-2.0
// Replicator: the primary's side of synchronous replication (docs/cluster.md, "Replication";
// the argument in docs/design.md, "Replicas and failover"). Every client write to a slot this
// server is the primary of goes through Write: under the slot's lock it takes the slot's next
// sequence number, sends the write (REPLICATE: epoch, sequence, this server's id, key, value)
// to every backup the applied map names for the slot (to all of them at once: each message is
// posted before any reply is awaited), waits until each has applied it, and only
// then applies it to this server's table (the caller's `apply`) and lets the reply go. So a
// value a client can read here, or was told was written, is on every backup of the map.
//
// Only the slot's primary in the applied map (and by its word) replicates; it checks again
// after every retry and before applying. A backup that does not answer is asked again (a fresh
// connection) until it does, the map no longer names it (the coordinator drops a dead backup,
// and one this server reported unreachable: SetSuspects; the write then goes on without it),
// this server is no longer the slot's primary, the backup
// refuses for good (BAD_REQUEST, TOO_LARGE, INVALID_ARGUMENT, TABLE_FULL), or `max_wait_ms` passed
// since the write arrived (waiting for the slot's lock included). The two failures:
//   kUnavailable: nothing was sent (no backup can hold the write): the write was not applied;
//   kTimeout ("outcome unknown"): a backup may hold it (it may survive a failover); its
//   sequence number is then used up, never given to another write, and the write is kept: the
//   slot's next write first resends it (same number and digest: a backup that has it answers it
//   as a resend) and applies it here, so no backup stays a number behind (else its gap refusal
//   would block the slot for good); until the resend reached every backup the slot's writes
//   fail UNAVAILABLE. A write the backups applied but this server's table refused is kept the
//   same way (TIMEOUT). Once resent, a kept write this table still refuses (no room for its
//   value) stays kept without holding the slot's writes up (writes to other keys commute with
//   it; it is not resent again: later numbers follow it on the backups), and the next write of
//   its key supersedes it (not applied here: the new write replaces it on every replica), so it
//   never blocks a DELETE that would make room. At most one write
//   per slot is kept (a newer one replaces an older one that only this table lacked); kept()
//   counts them: bounded by the slots this server is primary of, each by the largest entry.
//   A kept write is dropped when the slot's stint as primary here ended (a newer word epoch):
//   the next primary's data settled it. Re-replication resolves a slot's kept write before it
//   copies the slot (Settle), so one left in a slot nobody writes again cannot block it.
//   A backup's refusal that says it did not apply the write (TABLE_FULL, TOO_LARGE,
//   BAD_REQUEST), met before any attempt whose fate is unknown, leaves nothing on any backup:
//   the write fails with that code (TABLE_FULL, as a single server would answer) and its number
//   goes to the next write.
// Each message carries a digest of its kind, key and value: a backup answers a repeat of its
// last number as a repeat only if the digest matches.
// Connections to backups prove the cluster's token (--auth_token_file) as clients do; at most
// kMaxLinks per backup, each used by one write at a time.
// Thread safety: every method from any thread; writes to one slot are serialised (the slot's
// lock), writes to different slots run in parallel. Ownership: borrows the OwnershipTable (the
// server's, outliving this); owns its connections. Destroy only after the write pool stopped.
#ifndef RKV_SERVER_CLUSTER_REPLICATOR_H_
#define RKV_SERVER_CLUSTER_REPLICATOR_H_

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <vector>

#include "common/cluster/slot_map.h"
#include "rkv/client.h"
#include "rkv/status.h"
#include "server/cluster/ownership_table.h"
#include "server/cluster/suspect_reporter.h"
#include "server/store/table.h"

namespace rkv {
class ClientImpl;
}

namespace rkv::cluster {

struct ReplicatorOptions {
  Options client;  // for connections to backups (auth token, timeouts)
  int max_wait_ms = 10000;
};

class Replicator {
 public:
  static constexpr size_t kMaxLinks = 16;
  // `table`: the server's (an earlier write of unknown outcome is applied to it when resent).
  Replicator(OwnershipTable* owners, Table* table, ReplicatorOptions o);
  ~Replicator();
  Replicator(const Replicator&) = delete;
  Replicator& operator=(const Replicator&) = delete;

  // Where attempts that failed in transport, and replies, are told (server/cluster/
  // suspect_reporter.h; null: nowhere). It must outlive every Write that may see it: the node
  // sets null before destroying it, after the write pools stopped.
  void SetSuspects(SuspectReporter* s) { suspects_.store(s); }
  // This server's id (known once it joined; before, it is primary of nothing).
  void SetId(uint32_t id) { my_id_.store(id); }
  // The map this server applied (ClusterNode::Apply calls it before the words change).
  void SetMap(const SlotMap& map);
  // Whether writes to the slot have backups to go to in the applied map.
  bool HasBackups(uint32_t slot) const;
  // See the header comment. `apply` runs under the slot's lock after every backup applied.
  [[nodiscard]] Status Write(uint32_t slot, bool put, std::string_view key, std::string_view value,
                             const std::function<Status()>& apply);

  uint64_t writes() const { return writes_.load(); }
  uint64_t retries() const { return retries_.load(); }
  uint64_t failures() const { return failures_.load(); }
  // Whether the slot holds a kept write (true also when its lock is not had within 100 ms).
  // Re-replication refuses to copy such a slot: a kept write already delivered is not resent,
  // so a backup added from this table (which lacks it) would never get it.
  bool HasKept(uint32_t slot);
  // Resolves the slot's kept write now, as its next write would first (resent to the backups
  // it has not reached, then applied here), without a new write: re-replication calls it
  // before it copies a slot (a kept write blocks the copy, and a slot that nobody writes again
  // would keep it for good). Admitted through the ownership table's write gate as a client's
  // write is. A kept write every backup holds that this table still has no room for, and the
  // keys LacksWrite remembers, are then reverted where that cannot leave a revert half done
  // (Revert, Revertible: the backups get this table's value of the key), so a full primary
  // blocks neither a copy nor a hand-over. True when the slot holds no kept write after it
  // (lacking keys left, if any, block only a hand-over: LacksWrite); false also when the slot's
  // lock stays busy for 100 ms, the word is not OWNED, or a resend or revert of the kept write
  // did not reach every backup (replicator_kept.cc). Cheap when no slot holds a kept write or
  // lacking keys (two atomic loads; lacking keys of an older stint count until a Settle of
  // their slot drops them).
  bool Settle(uint32_t slot);
  // Whether this table lacks a write every backup holds: a kept write, delivered, that this
  // table had no room for, dropped when a newer write of another key was kept (at most one is
  // kept per slot), in this stint as primary, and not written again or reverted since. A
  // HANDOVER refuses such a slot (the backup would make visible a value this server never
  // served, and lose it again if this server were promoted back) unless Settle reverted it
  // first; so does a copy to a new backup (a failover keeps backups, and one copied with this
  // table's older value would differ from the others by a key no last-write record names:
  // Resync). True also when the slot's lock is not had within 100 ms (replicator_kept.cc).
  bool LacksWrite(uint32_t slot);
  // Slots holding a kept write now (at most one each: bounded by the slots this server is the
  // primary of, each by the largest entry).
  uint64_t kept() const { return kept_.load(); }
  // Writes Settle replaced on the backups by this table's value (Revert).
  uint64_t reverts() const { return reverts_.load(); }
  // A promoted primary's resync of the backups a failover kept (replicator_resync.cc; the
  // argument in docs/design.md, "Replicas and failover"). Such backups may differ from this
  // table, and from each other, by the former primary's last write to the slot only (it sent
  // a write's successor only after every backup applied it): one reached some replicas and not
  // others. Under the slot's lock, while the word is PROMOTING at the applied map's epoch and
  // this server is the slot's primary there: asks each backup of that map for the last write
  // it applied to the slot (wire::kReplicateQuery; answered only once the backup applied a map
  // naming this server, after which it refuses the former primary), and unless every answer
  // names this server's own last write (OwnershipTable::LastWrite), writes this table's value
  // of each key named (its own last one and theirs) to every backup as writes of this stint.
  // Then every replica of the slot holds what this table holds. OK also when the slot has no
  // backup; an error (UNAVAILABLE, TIMEOUT, a refusal) leaves the slot PROMOTING for the caller
  // to try again (a backup that stays unreachable is reported by the SuspectReporter and
  // dropped by the coordinator, after which the resync has nothing to do). `unreachable` (may
  // be null): backups that failed in transport in this round; a slot with one of them is not
  // tried (fails at once), and one that fails so is added (a round over many slots then costs
  // one timeout per unreachable backup).
  // `expected`: the slot's word the caller promotes (PROMOTING at its epoch); any other word
  // fails at once. A slot's resync whose attempts have all ended for kResyncGiveUpMs in a
  // lasting refusal (BAD_REQUEST, TOO_LARGE, INVALID_ARGUMENT, TABLE_FULL) reports the backup
  // that refused (SuspectReporter::Diverged), for the coordinator to drop.
  // The keys an attempt named are written again by the next until one succeeds whole.
  [[nodiscard]] Status Resync(uint32_t slot, uint64_t expected,
                              std::vector<uint32_t>* unreachable = nullptr);
  static constexpr int kResyncGiveUpMs = 3000;
  uint64_t resyncs() const { return resyncs_.load(); }              // slots resynced
  uint64_t resync_writes() const { return resync_writes_.load(); }  // keys written by them

  struct Backup {
    uint32_t id = 0;
    std::string host;
    uint16_t port = 0;
  };
  // The slot in the applied map: its epoch, primary id (0: none) and backups (not this server).
  struct Snapshot {
    uint64_t epoch = 0;
    uint32_t primary = 0;
    std::vector<Backup> backups;
  };
  using SteadyClock = std::chrono::steady_clock;
  static constexpr size_t kMaxBackups = kMaxReplicas - 1;

  // The fast path (replicator_fast.cc; server/conn/replica_fast_path.h): a server worker that
  // received a client's write sends it to the backups over links of its own and completes it
  // when their replies are in, with no thread hand-off. The same write as Write's, in three
  // steps: BeginFast takes the slot's lock (without waiting), the write's number and its
  // message; the caller posts fw.msg (and fw.value for a PUT) to every backup of fw.snap, once
  // each, and ends with EndFast (every first attempt's outcome: what Write's first attempt
  // would have seen) or, when it posted nothing, AbortFast. EndFast does the rest exactly as
  // Write: backups that did not apply it are asked again alone (on this replicator's own
  // links: it may then wait, up to the write's deadline; with every outcome OK it does not),
  // then the local apply, the keeping of a write of unknown outcome, the lock given back.
  // Between BeginFast and EndFast/AbortFast/FailFast the FastWrite owns the slot's lock: the
  // caller must end it (from any thread) however its posts and waits go.
  struct FastWrite {
    uint32_t slot = 0;
    bool put = false;
    uint64_t seq = 0;
    std::string key, value;  // copies: the request's bytes are the worker's
    std::string msg;         // the REPLICATE key: header + key
    Snapshot snap;           // the backups to post to, in order
    SteadyClock::time_point started, deadline;
    bool locked = false;
  };
  // False (nothing held): not now: the slot's lock is busy, it holds a kept write to resolve
  // first, it has no backup, or this server is not its primary; use Write.
  [[nodiscard]] bool BeginFast(uint32_t slot, bool put, std::string_view key,
                               std::string_view value, FastWrite* fw);
  // `status[i]`, `maybe_sent[i]`: the first attempt at fw->snap.backups[i] (a post that
  // failed before anything left: not maybe_sent).
  [[nodiscard]] Status EndFast(FastWrite* fw, const Status* status, const bool* maybe_sent,
                               const std::function<Status()>& apply);
  void AbortFast(FastWrite* fw);  // nothing was posted: the lock back, the number unused
  // The server is stopping with the write posted and not ended (`status`, `maybe_sent` as for
  // EndFast; a reply still due: not OK, maybe sent): if a backup may hold it, its number is
  // used up and it is kept as a write of unknown outcome (not applied here, not retried), else
  // the number stays unused; the lock back.
  void FailFast(FastWrite* fw, const Status* status, const bool* maybe_sent);
  // The fast path's map-change hook (as SendOnce's Attempt::Dropped): whether the applied map
  // moved past *seen_epoch (then updated) and no longer wants `backup`'s ack for the write (it
  // dropped the backup, or this server as primary). False without looking while the epoch did
  // not move: a relaxed load, no lock. Any thread.
  [[nodiscard]] bool FastDropped(const FastWrite& fw, uint32_t backup, uint64_t* seen_epoch) const;
  // Fast writes whose first attempt did not succeed at every backup (ended by the helper).
  uint64_t fast_continued() const { return fast_continued_.load(); }
  uint64_t fast_writes() const { return fast_writes_.load(); }
  // The options of connections to backups (auth token, timeouts, local address).
  const Options& link_options() const { return o_.client; }

 private:
  struct Link {
    std::unique_ptr<ClientImpl> client;
    bool busy = false;
  };
  Snapshot SnapshotOf(uint32_t slot) const;
  // Whether this server is the slot's primary in `snap` and its word says so.
  bool Primary(uint32_t slot, const Snapshot& snap) const;
  // One attempt to have `b` apply the message; *maybe_sent: it may have reached the backup.
  // Its waits for the connect and the reply end early (the link broken, kConnectionLost) once
  // the applied map moved past `epoch` (the one the caller's snapshot was taken at) and no
  // longer names `b` as a backup of `slot` or this server as its primary: a cut-off backup
  // sends neither a reply nor a disconnect, and SendAll goes on without a backup the map
  // dropped.
  // *reply (may be null): the backup's answer's payload.
  Status SendOnce(uint32_t slot, uint64_t epoch, const Backup& b, const std::string& key,
                  std::string_view value, SteadyClock::time_point deadline, bool* maybe_sent,
                  std::string* reply = nullptr);
  // SendOnce in two halves, so that one write is in flight to every backup at once: Begin
  // takes a link (connecting if needed) and posts the message; End waits for its reply and
  // gives the link back. (A thread then holds one link per backup at once; with more write
  // threads than kMaxLinks, Acquire's deadline ends a wait for a link that another such
  // thread holds.) A Begin that failed needs no End. An Attempt is not moved while
  // begun (the link's client holds a pointer to its hook).
  struct Attempt {
    const Replicator* r = nullptr;
    uint32_t slot = 0, backup = 0;
    uint64_t epoch = 0;  // the map epoch last looked at
    uint64_t rid = 0;
    Link* link = nullptr;
    bool maybe_sent = false;  // the message may have reached the backup
    // Whether the applied map dropped the backup (or this server as primary) since `epoch`.
    bool Dropped();
    const std::function<bool()> hook{[this] { return Dropped(); }};  // one pointer: inline
    Attempt() = default;
    Attempt(const Attempt&) = delete;
    Attempt& operator=(const Attempt&) = delete;
  };
  Status Begin(uint32_t slot, uint64_t epoch, const Backup& b, const std::string& key,
               std::string_view value, SteadyClock::time_point deadline, Attempt* a);
  Status End(const Backup& b, Attempt* a, std::string* reply = nullptr);
  // A backup's refusal that asking again cannot change (BAD_REQUEST, TOO_LARGE,
  // INVALID_ARGUMENT, TABLE_FULL).
  static bool Permanent(Code c);
  // A refusal that says the backup did not apply the message (TABLE_FULL, TOO_LARGE,
  // BAD_REQUEST): its sequence did not move.
  static bool NotApplied(Code c);
  // Resync's question to one backup: its last write to the slot (*has false: none named).
  Status AskLastWrite(uint32_t slot, const Snapshot& snap, const Backup& b,
                      SteadyClock::time_point deadline, bool* has, uint64_t* digest,
                      std::string* key);
  // Tells the SuspectReporter how an attempt to `b` went (transport failures at a backup the
  // map still wants; an answer, even a refusal, as reached).
  void TellSuspects(uint32_t slot, const Backup& b, const Status& s,
                    SteadyClock::time_point started);
  // SendAll's second half: every backup whose first attempt did not apply the write is asked
  // again alone until it does, the map drops it, a refusal is final or the deadline passes.
  Status Retry(uint32_t slot, const Snapshot& snap, std::string* msg, std::string_view value,
               SteadyClock::time_point deadline, const Status* first_status,
               const bool* first_maybe, SteadyClock::time_point first_started, bool* sent_any,
               std::string* why);
  // A write's REPLICATE key (header + key) at `epoch` with number `seq`.
  std::string Message(uint64_t epoch, uint64_t seq, bool put, std::string_view key,
                      std::string_view value) const;
  // Write's end once the backups were tried (`r`: SendAll's or Retry's outcome): the number
  // used or not, the local apply, a write of unknown outcome kept. Under the slot's lock.
  Status AfterSend(uint32_t slot, bool put, std::string_view key, std::string_view value,
                   const std::function<Status()>& apply, uint64_t seq, const std::string& msg,
                   const Status& r, bool sent_any, const std::string& why, bool superseded);
  // Write's body, under the slot's lock (held by the caller), with the write's deadline.
  Status WriteLocked(uint32_t slot, bool put, std::string_view key, std::string_view value,
                     const std::function<Status()>& apply, SteadyClock::time_point deadline);
  // Under the slot's lock (replicator_kept.cc): replaces `key` on every backup with this
  // table's value of it (a PUT of the value, or a DELETE when absent), as a write of its own
  // with the next sequence number, applied here as a no-op. A delivered kept write of `key`
  // that this table has no room for is superseded by it and dropped, and `key` leaves the
  // slot's lacking keys: every replica then holds what this table holds. Safe because such a
  // write's value was never visible: its client was told "outcome unknown", GETs read only
  // the primary, and this table never held it (a failover in between ended the stint, and
  // with it the kept write).
  Status Revert(uint32_t slot, const std::string& key, SteadyClock::time_point deadline);
  // Whether reverting `key` cannot leave a revert kept (on some backups only, holding the
  // slot's writes up): the slot has one backup (a refusal leaves nothing anywhere), or the
  // revert is a DELETE (this table lacks the key: no backup refuses it for room). A PUT revert
  // to several backups is not tried: the slot stays as before (not copied, not handed over).
  bool Revertible(uint32_t slot, const Snapshot& snap, const std::string& key) const;
  // Under the slot's lock: forgets lacking keys of an older stint as primary.
  void DropStaleLacking(uint32_t slot, uint64_t tenure);
  // Whether the applied map still wants `backup`'s ack for `slot` (this server its primary,
  // `backup` one of its backups).
  bool StillWanted(uint32_t slot, uint32_t backup) const;
  // Whether the applied map moved past *seen_epoch (then updated) and no longer wants
  // `backup`'s ack for `slot` (Attempt::Dropped, FastDropped); no lock while it did not move.
  bool DroppedSince(uint32_t slot, uint32_t backup, uint64_t* seen_epoch) const;
  // Under the slot's lock (replicator_kept.cc): drops a kept write of an older stint as
  // primary, then resends the slot's kept write to every backup of `snap` it has not reached
  // and applies it here, unless it is of `key` (*superseded: the caller's write of that key
  // replaces it). UNAVAILABLE (counted) when the resend did not reach every backup.
  Status ResolveKept(uint32_t slot, const Snapshot& snap, std::string_view key,
                     SteadyClock::time_point deadline, bool* superseded);
  void DropKept(uint32_t slot);  // under the slot's lock
  // Whether `backup` is one of snap's backups.
  static bool Listed(const Snapshot& snap, uint32_t backup);
  // Has every backup of `snap` apply the message (its header's epoch set to snap's), asking
  // again as the header comment says; the error and *why when one did not.
  Status SendAll(uint32_t slot, const Snapshot& snap, std::string* msg, std::string_view value,
                 SteadyClock::time_point deadline, bool* sent_any, std::string* why);
  Link* Acquire(const Backup& b, SteadyClock::time_point deadline);
  void Release(uint32_t id, Link* link, bool broken);

  OwnershipTable* const owners_;
  Table* const table_;
  const ReplicatorOptions o_;
  std::atomic<uint32_t> my_id_{0};
  std::atomic<SuspectReporter*> suspects_{nullptr};
  // A lock taken with a deadline: a mutex, a flag and a condition variable (std::timed_mutex's
  // timed lock is pthread_mutex_clocklock, which ThreadSanitizer does not see: it then reports
  // every unlock). What std::unique_lock needs of it here: try_lock_until and unlock.
  class SlotLock {
   public:
    // Fails while another thread waits (try_lock_until): a worker's fast path that frees
    // the lock and at once begins the next write of its slot must not starve the writes that
    // went to the pool and wait for it.
    bool try_lock() {
      std::lock_guard<std::mutex> l(mu_);
      if (held_ || waiters_ > 0) return false;
      held_ = true;
      return true;
    }
    bool try_lock_until(SteadyClock::time_point deadline) {
      std::unique_lock<std::mutex> l(mu_);
      ++waiters_;
      const bool got = cv_.wait_until(l, deadline, [this] { return !held_; });
      --waiters_;
      if (!got) return false;
      held_ = true;
      return true;
    }
    void unlock() {
      {
        std::lock_guard<std::mutex> l(mu_);
        held_ = false;
      }
      cv_.notify_one();
    }

   private:
    std::mutex mu_;
    std::condition_variable cv_;
    bool held_ = false;  // guarded by mu_
    int waiters_ = 0;    // guarded by mu_
  };
  std::unique_ptr<SlotLock[]> slot_mu_;  // one per slot: its writes in sequence order
  // A slot's last write of unknown outcome (it may be on some backup), resent before the
  // slot's next write; at most one per slot, guarded by the slot's lock.
  struct Pending {
    bool put;
    uint64_t tenure;              // the slot word's epoch when kept: this stint as primary
    std::string key, value, msg;  // msg: the REPLICATE key (header + key)
    // On every backup of the map it was resent under: only the local apply is left (a backup
    // added later by re-replication copies this table, which lacks it: unknown outcome).
    bool delivered = false;
  };
  std::unique_ptr<std::unique_ptr<Pending>[]> pending_;
  // The keys of the delivered kept writes this table lacks (LacksWrite), per slot, guarded by
  // the slot's lock; at most kMaxLacking keys, then `overflow` until the stint ends.
  struct Lacking {
    uint64_t tenure = 0;
    std::vector<std::string> keys;
    bool overflow = false;
  };
  static constexpr size_t kMaxLacking = 16;
  std::unique_ptr<std::unique_ptr<Lacking>[]> lacking_;
  void NoteLacking(uint32_t slot, std::string_view key);   // under the slot's lock
  void ClearLacking(uint32_t slot, std::string_view key);  // under the slot's lock
  mutable std::mutex map_mu_;
  std::shared_ptr<const SlotMap> map_;  // guarded by map_mu_
  std::atomic<uint64_t> map_epoch_{0};  // map_'s epoch (read without the lock)
  std::mutex links_mu_;
  std::condition_variable links_cv_;
  std::map<uint32_t, std::vector<std::unique_ptr<Link>>> links_;  // guarded by links_mu_
  std::atomic<uint64_t> writes_{0}, retries_{0}, failures_{0}, kept_{0}, reverts_{0};
  std::atomic<uint64_t> resyncs_{0}, resync_writes_{0}, fast_writes_{0}, fast_continued_{0};
  // A slot's resync under way (guarded by the slot's lock): the promotion's epoch, the keys
  // named so far, when its first attempt began.
  struct ResyncState {
    uint64_t tenure = 0;
    std::vector<std::string> keys;
    // Since when its attempts have all ended in a lasting refusal (epoch: none now).
    SteadyClock::time_point refused_since{};
  };
  std::unique_ptr<std::unique_ptr<ResyncState>[]> resync_;
  // The backup whose lasting refusal ended the slot's last SendAll (0: none), guarded by the
  // slot's lock (Resync reports it).
  std::unique_ptr<uint32_t[]> refused_by_;
  // Set (under the slot's lock) while Resync writes a PROMOTING slot: Primary then admits the
  // PROMOTING word. Only the lock holder's calls see it set.
  std::unique_ptr<std::atomic<uint8_t>[]> resyncing_;
  std::atomic<uint64_t> lacking_slots_{0};  // slots with a Lacking entry (any tenure)
};

}  // namespace rkv::cluster

#endif  // RKV_SERVER_CLUSTER_REPLICATOR_H_
