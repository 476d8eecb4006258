// SPDX-License-Identifier: Apache-2.0
// DataDir: the names of the files in a data directory (kvserver --data_dir) and their listing
// (docs/wire-format.md, "Data directory").
//
//   wal-<16 lowercase hex digits>.log    a write-ahead log; the number is its generation (1, 2,
//                                        ...: a new file per start-up and per snapshot's log
//                                        rotation); replay goes in generation order
//   snap-<16 lowercase hex digits>.rkv   a complete snapshot covering every write <= the number
//   <one of the above>.tmp               a file being written (a snapshot before its rename);
//                                        left over only by a crash, never read
// Parsing is strict: exactly the prefix, exactly 16 digits 0-9a-f, exactly the suffix, so every
// number has one name and every recognised name one number. Anything else (including "x.tmp") is
// reported as unknown and otherwise ignored: the server never reads or removes a name it did not
// make.
// Thread safety: pure functions, apart from ListDataDir's directory read through the Env.
// Ownership: ListDataDir fills the caller's listing.
#ifndef RKV_SERVER_DURABILITY_DATA_DIR_H_
#define RKV_SERVER_DURABILITY_DATA_DIR_H_

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "rkv/status.h"
#include "server/durability/env.h"

namespace rkv::wal {

inline constexpr std::string_view kLogPrefix = "wal-";
inline constexpr std::string_view kLogSuffix = ".log";
inline constexpr std::string_view kSnapshotPrefix = "snap-";
inline constexpr std::string_view kSnapshotSuffix = ".rkv";
inline constexpr std::string_view kTempSuffix = ".tmp";

// "wal-0000000000000001.log" for 1.
std::string LogFileName(uint64_t generation);
// "snap-00000000000000ff.rkv" for 255.
std::string SnapshotFileName(uint64_t covered_sequence);
// `name` + ".tmp".
std::string TempFileName(std::string_view name);
// `dir` + "/" + `name` (no doubled slash when `dir` ends in one).
std::string JoinPath(std::string_view dir, std::string_view name);

// True (and *number set) only for a name LogFileName / SnapshotFileName makes.
[[nodiscard]] bool ParseLogFileName(std::string_view name, uint64_t* generation);
[[nodiscard]] bool ParseSnapshotFileName(std::string_view name, uint64_t* covered_sequence);

struct DataDirListing {
  struct File {
    uint64_t number;   // the log's generation or the snapshot's covered sequence
    std::string name;  // the file name, without the directory
  };
  std::vector<File> logs;                // ascending number
  std::vector<File> snapshots;           // ascending number
  std::vector<std::string> temporaries;  // "<log or snapshot name>.tmp", sorted
  std::vector<std::string> unknown;      // every other name, sorted
};

// Lists `dir` (names only: a directory named like a log is listed as a log and refused when
// opened). Replaces *out.
[[nodiscard]] Status ListDataDir(Env* env, const std::string& dir, DataDirListing* out);

}  // namespace rkv::wal

#endif  // RKV_SERVER_DURABILITY_DATA_DIR_H_
