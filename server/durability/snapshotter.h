// SPDX-License-Identifier: Apache-2.0
// Snapshotter: takes snapshots of the table in the background so that the write-ahead log stays
// bounded, on request (kvctl snapshot) or when the current log file grows past a threshold.
//
// A snapshot (docs/design.md, "Durability"): rotate the log (records up to S are in older
// files, a pointer swap under the log's lock), scan the table bucket by bucket (each bucket
// copied under its stripe lock, so a PUT waits at most for one bucket's copy; GETs never wait),
// write every entry to snap-S.rkv.tmp, sync, rename, sync the directory, and only then delete the
// older log files and snapshots. The scan is fuzzy (it may see writes after S), which replay
// makes right: every write after S is in the newer logs and is replayed in order.
// A failed snapshot (full disk...) removes its temporary file, keeps every log, is counted and
// logged, and is retried on the next trigger.
// Thread safety: Request and the accessors from any thread. Owns its thread (joined by Stop or
// the destructor). The Table and the DurableLog must outlive it.
#ifndef RKV_SERVER_DURABILITY_SNAPSHOTTER_H_
#define RKV_SERVER_DURABILITY_SNAPSHOTTER_H_

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <mutex>
#include <string>
#include <thread>

#include "server/durability/durable_log.h"
#include "server/durability/env.h"
#include "server/store/table.h"

namespace rkv::wal {

class Snapshotter {
 public:
  // auto_log_bytes: take one when the current log file is larger (0: only on request).
  Snapshotter(Env* env, std::string dir, DurableLog* log, Table* table, uint64_t auto_log_bytes);
  ~Snapshotter();
  Snapshotter(const Snapshotter&) = delete;
  Snapshotter& operator=(const Snapshotter&) = delete;

  void Start();
  void Stop();
  // Asks for a snapshot; returns at once. *message says whether one was started or is running.
  void Request(std::string* message);

  // Snapshots written whose covered logs are removed too (counted after the removal).
  uint64_t taken() const { return taken_.load(std::memory_order_relaxed); }
  uint64_t failed() const { return failed_.load(std::memory_order_relaxed); }
  bool running() const { return running_.load(std::memory_order_relaxed); }
  uint64_t last_entries() const { return last_entries_.load(std::memory_order_relaxed); }
  uint64_t last_bytes() const { return last_bytes_.load(std::memory_order_relaxed); }
  uint64_t last_ms() const { return last_ms_.load(std::memory_order_relaxed); }

  // One snapshot, on the calling thread (the loop's work; also for tests).
  [[nodiscard]] Status TakeOne();

 private:
  void Loop();
  // Deletes log files older than `generation` and every snapshot but `covered`'s.
  void RemoveObsolete(uint64_t generation, uint64_t covered);

  Env* const env_;
  const std::string dir_;
  DurableLog* const log_;
  Table* const table_;
  const uint64_t auto_log_bytes_;
  std::mutex mu_;
  std::condition_variable cv_;
  bool requested_ = false;  // guarded by mu_
  bool stop_ = false;       // guarded by mu_
  std::thread thread_;
  std::atomic<bool> running_{false};
  std::atomic<uint64_t> taken_{0}, failed_{0}, last_entries_{0}, last_bytes_{0}, last_ms_{0};
};

}  // namespace rkv::wal

#endif  // RKV_SERVER_DURABILITY_SNAPSHOTTER_H_
