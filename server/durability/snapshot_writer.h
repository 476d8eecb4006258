// SPDX-License-Identifier: Apache-2.0
// SnapshotWriter: writes one snapshot file (docs/wire-format.md, "Snapshot") so that it appears
// under its final name only when complete and durable.
//
// Create opens dir/snap-<S>.rkv.tmp (removing a stale one of that name first); Add buffers one
// entry record and writes about every kFlushBytes; Finish appends the END record (entry count,
// key+value bytes), syncs the file, renames it to dir/snap-<S>.rkv (atomically replacing a
// snapshot of the same sequence) and syncs the directory. A snapshot "covers" S: it holds every
// live key as of sequence S, so recovery replays only log records after S.
// Failures: any failed call (a full disk, a failed sync or rename, an invalid entry) is returned
// with the file's name, the temporary file is removed at once and the writer is dead: every later
// call returns the same error. Nothing is left behind by a writer destroyed without a successful
// Finish. If only the final directory sync fails, the complete snapshot stays under its final
// name (it may be replacing an older one of the same sequence, which must not be lost), Finish
// returns the error and the caller must not rely on the snapshot being durable (keep the logs).
// Thread safety: none (one thread writes a snapshot). Does not own the Env.
// Invariants: the temporary file holds exactly the header and the records of the first
// entries() entries, apart from up to kFlushBytes + one record still buffered.
#ifndef RKV_SERVER_DURABILITY_SNAPSHOT_WRITER_H_
#define RKV_SERVER_DURABILITY_SNAPSHOT_WRITER_H_

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>

#include "rkv/status.h"
#include "server/durability/env.h"

namespace rkv::wal {

class SnapshotWriter {
 public:
  static constexpr size_t kFlushBytes = size_t{1} << 20;

  // Starts the snapshot of `covered_sequence` in `dir` (which must exist).
  [[nodiscard]] static Status Create(Env* env, const std::string& dir, uint64_t covered_sequence,
                                     std::unique_ptr<SnapshotWriter>* out);
  ~SnapshotWriter();
  SnapshotWriter(const SnapshotWriter&) = delete;
  SnapshotWriter& operator=(const SnapshotWriter&) = delete;

  // Adds one live entry: key 1..kMaxKeySize bytes, value at most kMaxValueSize (else
  // kInvalidArgument, and the writer is dead). `sequence` is the entry's version, 0 if unknown.
  [[nodiscard]] Status Add(std::string_view key, std::string_view value, uint64_t sequence = 0);
  // Completes the snapshot as described above. Once only.
  [[nodiscard]] Status Finish();

  uint64_t covered_sequence() const { return covered_; }
  uint64_t entries() const { return entries_; }
  // Bytes of the snapshot so far (header and records, buffered ones included); after Finish,
  // the file's size.
  uint64_t bytes_written() const { return bytes_; }
  // dir/snap-<S>.rkv and dir/snap-<S>.rkv.tmp.
  const std::string& path() const { return path_; }
  const std::string& temp_path() const { return temp_path_; }
  bool finished() const { return finished_; }

 private:
  SnapshotWriter(Env* env, std::string dir, uint64_t covered_sequence);
  [[nodiscard]] Status Flush();
  // Makes the writer dead with `s` (prefixed with the snapshot's name), removes the temporary
  // file and returns the error.
  [[nodiscard]] Status Fail(const Status& s);

  Env* const env_;
  const std::string dir_;
  const uint64_t covered_;
  const std::string path_;
  const std::string temp_path_;
  std::unique_ptr<WritableFile> file_;  // null once finished or dead
  std::string buffer_;                  // encoded, not yet appended
  uint64_t entries_ = 0;
  uint64_t kv_bytes_ = 0;  // key + value bytes of the entries
  uint64_t bytes_ = 0;
  bool finished_ = false;
  Status dead_;  // the first failure
};

}  // namespace rkv::wal

#endif  // RKV_SERVER_DURABILITY_SNAPSHOT_WRITER_H_
