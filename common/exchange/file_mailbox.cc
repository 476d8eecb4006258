// SPDX-License-Identifier: Apache-2.0
#include "common/exchange/file_mailbox.h"

#include <dirent.h>
#include <fcntl.h>
#include <stdio.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstring>
#include <thread>

#include "common/read_limited.h"
#include "common/secure_random.h"
#include "common/verbs/rdma.h"

namespace rkv {
namespace {
// A mailbox entry name: no path separator, not empty, no leading '.' (temporaries, "..").
bool ValidName(const std::string& n) {
  return !n.empty() && n.size() <= 200 && n[0] != '.' && n.find('/') == std::string::npos &&
         n.find('\0') == std::string::npos;
}

Status BadName(const std::string& dir, const std::string& name) {
  return Status(Code::kInvalidArgument,
                "file mailbox " + dir + ": invalid entry name '" + name + "'");
}

const char* KindName(mode_t m) {
  if (S_ISLNK(m)) return "a symbolic link";
  if (S_ISFIFO(m)) return "a FIFO";
  if (S_ISSOCK(m)) return "a socket";
  if (S_ISCHR(m)) return "a character device";
  if (S_ISBLK(m)) return "a block device";
  if (S_ISDIR(m)) return "a directory";
  return "not a regular file";
}

Status Refuse(const std::string& path, const std::string& why) {
  return Status(Code::kProtocolError, "file mailbox: refusing " + path + ": " + why);
}

// write(2) all of it (EINTR and short writes).
bool WriteAll(int fd, const char* p, size_t n, int* err) {
  while (n > 0) {
    ssize_t w = write(fd, p, n);
    if (w < 0 && errno == EINTR) continue;
    if (w <= 0) {
      *err = w < 0 ? errno : EIO;
      return false;
    }
    p += w;
    n -= size_t(w);
  }
  return true;
}

// renameat2(RENAME_NOREPLACE), or link+unlink where the file system lacks it (NFS): both fail
// with EEXIST instead of replacing what is at `to`.
int RenameNoReplace(int dfd, const char* from, const char* to) {
  if (renameat2(dfd, from, dfd, to, RENAME_NOREPLACE) == 0) return 0;
  if (errno != EINVAL && errno != ENOSYS) return -1;
  if (linkat(dfd, from, dfd, to, 0) != 0) return -1;
  unlinkat(dfd, from, 0);
  return 0;
}
}  // namespace

Status FileMailbox::CheckDirectory(const std::string& dir, const struct stat& st, uid_t euid) {
  auto bad = [&](const std::string& why) {
    return Status(Code::kInvalidArgument, "exchange directory '" + dir + "': " + why);
  };
  if (!S_ISDIR(st.st_mode)) return bad("not a directory");
  if (st.st_uid != euid)
    return bad("owned by uid " + std::to_string(st.st_uid) + ", not by this process's user (uid " +
               std::to_string(euid) +
               "): its owner could plant or replace entries; use a directory of your own");
  if ((st.st_mode & (S_IWGRP | S_IWOTH)) != 0 && (st.st_mode & S_ISVTX) == 0)
    return bad(
        "writable by group or others and not sticky: others could replace entries "
        "(chmod go-w, or chmod +t)");
  return Status::Ok();
}

Status FileMailbox::CheckEntry(const std::string& path, const struct stat& st, uid_t euid) {
  if (!S_ISREG(st.st_mode)) return Refuse(path, std::string("it is ") + KindName(st.st_mode));
  if (st.st_uid != euid)
    return Refuse(path, "owned by uid " + std::to_string(st.st_uid) +
                            ", not by this process's user (uid " + std::to_string(euid) + ")");
  if (st.st_nlink != 1)
    return Refuse(path, "it has " + std::to_string(st.st_nlink) +
                            " links, not 1 (a hard link planted under an entry's name, or an "
                            "entry being moved or removed)");
  if (st.st_size < 0 || uint64_t(st.st_size) > kMaxFileBytes)
    return Refuse(path, std::to_string(st.st_size) + " bytes, more than the limit of " +
                            std::to_string(kMaxFileBytes));
  return Status::Ok();
}

Status FileMailbox::Open(const std::string& dir, std::unique_ptr<Mailbox>* out) {
  if (dir.empty())
    return Status(Code::kInvalidArgument, "the file exchange needs a directory (--exchange_dir)");
  int fd = open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd < 0) {
    int err = errno;
    if (err == ENOENT)
      return Status(Code::kInvalidArgument, "exchange directory '" + dir + "' does not exist");
    if (err == ENOTDIR)
      return Status(Code::kInvalidArgument, "exchange directory '" + dir + "' is not a directory");
    return ErrnoStatus("open(exchange directory '" + dir + "')", err);
  }
  std::unique_ptr<FileMailbox> m(new FileMailbox(dir, fd));
  struct stat st {};
  if (fstat(fd, &st) != 0) return ErrnoStatus("fstat(exchange directory '" + dir + "')", errno);
  Status s = CheckDirectory(dir, st, geteuid());
  if (!s.ok()) return s;
  if (faccessat(fd, ".", R_OK | W_OK | X_OK, AT_EACCESS) != 0)
    return ErrnoStatus("access(exchange directory '" + dir + "', read+write)", errno);
  *out = std::move(m);
  return Status::Ok();
}

FileMailbox::~FileMailbox() { close(dir_fd_); }

Status FileMailbox::Put(const std::string& name, const std::string& bytes) {
  if (!ValidName(name)) return BadName(dir_, name);
  if (bytes.size() > kMaxFileBytes)
    return Status(Code::kInvalidArgument, "file mailbox: " + std::to_string(bytes.size()) +
                                              " bytes for " + Path(name) + ", more than " +
                                              std::to_string(kMaxFileBytes));
  std::string rnd;
  Status s = SecureRandom::Hex(8, &rnd);
  if (!s.ok()) return s;
  // Unguessable, so nobody can plant something there first; O_EXCL|O_NOFOLLOW in any case.
  const std::string tmp = ".tmp." + name + "." + rnd;
  int fd = openat(dir_fd_, tmp.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
  if (fd < 0) return ErrnoStatus("open(" + Path(tmp) + ", O_EXCL|O_NOFOLLOW)", errno);
  int err = 0;
  bool ok = WriteAll(fd, bytes.data(), bytes.size(), &err);
  if (close(fd) != 0 && ok) {
    ok = false;
    err = errno;
  }
  if (!ok) {
    unlinkat(dir_fd_, tmp.c_str(), 0);
    return ErrnoStatus("write(" + Path(tmp) + ")", err);
  }
  if (RenameNoReplace(dir_fd_, tmp.c_str(), name.c_str()) != 0) {
    err = errno;
    unlinkat(dir_fd_, tmp.c_str(), 0);
    if (err == EEXIST)
      return Refuse(Path(name),
                    "it already exists and entries are written once (planted by "
                    "someone else?); not replaced");
    return ErrnoStatus("rename(" + Path(tmp) + " -> " + Path(name) + ")", err);
  }
  MutexLock l(&mu_);
  own_.insert(name);
  return Status::Ok();
}

// True when CheckEntry refuses `st` for its link count alone.
bool FileMailbox::OnlyLinks(const std::string& path, struct stat st, uid_t euid) {
  if (st.st_nlink == 1) return false;
  st.st_nlink = 1;
  return CheckEntry(path, st, euid).ok();
}

Status FileMailbox::ReadEntry(const std::string& name, std::string* bytes, bool* absent,
                              bool* links) const {
  *absent = false;
  *links = false;
  const std::string path = Path(name);
  const uid_t euid = geteuid();
  // Look before opening: a FIFO or device is refused unopened (opening some devices acts).
  struct stat st {};
  if (fstatat(dir_fd_, name.c_str(), &st, AT_SYMLINK_NOFOLLOW) != 0) {
    if (errno == ENOENT) {
      *absent = true;
      return Status::Ok();
    }
    return ErrnoStatus("stat(" + path + ")", errno);
  }
  Status s = CheckEntry(path, st, euid);
  if (!s.ok()) {
    *links = OnlyLinks(path, st, euid);
    return s;
  }
  // O_NOFOLLOW and O_NONBLOCK: if it was swapped for a symlink or FIFO since, open neither
  // follows nor blocks, and fstat below sees what was opened.
  int fd = openat(dir_fd_, name.c_str(), O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC | O_NOCTTY);
  if (fd < 0) {
    int err = errno;
    if (err == ENOENT) {
      *absent = true;
      return Status::Ok();
    }
    if (err == ELOOP) return Refuse(path, "it is a symbolic link");
    return ErrnoStatus("open(" + path + ", O_NOFOLLOW)", err);
  }
  if (fstat(fd, &st) != 0) {
    int err = errno;
    close(fd);
    return ErrnoStatus("fstat(" + path + ")", err);
  }
  s = CheckEntry(path, st, euid);
  if (!s.ok()) {
    *links = OnlyLinks(path, st, euid);
    close(fd);
    return s;
  }
  // Read at most one byte more than the limit: a file that grew since fstat is refused too.
  std::string buf;
  s = ReadLimited(fd, kMaxFileBytes, path, &buf);
  close(fd);
  if (!s.ok()) return s;
  if (buf.size() > kMaxFileBytes)
    return Refuse(path, "it grew past the limit of " + std::to_string(kMaxFileBytes) + " bytes");
  *bytes = std::move(buf);
  return Status::Ok();
}

Status FileMailbox::WaitFor(const std::string& name, std::string* bytes, int timeout_ms) {
  if (!ValidName(name)) return BadName(dir_, name);
  const auto start = std::chrono::steady_clock::now();
  const auto deadline = start + std::chrono::milliseconds(timeout_ms);
  // A link count other than 1 is refused, but only after kLinkGraceMs of seeing it: a Put's
  // link + unlink (no renameat2) and a Remove pass through 2 and 0 links for an instant.
  const auto link_grace = start + std::chrono::milliseconds(kLinkGraceMs);
  for (;;) {
    bool absent = false, links = false;
    Status s = ReadEntry(name, bytes, &absent, &links);
    const auto now = std::chrono::steady_clock::now();
    if (!s.ok() && !(links && now < link_grace && now < deadline)) return s;
    if (s.ok() && !absent) return s;
    if (now >= deadline) return Status(Code::kTimeout, "no file " + Path(name));
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
}

Status FileMailbox::List(const std::string& suffix, std::vector<std::string>* out) {
  out->clear();
  int fd = dup(dir_fd_);  // fdopendir takes the descriptor; the duplicate shares its offset
  if (fd < 0) return ErrnoStatus("dup(" + dir_ + ")", errno);
  DIR* d = fdopendir(fd);
  if (d == nullptr) {
    int err = errno;
    close(fd);
    return ErrnoStatus("fdopendir(" + dir_ + ")", err);
  }
  rewinddir(d);
  while (dirent* e = readdir(d)) {
    std::string n = e->d_name;
    if (ValidName(n) && n.size() > suffix.size() &&
        n.compare(n.size() - suffix.size(), suffix.size(), suffix) == 0)
      out->push_back(n);
  }
  closedir(d);
  return Status::Ok();
}

bool FileMailbox::Alive(const std::string& name) {
  if (!ValidName(name)) return false;
  struct stat st {};
  if (fstatat(dir_fd_, name.c_str(), &st, AT_SYMLINK_NOFOLLOW) != 0) return false;
  if (!CheckEntry(Path(name), st, geteuid()).ok()) return false;  // planted: not a live peer
  auto mtime = std::chrono::system_clock::time_point(std::chrono::seconds(st.st_mtim.tv_sec));
  return std::chrono::system_clock::now() - mtime < std::chrono::milliseconds(kStaleMs);
}

void FileMailbox::Remove(const std::string& name) {
  if (!ValidName(name)) return;
  unlinkat(dir_fd_, name.c_str(), 0);  // removes a link itself, never its target
  MutexLock l(&mu_);
  own_.erase(name);
}

void FileMailbox::Heartbeat() {
  MutexLock l(&mu_);
  for (const std::string& n : own_) utimensat(dir_fd_, n.c_str(), nullptr, AT_SYMLINK_NOFOLLOW);
}

}  // namespace rkv
