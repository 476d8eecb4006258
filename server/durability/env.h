// Env: the durability code's only door to the file system, so tests can inject full disks and
// failing syncs (tests/fault_env.h), after LevelDB's Env. Posix() is the real one.
// Every failure is a Status naming the call, the path and the errno text.
// Thread safety: an Env is thread-safe; a WritableFile is used by one thread at a time.
// Ownership: NewAppendableFile hands the file to the caller; its destructor closes it.
#ifndef RKV_SERVER_DURABILITY_ENV_H_
#define RKV_SERVER_DURABILITY_ENV_H_

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>

#include "rkv/status.h"

namespace rkv::wal {

class WritableFile {
 public:
  virtual ~WritableFile() = default;
  // Writes all of `data` at the end of the file (retrying short writes), or fails.
  [[nodiscard]] virtual Status Append(std::string_view data) = 0;
  // Makes everything appended so far durable (fdatasync).
  [[nodiscard]] virtual Status Sync() = 0;
  // Cuts the file to `size` bytes (drops a partly written batch after a failure) and syncs.
  [[nodiscard]] virtual Status Truncate(uint64_t size) = 0;
};

class Env {
 public:
  virtual ~Env() = default;
  // Opens `path` for appending, creating it (mode 0600) if absent; *size gets its length.
  [[nodiscard]] virtual Status NewAppendableFile(const std::string& path,
                                                 std::unique_ptr<WritableFile>* out,
                                                 uint64_t* size) = 0;
  // Reads the whole file if it is at most `max_bytes` long.
  [[nodiscard]] virtual Status ReadFile(const std::string& path, uint64_t max_bytes,
                                        std::string* out) = 0;
  static Env* Posix();
};

}  // namespace rkv::wal

#endif  // RKV_SERVER_DURABILITY_ENV_H_
