#include "common/exchange/file_mailbox.h"

#include <dirent.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <fstream>
#include <sstream>
#include <thread>

#include "common/verbs/rdma.h"

namespace rkv {

Status FileMailbox::Open(const std::string& dir, std::unique_ptr<Mailbox>* out) {
  if (dir.empty())
    return Status(Code::kInvalidArgument, "the file exchange needs a directory (--exchange_dir)");
  struct stat st {};
  if (stat(dir.c_str(), &st) != 0 || !S_ISDIR(st.st_mode))
    return Status(Code::kInvalidArgument, "exchange directory '" + dir + "' does not exist");
  if (access(dir.c_str(), R_OK | W_OK | X_OK) != 0)
    return ErrnoStatus("access(exchange directory '" + dir + "', read+write)", errno);
  out->reset(new FileMailbox(dir));
  return Status::Ok();
}

Status FileMailbox::Put(const std::string& name, const std::string& bytes) {
  std::string path = dir_ + "/" + name;
  std::string tmp = dir_ + "/.tmp." + name + "." + std::to_string(getpid());
  int fd = open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) return ErrnoStatus("open(" + tmp + ")", errno);
  ssize_t n = write(fd, bytes.data(), bytes.size());
  int err = errno;
  close(fd);
  if (n != ssize_t(bytes.size())) {
    unlink(tmp.c_str());
    return ErrnoStatus("write(" + tmp + ")", n < 0 ? err : EIO);
  }
  if (rename(tmp.c_str(), path.c_str()) != 0) {
    err = errno;
    unlink(tmp.c_str());
    return ErrnoStatus("rename(" + tmp + " -> " + path + ")", err);
  }
  MutexLock l(&mu_);
  own_.insert(name);
  return Status::Ok();
}

Status FileMailbox::WaitFor(const std::string& name, std::string* bytes, int timeout_ms) {
  std::string path = dir_ + "/" + name;
  auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(timeout_ms);
  for (;;) {
    std::ifstream in(path, std::ios::binary);
    if (in) {
      std::ostringstream ss;
      ss << in.rdbuf();
      *bytes = ss.str();
      return Status::Ok();
    }
    if (std::chrono::steady_clock::now() >= deadline)
      return Status(Code::kTimeout, "no file " + path);
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
}

Status FileMailbox::List(const std::string& suffix, std::vector<std::string>* out) {
  out->clear();
  DIR* d = opendir(dir_.c_str());
  if (d == nullptr) return ErrnoStatus("opendir(" + dir_ + ")", errno);
  while (dirent* e = readdir(d)) {
    std::string n = e->d_name;
    if (n[0] != '.' && n.size() > suffix.size() &&
        n.compare(n.size() - suffix.size(), suffix.size(), suffix) == 0)
      out->push_back(n);
  }
  closedir(d);
  return Status::Ok();
}

bool FileMailbox::Alive(const std::string& name) {
  struct stat st {};
  if (stat((dir_ + "/" + name).c_str(), &st) != 0) return false;
  auto mtime = std::chrono::system_clock::time_point(std::chrono::seconds(st.st_mtim.tv_sec));
  return std::chrono::system_clock::now() - mtime < std::chrono::milliseconds(kStaleMs);
}

void FileMailbox::Remove(const std::string& name) {
  unlink((dir_ + "/" + name).c_str());
  MutexLock l(&mu_);
  own_.erase(name);
}

void FileMailbox::Heartbeat() {
  MutexLock l(&mu_);
  for (const std::string& n : own_) utimensat(AT_FDCWD, (dir_ + "/" + n).c_str(), nullptr, 0);
}

}  // namespace rkv
