// SPDX-License-Identifier: Apache-2.0
#include "server/durability/dir_lock.h"

#include <fcntl.h>
#include <sys/file.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

namespace rkv::wal {

DirLock::~DirLock() {
  if (fd_ >= 0) close(fd_);
}

Status DirLock::Lock(const std::string& dir) {
  const std::string path = dir + "/LOCK";
  int fd = open(path.c_str(), O_RDWR | O_CREAT | O_NOFOLLOW | O_CLOEXEC, 0600);
  if (fd < 0) return Status(Code::kIoError, "open(" + path + "): " + std::strerror(errno));
  if (flock(fd, LOCK_EX | LOCK_NB) != 0) {
    int e = errno;
    close(fd);
    if (e == EWOULDBLOCK)
      return Status(Code::kIoError,
                    dir + " is in use by another kvserver (" + path + " is locked)");
    return Status(Code::kIoError, "flock(" + path + "): " + std::strerror(e));
  }
  fd_ = fd;
  return Status::Ok();
}

}  // namespace rkv::wal
