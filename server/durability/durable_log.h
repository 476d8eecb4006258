// SPDX-License-Identifier: Apache-2.0
// DurableLog: kvserver's write-ahead log (the WriteLog the Table records every PUT and DELETE
// in), as a series of log files in the data directory with group commit (log_writer.h).
//
// Each record gets the next sequence number; a record is added to the current file's writer
// under mu_, so every file holds increasing sequence numbers and the files, in generation order,
// hold all of them in order. Rotate() switches to a new file (prepared, synced and entered in
// the directory before the switch, so the switch itself is a pointer swap under mu_) and returns
// the last sequence of the files before it: a snapshot that covers that sequence lets them go.
// Fsync modes (docs/design.md, "Durability"): kAlways: LogPut returns once the record is on
// stable storage; kEverySec: once written to the file, and a background thread syncs about once
// a second; kNo: once written (the OS syncs when it likes).
// Failures: a failed write or sync fails the records of its batch (the Table then changes
// nothing) and later records are tried again, so a full disk recovers by itself when space
// returns. Two failures make the log refuse every record until a restart, because the file
// may then hold what memory does not: a commit that did not finish within the commit timeout
// (its record may still reach the file), and a failed periodic sync under kEverySec (written
// pages may have been dropped; retrying the sync would report success falsely).
// Thread safety: every method may be called from any thread. Owns its files and the sync thread
// (joined by the destructor).
#ifndef RKV_SERVER_DURABILITY_DURABLE_LOG_H_
#define RKV_SERVER_DURABILITY_DURABLE_LOG_H_

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <memory>
#include <string>
#include <thread>

#include "common/mutex.h"
#include "server/durability/env.h"
#include "server/durability/log_writer.h"
#include "server/write_log.h"

namespace rkv::wal {

class DurableLog : public WriteLog {
 public:
  // Starts a new log file of generation `generation` in `dir`; the first record gets sequence
  // `next_sequence`.
  [[nodiscard]] static Status Open(Env* env, const std::string& dir, FsyncMode mode,
                                   uint64_t generation, uint64_t next_sequence,
                                   std::chrono::milliseconds commit_timeout,
                                   std::unique_ptr<DurableLog>* out);
  ~DurableLog() override;
  DurableLog(const DurableLog&) = delete;
  DurableLog& operator=(const DurableLog&) = delete;

  [[nodiscard]] Status LogPut(std::string_view key, std::string_view value) override;
  [[nodiscard]] Status LogDelete(std::string_view key) override;
  [[nodiscard]] Status Ready() const override { return broken(); }
  // --fsync=no|everysec, and the current file's writer Quick (no write in progress, the last
  // under kInlineWrite): Append then costs one write(2) to the page cache.
  bool WriteInline() const override;
  static constexpr std::chrono::microseconds kInlineWrite{1000};

  // Starts the next log file. *covered: the last sequence handed out before the switch; every
  // record up to it is in an older file, every later one in the new file or after.
  [[nodiscard]] Status Rotate(uint64_t* covered, uint64_t* new_generation);

  FsyncMode mode() const { return mode_; }
  uint64_t current_generation() const;
  uint64_t current_file_bytes() const;  // written to the current file (header included)
  uint64_t last_sequence() const;       // last sequence handed out
  uint64_t records() const { return records_.load(std::memory_order_relaxed); }
  uint64_t failures() const { return failures_.load(std::memory_order_relaxed); }
  uint64_t inline_checks_passed() const { return inline_ok_.load(std::memory_order_relaxed); }
  uint64_t syncs() const;    // fdatasync calls (all files)
  uint64_t batches() const;  // writes (all files): fewer than records under group commit
  // OK, or why the log refuses every record until a restart.
  Status broken() const;

 private:
  DurableLog(Env* env, std::string dir, FsyncMode mode, std::chrono::milliseconds commit_timeout);
  [[nodiscard]] Status Append(RecordType type, std::string_view key, std::string_view value);
  // Creates generation `g`'s file with its header, synced and entered in the directory.
  [[nodiscard]] Status NewFile(uint64_t g, std::shared_ptr<LogWriter>* out);
  void SyncLoop();

  Env* const env_;
  const std::string dir_;
  const FsyncMode mode_;
  const std::chrono::milliseconds commit_timeout_;
  mutable Mutex mu_;
  std::shared_ptr<LogWriter> writer_ GUARDED_BY(mu_);
  std::shared_ptr<LogWriter> previous_ GUARDED_BY(mu_);  // the file before the last Rotate
  uint64_t generation_ GUARDED_BY(mu_) = 0;
  uint64_t next_sequence_ GUARDED_BY(mu_) = 1;
  Status broken_ GUARDED_BY(mu_);
  uint64_t old_syncs_ GUARDED_BY(mu_) = 0;  // syncs and batches of older files
  uint64_t old_batches_ GUARDED_BY(mu_) = 0;
  Mutex rotate_mu_;  // one Rotate at a time (held while the next file is prepared)
  std::atomic<uint64_t> records_{0};
  std::atomic<uint64_t> failures_{0};
  mutable std::atomic<uint64_t> inline_ok_{0};  // WriteInline() answers of true
  // kEverySec's sync thread.
  std::mutex stop_mu_;
  std::condition_variable stop_cv_;
  bool stop_ = false;
  std::thread sync_thread_;
};

const char* FsyncModeName(FsyncMode mode);
// "always", "everysec" or "no" -> mode; false otherwise.
[[nodiscard]] bool ParseFsyncMode(std::string_view name, FsyncMode* mode);

}  // namespace rkv::wal

#endif  // RKV_SERVER_DURABILITY_DURABLE_LOG_H_
