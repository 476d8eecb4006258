// SPDX-License-Identifier: Apache-2.0
// SnapshotReader: reads a snapshot file (docs/wire-format.md, "Snapshot") sequentially, in
// chunks of about kChunkBytes, so a snapshot of many GB is never held in memory whole.
//
// Rules: a snapshot is complete only if its header is valid, every record is a checksummed PUT
// with possible sizes, and the file ends exactly after one END record whose sequence is the
// header's and whose counts match the entries before it. Unlike a log, a snapshot has no torn
// tail (it was synced before its rename made it visible): ANY defect (bad checksum or length, a
// DELETE or unknown type, a missing or wrong END, data after END, a truncated file, a failed
// read) is kCorrupt, with error() naming the file and the byte offset of the bad record.
// Open refuses a file whose header is bad, or whose name is a snapshot name (snap-<S>.rkv) with
// another sequence than the header's.
// Thread safety: none (one reader per thread). Owns its file; does not own the Env.
// Invariants: the key and value views Next returns point into the reader's buffer and stay valid
// until the next call to Next or the reader's destruction.
#ifndef RKV_SERVER_DURABILITY_SNAPSHOT_READER_H_
#define RKV_SERVER_DURABILITY_SNAPSHOT_READER_H_

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>

#include "rkv/status.h"
#include "server/durability/env.h"

namespace rkv::wal {

class SnapshotReader {
 public:
  static constexpr size_t kChunkBytes = size_t{1} << 20;

  // Opens `path` and checks its header (a failure names the file and offset 0).
  [[nodiscard]] static Status Open(Env* env, const std::string& path,
                                   std::unique_ptr<SnapshotReader>* out);
  SnapshotReader(const SnapshotReader&) = delete;
  SnapshotReader& operator=(const SnapshotReader&) = delete;

  enum class Result {
    kEntry,    // *key, *value: the next entry
    kEnd,      // a valid END ends the file: the snapshot is complete
    kCorrupt,  // a defect at offset(): error() says what
  };
  // After kEnd or kCorrupt, returns the same again.
  [[nodiscard]] Result Next(std::string_view* key, std::string_view* value);

  uint64_t covered_sequence() const { return covered_; }
  // The sequence stored with the last entry (0 if the writer did not know it).
  uint64_t sequence() const { return sequence_; }
  // File offset of the record Next last returned (the END record after kEnd), or of the defect.
  uint64_t offset() const { return offset_; }
  uint64_t entries() const { return entries_; }  // entries returned so far
  const std::string& path() const { return path_; }
  const std::string& error() const { return error_; }

 private:
  SnapshotReader(std::string path, std::unique_ptr<SequentialFile> file);
  // Makes at least `n` unread bytes available unless the file ends first; false on a read
  // failure (error_ set).
  [[nodiscard]] bool Fill(size_t n);
  size_t available() const { return buffer_.size() - pos_; }
  Result Corrupt(uint64_t at, const std::string& why);

  const std::string path_;
  const std::unique_ptr<SequentialFile> file_;
  uint64_t covered_ = 0;
  std::string buffer_;        // bytes read from the file, buffer_base_ onwards
  uint64_t buffer_base_ = 0;  // file offset of buffer_[0]
  size_t pos_ = 0;            // next unread byte of buffer_
  bool eof_ = false;          // the file has no more bytes after buffer_
  std::string chunk_;
  uint64_t sequence_ = 0;
  uint64_t offset_ = 0;
  uint64_t entries_ = 0;
  uint64_t kv_bytes_ = 0;
  bool done_ = false;
  Result result_ = Result::kEntry;  // the final result once done_
  std::string error_;
};

}  // namespace rkv::wal

#endif  // RKV_SERVER_DURABILITY_SNAPSHOT_READER_H_
