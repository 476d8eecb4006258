// SPDX-License-Identifier: Apache-2.0
// FileMailbox: a Mailbox in a directory (a local or shared file system: the `file` exchange
// method). An entry is a file written to an unguessable temporary name and renamed into place
// without replacing anything, so a reader never sees half of it and nothing planted at the
// name is overwritten or followed. Heartbeat() refreshes the modification time of this
// mailbox's files; a file older than kStaleMs is stale.
//
// Security (issue 12; docs/connection.md "file"): client and server run as the SAME user
// (entries are mode 0600: a server's reply carries its memory parameters). The mailbox
// refuses, each with a Status naming the path and the reason, never blocking:
// - a directory not owned by this process's user, or writable by group/others unless it is
//   sticky (then others cannot rename or remove this user's files);
// - an entry that is not a regular file (symlink, FIFO, socket, device, directory), that is
//   owned by another user, that has a link count other than 1 (in a shared sticky directory
//   another user could hard-link a file of this user under an entry's name; WaitFor retries
//   for kLinkGraceMs first, as a link + unlink rename passes through 2 links), or that is
//   larger than kMaxFileBytes;
// - an entry name with '/' or a leading '.', and a Put whose name already exists.
// Every access goes through the directory's file descriptor (openat & co), so replacing the
// directory path after Open changes nothing.
// Thread safety: one user thread plus one heartbeat thread (own_ is guarded by mu_).
// Ownership: owns the directory descriptor (closed in the destructor).
#ifndef RKV_COMMON_EXCHANGE_FILE_MAILBOX_H_
#define RKV_COMMON_EXCHANGE_FILE_MAILBOX_H_

#include <sys/stat.h>
#include <sys/types.h>

#include <memory>
#include <mutex>
#include <set>
#include <string>

#include "common/exchange/mailbox.h"
#include "common/mutex.h"

namespace rkv {

class FileMailbox : public Mailbox {
 public:
  // The largest entry file read or written; records are small (an exchange message is at most
  // 8 KiB), so anything larger is refused unread.
  static constexpr size_t kMaxFileBytes = Mailbox::kMaxEntryBytes;
  // How long WaitFor keeps looking at an entry whose link count is not 1 before refusing it.
  static constexpr int kLinkGraceMs = 100;

  [[nodiscard]] static Status Open(const std::string& dir, std::unique_ptr<Mailbox>* out);
  ~FileMailbox() override;
  Status Put(const std::string& name, const std::string& bytes) override;
  Status WaitFor(const std::string& name, std::string* bytes, int timeout_ms) override;
  Status List(const std::string& suffix, std::vector<std::string>* out) override;
  bool Alive(const std::string& name) override;
  void Remove(const std::string& name) override;
  void Heartbeat() override;
  std::string Describe(const std::string& name) const override {
    return "file " + dir_ + "/" + name;
  }

  // The directory rule above, on the directory's stat: OK, or kInvalidArgument naming `dir`
  // and the reason. Pure (for tests).
  [[nodiscard]] static Status CheckDirectory(const std::string& dir, const struct stat& st,
                                             uid_t euid);
  // The entry rule above, on an entry's lstat/fstat. Pure (for tests).
  [[nodiscard]] static Status CheckEntry(const std::string& path, const struct stat& st,
                                         uid_t euid);

 private:
  FileMailbox(std::string dir, int dir_fd) : dir_(std::move(dir)), dir_fd_(dir_fd) {}
  // Reads `name` if it exists: *absent is true if it does not (yet). *links is true when it
  // is refused only for its link count.
  [[nodiscard]] Status ReadEntry(const std::string& name, std::string* bytes, bool* absent,
                                 bool* links) const;
  static bool OnlyLinks(const std::string& path, struct stat st, uid_t euid);
  std::string Path(const std::string& name) const { return dir_ + "/" + name; }

  const std::string dir_;
  const int dir_fd_;
  Mutex mu_;
  std::set<std::string> own_ GUARDED_BY(mu_);
};

}  // namespace rkv

#endif  // RKV_COMMON_EXCHANGE_FILE_MAILBOX_H_
