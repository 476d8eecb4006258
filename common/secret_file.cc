// SPDX-License-Identifier: Apache-2.0
#include "common/secret_file.h"

#include <fcntl.h>
#include <openssl/crypto.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>

namespace rkv {
namespace {

std::string Errno(const std::string& what, int err) { return what + ": " + std::strerror(err); }

std::string Octal(mode_t mode) {
  char text[8];
  std::snprintf(text, sizeof text, "%04o", unsigned(mode & 07777));
  return text;
}

// Closes fd when it goes out of scope.
struct Fd {
  int fd = -1;
  ~Fd() {
    if (fd >= 0) close(fd);
  }
};

Status Bad(const std::string& message) { return Status(Code::kInvalidArgument, message); }

}  // namespace

Status ReadSecretFile(const std::string& path, const std::string& what, size_t max_bytes,
                      std::string* data) {
  // The parent directory: whoever may write it may replace the file between our checks and
  // the next start.
  const size_t slash = path.rfind('/');
  const std::string dir =
      slash == std::string::npos ? "." : (slash == 0 ? "/" : path.substr(0, slash));
  const std::string base = slash == std::string::npos ? path : path.substr(slash + 1);
  if (base.empty()) return Bad(what + " names a directory");
  Fd dfd{open(dir.c_str(), O_PATH | O_DIRECTORY | O_CLOEXEC)};
  if (dfd.fd < 0) return Bad(Errno("open(directory " + dir + " of " + what + ")", errno));
  struct stat dst;
  if (fstat(dfd.fd, &dst) != 0)
    return Bad(Errno("fstat(directory " + dir + " of " + what + ")", errno));
  if ((dst.st_mode & (S_IWGRP | S_IWOTH)) != 0 && (dst.st_mode & S_ISVTX) == 0)
    return Bad(what + ": its directory " + dir + " has mode " + Octal(dst.st_mode) +
               ": group or others may replace the file; keep it in a directory only its owner "
               "may write (chmod go-w), or one with the sticky bit");
  Fd fd{openat(dfd.fd, base.c_str(), O_RDONLY | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK | O_NOCTTY)};
  if (fd.fd < 0) {
    int err = errno;
    if (err == ELOOP) return Bad(what + " is a symbolic link; name the file itself");
    return Bad(Errno("open(" + what + ")", err));
  }
  struct stat st;
  if (fstat(fd.fd, &st) != 0) return Bad(Errno("fstat(" + what + ")", errno));
  if (!S_ISREG(st.st_mode)) return Bad(what + " is not a regular file");
  if (st.st_uid != geteuid())
    return Bad(what + " is owned by uid " + std::to_string(st.st_uid) + ", not by this user (uid " +
               std::to_string(geteuid()) + "); chown it");
  if ((st.st_mode & 077) != 0)
    return Bad(what + " has mode " + Octal(st.st_mode) +
               ": group or others may access it; make it private (chmod 600)");
  if (uint64_t(st.st_size) > max_bytes)
    return Bad(what + " is larger than " + std::to_string(max_bytes) + " bytes");
  std::string buf(max_bytes + 1, '\0');
  size_t got = 0;
  while (got < buf.size()) {
    ssize_t r = read(fd.fd, &buf[got], buf.size() - got);
    if (r < 0 && errno == EINTR) continue;
    if (r < 0) {
      int err = errno;
      OPENSSL_cleanse(&buf[0], buf.size());
      return Bad(Errno("read(" + what + ")", err));
    }
    if (r == 0) break;
    got += size_t(r);
  }
  if (got > max_bytes) {  // grew since fstat
    OPENSSL_cleanse(&buf[0], buf.size());
    return Bad(what + " is larger than " + std::to_string(max_bytes) + " bytes");
  }
  OPENSSL_cleanse(&buf[got], buf.size() - got);
  buf.resize(got);
  *data = std::move(buf);
  return Status::Ok();
}

}  // namespace rkv
