// SPDX-License-Identifier: Apache-2.0
// Recovery: rebuilds the table from a data directory at start-up, before kvserver serves.
//
// Order (docs/design.md, "Durability"): remove leftover temporaries; load the newest snapshot
// (it covers the log records up to its sequence S); replay, in generation order, every log
// record with a sequence above S (PUT, or DELETE whose key may already be gone); then the
// caller opens a new log file of generation NextGeneration() and continues sequences from
// NextSequence().
// Defects: a torn record at the end of a log file (a crash during an append; never
// acknowledged) is cut off with a warning naming the file, offset and bytes dropped. Any other
// defect (a bad checksum or impossible field in the middle of a log, any defect in a snapshot,
// sequences that do not increase) refuses recovery with an error naming the file and the
// offset, unless `truncate_corruption` (kvserver --recover=truncate): then what precedes the
// defect is kept, the damaged log is cut there, later log files are renamed *.discarded, and
// the warnings say what was dropped. Damage in a log the snapshot wholly covers (a later log
// starts at or before S+1: a crash after a snapshot's rename, before old logs were removed) loses
// nothing: that file is renamed *.discarded with a warning, in either mode.
// Log files are read through Env::OpenReadOnly (mapped by the POSIX Env).
// Thread safety: single-threaded (runs before any other thread touches the table).
#ifndef RKV_SERVER_DURABILITY_RECOVERY_H_
#define RKV_SERVER_DURABILITY_RECOVERY_H_

#include <cstdint>
#include <string>
#include <vector>

#include "rkv/status.h"
#include "server/durability/env.h"
#include "server/store/table.h"

namespace rkv::wal {

struct RecoveryReport {
  std::string snapshot;  // file name, empty if none
  uint64_t snapshot_entries = 0;
  uint64_t covered = 0;  // the snapshot's sequence
  uint64_t log_files = 0;
  uint64_t log_records = 0;  // replayed (above `covered`)
  uint64_t log_skipped = 0;  // at or below `covered`: already in the snapshot
  uint64_t bytes_read = 0;
  uint64_t next_sequence = 1;
  uint64_t next_generation = 1;
  double seconds = 0;
  std::vector<std::string> warnings;
  // One line for the start-up log.
  std::string Summary() const;
};

// The table's hash seed, kept in DIR/SEED so that a restarted server places every key in the
// buckets it had (with another seed, keys that fit before may not fit). On the first start
// `proposed` is written there (32 bytes: "RKVSEED1", u32 version 1, u32 0, u64 seed, u64 XXH3 of
// the first 24 bytes; synced, renamed into place, directory synced); later starts read it.
[[nodiscard]] Status LoadOrCreateSeed(Env* env, const std::string& dir, uint64_t proposed,
                                      uint64_t* seed);

[[nodiscard]] Status Recover(Env* env, const std::string& dir, bool truncate_corruption,
                             Table* table, RecoveryReport* report);

}  // namespace rkv::wal

#endif  // RKV_SERVER_DURABILITY_RECOVERY_H_
