// SPDX-License-Identifier: Apache-2.0
// LogWriter: appends write-ahead log records (log_record.h) to one file with group commit.
//
// Writers call Add (under whatever lock orders their writes; it only copies the record into the
// pending batch) and then Commit without locks. The first committer finds no write in progress,
// becomes the leader, writes the whole pending batch with one write and (FsyncMode::kAlways)
// one fdatasync, and wakes everybody whose record it covered: N concurrent PUTs share one sync.
// Modes, after Redis's appendfsync: kAlways (Commit returns once the record is on stable
// storage), kEverySec and kNo (Commit returns once the record is written to the file; the owner
// calls SyncWritten about once a second for kEverySec, never for kNo).
// Failures: a failed write or sync fails the Commit of every record in that batch (never
// acknowledged) and the file is cut back to the end of the last good batch, so the log never
// holds a half-written batch followed by later ones. The next Commit tries again: a full disk
// that gets space back recovers by itself. If the cut itself fails the writer stays failed
// (sticky error) because the file's tail is unknown.
// Thread safety: all methods are thread-safe. Owns the file.
// Invariants: tickets are 1, 2, 3... in Add order; the file holds exactly the records of the
// tickets that were written (failed batches are cut off); synced() <= written().
#ifndef RKV_SERVER_DURABILITY_LOG_WRITER_H_
#define RKV_SERVER_DURABILITY_LOG_WRITER_H_

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <memory>
#include <string>

#include "common/mutex.h"
#include "rkv/status.h"
#include "server/durability/env.h"
#include "server/durability/log_record.h"

namespace rkv::wal {

enum class FsyncMode { kAlways, kEverySec, kNo };

class LogWriter {
 public:
  // `file` is open for appending and `size` bytes long (header and records already there).
  LogWriter(std::unique_ptr<WritableFile> file, uint64_t size, FsyncMode mode);
  LogWriter(const LogWriter&) = delete;
  LogWriter& operator=(const LogWriter&) = delete;

  // Failed batches are remembered until every record in them has been told (each ticket is
  // committed once); past this many, the oldest is forgotten and its tickets' Commits say
  // "outcome unknown" (kTimeout), never OK. Only waiters that gave up (timed out) leave a batch
  // unread, and a timeout stops the log's writes (DurableLog), so this bound is a safety net.
  static constexpr size_t kMaxFailed = 1024;
  // A rotation's new writer starts with its predecessor's record of how long a batch took, so a
  // slow disk stays known across files.
  void InheritHistory(const LogWriter& old) {
    last_write_us_.store(old.last_write_us_.load(std::memory_order_relaxed),
                         std::memory_order_relaxed);
  }
  // Adds the record to the pending batch; *ticket identifies it for Commit.
  void Add(const LogRecord& record, uint64_t* ticket);
  // Returns once the record of `ticket` is written (and synced for kAlways), or the failure
  // that lost it. Waits at most `timeout` (kTimeout: outcome unknown).
  [[nodiscard]] Status Commit(uint64_t ticket,
                              std::chrono::milliseconds timeout = std::chrono::seconds(10));
  // Syncs what is written (kEverySec's periodic sync; a rotation's final sync). If another sync
  // is running, waits for it (at most 30 s) and then syncs what it may not have covered.
  [[nodiscard]] Status SyncWritten();

  // OK, or why the writer refuses everything for good (a failed batch could not be cut off).
  Status sticky() const;
  uint64_t written() const;  // bytes of good data in the file
  uint64_t synced() const;   // ... of which known to be on stable storage
  uint64_t batches() const;  // writes issued (group commit: fewer than records)
  uint64_t syncs() const;
  // True when no batch is being written or synced (SyncWritten: a write(2) may wait behind an
  // fdatasync of its file) and the last batch took less than `quick`: a caller that must not
  // block for long (a worker thread) may commit itself. Lock-free (relaxed atomics).
  bool Quick(std::chrono::microseconds quick) const {
    return writing_.load(std::memory_order_relaxed) == 0 &&
           last_write_us_.load(std::memory_order_relaxed) < quick.count();
  }

 private:
  struct Failed {
    uint64_t first, last;  // tickets of the batch
    uint64_t unread;       // its tickets whose Commit has not returned `why` yet
    Status why;
  };
  const std::unique_ptr<WritableFile> file_;
  const FsyncMode mode_;
  mutable Mutex mu_;
  std::condition_variable_any cv_;
  uint64_t added_ GUARDED_BY(mu_) = 0;   // last ticket handed out
  std::string pending_ GUARDED_BY(mu_);  // records of tickets pending_first_..added_
  uint64_t pending_first_ GUARDED_BY(mu_) = 1;
  uint64_t resolved_ GUARDED_BY(mu_) = 0;       // tickets <= this were written or failed
  uint64_t synced_ticket_ GUARDED_BY(mu_) = 0;  // tickets <= this are on stable storage
  uint64_t file_size_ GUARDED_BY(mu_);          // bytes of good data in the file
  uint64_t synced_size_ GUARDED_BY(mu_);
  std::deque<Failed> failed_ GUARDED_BY(mu_);  // failed batches not yet told to all (in order)
  // Tickets from forgotten_first_ to forgotten_last_ may be in a forgotten failed batch.
  uint64_t forgotten_first_ GUARDED_BY(mu_) = 0;
  uint64_t forgotten_last_ GUARDED_BY(mu_) = 0;
  Status sticky_ GUARDED_BY(mu_);  // the file's tail could not be repaired
  bool leader_ GUARDED_BY(mu_) = false;
  bool syncing_ GUARDED_BY(mu_) = false;
  uint64_t batches_ GUARDED_BY(mu_) = 0;
  uint64_t syncs_ GUARDED_BY(mu_) = 0;
  std::atomic<int> writing_{0};            // a leader is in Append/Sync, or SyncWritten in Sync
  std::atomic<int64_t> last_write_us_{0};  // how long the last batch's Append (+ Sync) took
};

}  // namespace rkv::wal

#endif  // RKV_SERVER_DURABILITY_LOG_WRITER_H_
