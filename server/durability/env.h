// SPDX-License-Identifier: Apache-2.0
// Env: the durability code's only door to the file system, so tests can inject full disks and
// failing syncs and renames (tests/fault_env.h), after LevelDB's Env. Posix() is the real one.
//
// Contract:
// - Every failure is a Status (Code::kIoError unless said otherwise) whose message names the
//   call, the path and the errno text, e.g. "rename(a -> b): No space left on device".
// - Files are opened without following a symlink in the last path component (O_NOFOLLOW), with
//   O_CLOEXEC, and only if they are regular files: a FIFO, a device, a socket or a directory is
//   refused after a non-blocking open, so a planted FIFO can never hang the server.
// - Files are created with mode 0600 and directories with 0700.
// Thread safety: an Env is thread-safe; a WritableFile or SequentialFile is used by one thread at
// a time.
// Ownership: New*File hands the file to the caller; its destructor closes it.
#ifndef RKV_SERVER_DURABILITY_ENV_H_
#define RKV_SERVER_DURABILITY_ENV_H_

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "rkv/status.h"

namespace rkv::wal {

class WritableFile {
 public:
  virtual ~WritableFile() = default;
  // Writes all of `data` at the end of the file (retrying short writes), or fails.
  [[nodiscard]] virtual Status Append(std::string_view data) = 0;
  // Makes everything appended so far durable (fdatasync).
  [[nodiscard]] virtual Status Sync() = 0;
  // Cuts the file to `size` bytes (drops a partly written batch after a failure) and syncs; the
  // next Append writes at `size`.
  [[nodiscard]] virtual Status Truncate(uint64_t size) = 0;
};

class SequentialFile {
 public:
  virtual ~SequentialFile() = default;
  // Replaces *out with the next up to `n` bytes: exactly `n` unless the file ends first (empty at
  // the end of the file).
  [[nodiscard]] virtual Status Read(size_t n, std::string* out) = 0;
  // The file's size when it was opened.
  virtual uint64_t Size() const = 0;
};

// A file's bytes, read-only, for as long as this object lives: mapped (the page cache holds
// them, so a large log costs no heap) or, where mapping is impossible, read into memory.
// The file must not shrink while it is mapped (a data directory is locked: dir_lock.h).
class ReadOnlyFile {
 public:
  virtual ~ReadOnlyFile() = default;
  virtual std::string_view data() const = 0;
};

class Env {
 public:
  virtual ~Env() = default;
  // Opens `path` for appending, creating it if absent; *size gets its length.
  [[nodiscard]] virtual Status NewAppendableFile(const std::string& path,
                                                 std::unique_ptr<WritableFile>* out,
                                                 uint64_t* size) = 0;
  // Creates `path`, which must not exist (not even as a symlink or a dangling one), for writing.
  [[nodiscard]] virtual Status NewWritableFile(const std::string& path,
                                               std::unique_ptr<WritableFile>* out) = 0;
  // Opens `path` for reading from its start.
  [[nodiscard]] virtual Status NewSequentialFile(const std::string& path,
                                                 std::unique_ptr<SequentialFile>* out) = 0;
  // Reads the whole file if it is at most `max_bytes` long.
  [[nodiscard]] virtual Status ReadFile(const std::string& path, uint64_t max_bytes,
                                        std::string* out) = 0;
  // Gives the bytes of the file if it is at most `max_bytes` long. The default reads the file
  // with ReadFile (so a fault-injecting Env sees the read); Posix() maps it.
  [[nodiscard]] virtual Status OpenReadOnly(const std::string& path, uint64_t max_bytes,
                                            std::unique_ptr<ReadOnlyFile>* out);
  // Replaces *names with the names in `dir` (without "." and ".."), in no particular order.
  [[nodiscard]] virtual Status GetChildren(const std::string& dir,
                                           std::vector<std::string>* names) = 0;
  // rename(2): atomically replaces `to` if it exists. Durable only after SyncDir.
  [[nodiscard]] virtual Status RenameFile(const std::string& from, const std::string& to) = 0;
  // unlink(2). Code::kNotFound if `path` does not exist. Durable only after SyncDir.
  [[nodiscard]] virtual Status RemoveFile(const std::string& path) = 0;
  // Makes the creations, renames and removals of names in `dir` durable (fsync of the directory).
  [[nodiscard]] virtual Status SyncDir(const std::string& dir) = 0;
  // Creates `dir` (not its parents) if absent; fails if it exists and is not a directory (a
  // symlink to a directory is accepted: the operator may point the data directory elsewhere).
  [[nodiscard]] virtual Status CreateDirIfMissing(const std::string& dir) = 0;
  // Cuts the regular file `path` to `size` bytes (a log's torn tail) and makes that durable.
  [[nodiscard]] virtual Status TruncateFile(const std::string& path, uint64_t size) = 0;
  static Env* Posix();
};

}  // namespace rkv::wal

#endif  // RKV_SERVER_DURABILITY_ENV_H_
