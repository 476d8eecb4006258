// SPDX-License-Identifier: Apache-2.0
// DirLock: keeps a second kvserver off a data directory: an exclusive flock on DIR/LOCK, held
// for the life of the object (the kernel drops it when the process dies, kill -9 included).
// Thread safety: none needed (one owner). Ownership: owns the lock file's descriptor.
#ifndef RKV_SERVER_DURABILITY_DIR_LOCK_H_
#define RKV_SERVER_DURABILITY_DIR_LOCK_H_

#include <string>

#include "rkv/status.h"

namespace rkv::wal {

class DirLock {
 public:
  DirLock() = default;
  ~DirLock();
  DirLock(const DirLock&) = delete;
  DirLock& operator=(const DirLock&) = delete;
  // Fails if another process holds the directory.
  [[nodiscard]] Status Lock(const std::string& dir);

 private:
  int fd_ = -1;
};

}  // namespace rkv::wal

#endif  // RKV_SERVER_DURABILITY_DIR_LOCK_H_
