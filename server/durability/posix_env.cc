// Env::Posix(): the real file system (server/durability/env.h).
#include <errno.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstring>

#include "server/durability/env.h"

namespace rkv::wal {
namespace {

Status IoError(const char* call, const std::string& path, int err) {
  return Status(Code::kIoError, std::string(call) + "(" + path + "): " + std::strerror(err));
}

class PosixWritableFile : public WritableFile {
 public:
  PosixWritableFile(std::string path, int fd) : path_(std::move(path)), fd_(fd) {}
  ~PosixWritableFile() override { ::close(fd_); }
  Status Append(std::string_view data) override {
    while (!data.empty()) {
      ssize_t n = ::write(fd_, data.data(), data.size());
      if (n < 0) {
        if (errno == EINTR) continue;
        return IoError("write", path_, errno);
      }
      data.remove_prefix(size_t(n));
    }
    return Status::Ok();
  }
  Status Sync() override {
    if (::fdatasync(fd_) != 0) return IoError("fdatasync", path_, errno);
    return Status::Ok();
  }
  Status Truncate(uint64_t size) override {
    if (::ftruncate(fd_, off_t(size)) != 0) return IoError("ftruncate", path_, errno);
    return Sync();
  }

 private:
  const std::string path_;
  const int fd_;
};

class PosixEnv : public Env {
 public:
  Status NewAppendableFile(const std::string& path, std::unique_ptr<WritableFile>* out,
                           uint64_t* size) override {
    int fd = ::open(path.c_str(), O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0600);
    if (fd < 0) return IoError("open", path, errno);
    struct stat st;
    if (::fstat(fd, &st) != 0) {
      int err = errno;
      ::close(fd);
      return IoError("fstat", path, err);
    }
    if (!S_ISREG(st.st_mode)) {
      ::close(fd);
      return Status(Code::kIoError, "open(" + path + "): not a regular file");
    }
    *size = uint64_t(st.st_size);
    out->reset(new PosixWritableFile(path, fd));
    return Status::Ok();
  }
  Status ReadFile(const std::string& path, uint64_t max_bytes, std::string* out) override {
    int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK);
    if (fd < 0) return IoError("open", path, errno);
    struct stat st;
    Status s;
    if (::fstat(fd, &st) != 0) {
      s = IoError("fstat", path, errno);
    } else if (!S_ISREG(st.st_mode)) {
      s = Status(Code::kIoError, "read(" + path + "): not a regular file");
    } else if (uint64_t(st.st_size) > max_bytes) {
      s = Status(Code::kIoError, "read(" + path + "): " + std::to_string(st.st_size) +
                                     " bytes, more than the limit of " + std::to_string(max_bytes));
    } else {
      out->resize(size_t(st.st_size));
      size_t got = 0;
      while (got < out->size()) {
        ssize_t n = ::read(fd, &(*out)[got], out->size() - got);
        if (n < 0 && errno == EINTR) continue;
        if (n < 0) {
          s = IoError("read", path, errno);
          break;
        }
        if (n == 0) break;  // shrank meanwhile
        got += size_t(n);
      }
      out->resize(got);
    }
    ::close(fd);
    return s;
  }
};

}  // namespace

Env* Env::Posix() {
  static PosixEnv env;
  return &env;
}

}  // namespace rkv::wal
