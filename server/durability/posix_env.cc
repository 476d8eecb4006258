// SPDX-License-Identifier: Apache-2.0
// Env::Posix(): the real file system (server/durability/env.h).
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstring>

#include "server/durability/env.h"

namespace rkv::wal {
namespace {

Status IoError(const char* call, const std::string& path, int err) {
  return Status(Code::kIoError, std::string(call) + "(" + path + "): " + std::strerror(err));
}

const char* FileKind(mode_t mode) {
  if (S_ISDIR(mode)) return "a directory";
  if (S_ISFIFO(mode)) return "a FIFO";
  if (S_ISCHR(mode)) return "a character device";
  if (S_ISBLK(mode)) return "a block device";
  if (S_ISSOCK(mode)) return "a socket";
  return "not a regular file";
}

// Opens `path` with `flags` | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK (so a FIFO or a device cannot
// block the open), refuses anything but a regular file, then clears O_NONBLOCK.
Status OpenRegular(const std::string& path, int flags, mode_t mode, int* fd_out, uint64_t* size) {
  const int fd = ::open(path.c_str(), flags | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK, mode);
  if (fd < 0) return IoError("open", path, errno);
  struct stat st;
  Status s;
  if (::fstat(fd, &st) != 0) {
    s = IoError("fstat", path, errno);
  } else if (!S_ISREG(st.st_mode)) {
    s = Status(Code::kIoError,
               "open(" + path + "): " + FileKind(st.st_mode) + ", expected a regular file");
  } else {
    const int fl = ::fcntl(fd, F_GETFL);
    if (fl < 0 || ::fcntl(fd, F_SETFL, fl & ~O_NONBLOCK) != 0) s = IoError("fcntl", path, errno);
  }
  if (!s.ok()) {
    ::close(fd);
    return s;
  }
  if (size) *size = uint64_t(st.st_size);
  *fd_out = fd;
  return Status::Ok();
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
    // Without O_APPEND the file offset stays where it was: the next write must go to `size`.
    if (::lseek(fd_, off_t(size), SEEK_SET) < 0) return IoError("lseek", path_, errno);
    return Sync();
  }

 private:
  const std::string path_;
  const int fd_;
};

class PosixSequentialFile : public SequentialFile {
 public:
  PosixSequentialFile(std::string path, int fd, uint64_t size)
      : path_(std::move(path)), fd_(fd), size_(size) {}
  ~PosixSequentialFile() override { ::close(fd_); }
  Status Read(size_t n, std::string* out) override {
    out->resize(n);
    size_t got = 0;
    while (got < n) {
      ssize_t r = ::read(fd_, &(*out)[got], n - got);
      if (r < 0 && errno == EINTR) continue;
      if (r < 0) {
        const int err = errno;
        out->clear();
        return IoError("read", path_, err);
      }
      if (r == 0) break;  // end of file
      got += size_t(r);
    }
    out->resize(got);
    return Status::Ok();
  }
  uint64_t Size() const override { return size_; }

 private:
  const std::string path_;
  const int fd_;
  const uint64_t size_;
};

// A file mapped read-only (MAP_PRIVATE): the page cache holds its bytes.
class MappedFile : public ReadOnlyFile {
 public:
  MappedFile(void* base, size_t size) : base_(base), size_(size) {}
  ~MappedFile() override { ::munmap(base_, size_); }
  std::string_view data() const override {
    return std::string_view(static_cast<const char*>(base_), size_);
  }

 private:
  void* const base_;
  const size_t size_;
};

class PosixEnv : public Env {
 public:
  Status NewAppendableFile(const std::string& path, std::unique_ptr<WritableFile>* out,
                           uint64_t* size) override {
    int fd;
    Status s = OpenRegular(path, O_WRONLY | O_APPEND | O_CREAT, 0600, &fd, size);
    if (!s.ok()) return s;
    out->reset(new PosixWritableFile(path, fd));
    return Status::Ok();
  }
  Status NewWritableFile(const std::string& path, std::unique_ptr<WritableFile>* out) override {
    // O_EXCL: fails if the name exists, whatever it is (a symlink included, dangling or not).
    int fd;
    Status s = OpenRegular(path, O_WRONLY | O_CREAT | O_EXCL, 0600, &fd, nullptr);
    if (!s.ok()) return s;
    out->reset(new PosixWritableFile(path, fd));
    return Status::Ok();
  }
  Status NewSequentialFile(const std::string& path, std::unique_ptr<SequentialFile>* out) override {
    int fd;
    uint64_t size;
    Status s = OpenRegular(path, O_RDONLY, 0, &fd, &size);
    if (!s.ok()) return s;
    out->reset(new PosixSequentialFile(path, fd, size));
    return Status::Ok();
  }
  Status ReadFile(const std::string& path, uint64_t max_bytes, std::string* out) override {
    int fd;
    uint64_t size;
    Status s = OpenRegular(path, O_RDONLY, 0, &fd, &size);
    if (!s.ok()) return s;
    PosixSequentialFile file(path, fd, size);  // closes fd
    if (size > max_bytes) {
      return Status(Code::kIoError, "read(" + path + "): " + std::to_string(size) +
                                        " bytes, more than the limit of " +
                                        std::to_string(max_bytes));
    }
    return file.Read(size_t(size), out);  // shorter if the file shrank meanwhile
  }
  Status OpenReadOnly(const std::string& path, uint64_t max_bytes,
                      std::unique_ptr<ReadOnlyFile>* out) override {
    int fd;
    uint64_t size;
    Status s = OpenRegular(path, O_RDONLY, 0, &fd, &size);
    if (!s.ok()) return s;
    if (size > max_bytes) {
      ::close(fd);
      return Status(Code::kIoError, "read(" + path + "): " + std::to_string(size) +
                                        " bytes, more than the limit of " +
                                        std::to_string(max_bytes));
    }
    void* base = size == 0 ? MAP_FAILED : ::mmap(nullptr, size, PROT_READ, MAP_PRIVATE, fd, 0);
    if (base == MAP_FAILED) {
      // Empty, or a file system that cannot map (9p without a cache does, read-only; others may
      // not): read it instead.
      ::close(fd);
      return Env::OpenReadOnly(path, max_bytes, out);
    }
    ::close(fd);  // the mapping stays valid
    (void)::madvise(base, size, MADV_SEQUENTIAL);
    out->reset(new MappedFile(base, size_t(size)));
    return Status::Ok();
  }
  Status GetChildren(const std::string& dir, std::vector<std::string>* names) override {
    names->clear();
    DIR* d = ::opendir(dir.c_str());
    if (d == nullptr) return IoError("opendir", dir, errno);
    Status s;
    for (;;) {
      errno = 0;
      const struct dirent* e = ::readdir(d);
      if (e == nullptr) {
        if (errno != 0) s = IoError("readdir", dir, errno);
        break;
      }
      if (std::strcmp(e->d_name, ".") == 0 || std::strcmp(e->d_name, "..") == 0) continue;
      names->emplace_back(e->d_name);
    }
    ::closedir(d);
    if (!s.ok()) names->clear();
    return s;
  }
  Status RenameFile(const std::string& from, const std::string& to) override {
    if (::rename(from.c_str(), to.c_str()) != 0)
      return IoError("rename", from + " -> " + to, errno);
    return Status::Ok();
  }
  Status RemoveFile(const std::string& path) override {
    if (::unlink(path.c_str()) == 0) return Status::Ok();
    const int err = errno;
    Status s = IoError("unlink", path, err);
    return err == ENOENT ? Status(Code::kNotFound, s.message()) : s;
  }
  Status SyncDir(const std::string& dir) override {
    const int fd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (fd < 0) return IoError("open", dir, errno);
    Status s;
    if (::fsync(fd) != 0) s = IoError("fsync", dir, errno);
    ::close(fd);
    return s;
  }
  Status CreateDirIfMissing(const std::string& dir) override {
    if (::mkdir(dir.c_str(), 0700) == 0) return Status::Ok();
    const int err = errno;
    if (err != EEXIST) return IoError("mkdir", dir, err);
    struct stat st;
    if (::stat(dir.c_str(), &st) != 0) return IoError("stat", dir, errno);
    if (!S_ISDIR(st.st_mode)) {
      return Status(Code::kIoError,
                    "mkdir(" + dir + "): exists and is " +
                        (S_ISREG(st.st_mode) ? "a regular file" : FileKind(st.st_mode)) +
                        ", not a directory");
    }
    return Status::Ok();
  }
  Status TruncateFile(const std::string& path, uint64_t size) override {
    int fd;
    Status s = OpenRegular(path, O_WRONLY, 0, &fd, nullptr);
    if (!s.ok()) return s;
    if (::ftruncate(fd, off_t(size)) != 0) {
      s = IoError("ftruncate", path, errno);
    } else if (::fsync(fd) != 0) {
      s = IoError("fsync", path, errno);
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
