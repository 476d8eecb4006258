// SPDX-License-Identifier: Apache-2.0
// Mailbox: a shared namespace of small named blobs that two processes can both reach; the
// storage behind the `file` (a directory) and `etcd` (a key prefix) exchange methods.
//
// Entries a mailbox Puts are its own: Heartbeat() keeps them alive (file: refreshes their
// modification time; etcd: keeps their lease alive), and they disappear when the mailbox is
// destroyed (file: unlinked; etcd: lease revoked) or, if the process dies, when they go
// stale (file: no heartbeat for kStaleMs; etcd: lease TTL expires).
// Thread safety: implementations are safe for one user thread plus one heartbeat thread.
#ifndef RKV_COMMON_EXCHANGE_MAILBOX_H_
#define RKV_COMMON_EXCHANGE_MAILBOX_H_

#include <cstddef>
#include <string>
#include <vector>

#include "rkv/status.h"

namespace rkv {

class Mailbox {
 public:
  static constexpr int kHeartbeatMs = 1000;
  static constexpr int kStaleMs = 10000;
  // The largest entry a mailbox stores or reads back: an exchange message is at most
  // kMaxExchangeMessage (8 KiB); anything bigger is refused, so a peer cannot make a reader
  // allocate or wait for more.
  static constexpr size_t kMaxEntryBytes = 16 * 1024;

  virtual ~Mailbox() = default;
  // Stores `bytes` under `name`; readers see all of it or nothing.
  [[nodiscard]] virtual Status Put(const std::string& name, const std::string& bytes) = 0;
  // Waits up to timeout_ms for `name` to exist, then reads it (kTimeout if it never appears).
  // An entry that exists but is refused (not a regular file, too large, foreign owner...)
  // returns its error at once, without waiting for the timeout.
  [[nodiscard]] virtual Status WaitFor(const std::string& name, std::string* bytes,
                                       int timeout_ms) = 0;
  // Names that exist now and end with `suffix`.
  [[nodiscard]] virtual Status List(const std::string& suffix, std::vector<std::string>* out) = 0;
  // True while `name` exists and is not stale.
  virtual bool Alive(const std::string& name) = 0;
  virtual void Remove(const std::string& name) = 0;
  virtual void Heartbeat() = 0;
  // Where `name` lives: "file /dir/name", "etcd http://host:2379 /prefix/name".
  virtual std::string Describe(const std::string& name) const = 0;
};

}  // namespace rkv

#endif  // RKV_COMMON_EXCHANGE_MAILBOX_H_
