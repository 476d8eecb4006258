// FileMailbox: a Mailbox in a directory both sides can read and write (a local or shared file
// system: the `file` exchange method). An entry is a file written to a temporary name and
// renamed into place, so a reader never sees half of it. Heartbeat() refreshes the
// modification time of this mailbox's files; a file older than kStaleMs is stale.
// Thread safety: one user thread plus one heartbeat thread (own_ is guarded by mu_).
#ifndef RKV_COMMON_EXCHANGE_FILE_MAILBOX_H_
#define RKV_COMMON_EXCHANGE_FILE_MAILBOX_H_

#include <memory>
#include <mutex>
#include <set>
#include <string>

#include "common/exchange/mailbox.h"
#include "common/mutex.h"

namespace rkv {

class FileMailbox : public Mailbox {
 public:
  [[nodiscard]] static Status Open(const std::string& dir, std::unique_ptr<Mailbox>* out);
  Status Put(const std::string& name, const std::string& bytes) override;
  Status WaitFor(const std::string& name, std::string* bytes, int timeout_ms) override;
  Status List(const std::string& suffix, std::vector<std::string>* out) override;
  bool Alive(const std::string& name) override;
  void Remove(const std::string& name) override;
  void Heartbeat() override;
  std::string Describe(const std::string& name) const override {
    return "file " + dir_ + "/" + name;
  }

 private:
  explicit FileMailbox(std::string dir) : dir_(std::move(dir)) {}
  const std::string dir_;
  Mutex mu_;
  std::set<std::string> own_ GUARDED_BY(mu_);
};

}  // namespace rkv

#endif  // RKV_COMMON_EXCHANGE_FILE_MAILBOX_H_
