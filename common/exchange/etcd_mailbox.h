// EtcdMailbox: a Mailbox in etcd (the `etcd` exchange method), spoken to through etcd's v3
// JSON gateway (HTTP POST of JSON to /v3/kv/*, /v3/lease/*, /v3/watch; keys and values
// base64) with libcurl and nlohmann::json. Entries live under "<prefix>/<name>", all attached
// to one lease of this mailbox (TTL kStaleMs): Heartbeat() keeps the lease alive, the
// destructor revokes it (deleting the entries), and a dead process's entries expire with it.
// WaitFor reads the key and, if absent, watches it from the next revision (no polling).
// Thread safety: one user thread plus one heartbeat thread (every call uses its own curl
// handle; the mailbox state is immutable after Open).
#ifndef RKV_COMMON_EXCHANGE_ETCD_MAILBOX_H_
#define RKV_COMMON_EXCHANGE_ETCD_MAILBOX_H_

#include <memory>
#include <string>

#include "common/exchange/mailbox.h"

namespace rkv {

class EtcdMailbox : public Mailbox {
 public:
  [[nodiscard]] static Status Open(const std::string& endpoint, const std::string& prefix,
                                   std::unique_ptr<Mailbox>* out);
  ~EtcdMailbox() override;
  Status Put(const std::string& name, const std::string& bytes) override;
  Status WaitFor(const std::string& name, std::string* bytes, int timeout_ms) override;
  Status List(const std::string& suffix, std::vector<std::string>* out) override;
  bool Alive(const std::string& name) override;
  void Remove(const std::string& name) override;
  void Heartbeat() override;
  std::string Describe(const std::string& name) const override {
    return "etcd " + endpoint_ + " " + Key(name);
  }

 private:
  EtcdMailbox(std::string endpoint, std::string prefix)
      : endpoint_(std::move(endpoint)), prefix_(std::move(prefix)) {}
  std::string Key(const std::string& name) const { return prefix_ + "/" + name; }
  // POSTs `body` to endpoint_ + path; *response gets the body. Streaming calls (watch) pass
  // `stop`, called with the data so far, which returns true when it has seen enough.
  Status Post(const std::string& path, const std::string& body, std::string* response,
              int timeout_ms, bool (*stop)(const std::string&, void*) = nullptr,
              void* stop_arg = nullptr) const;
  // Reads `key`: *found, *value, and the store's revision.
  Status Range(const std::string& key, bool* found, std::string* value, int64_t* revision) const;

  const std::string endpoint_;
  const std::string prefix_;
  std::string lease_;  // decimal lease ID, set by Open
};

}  // namespace rkv

#endif  // RKV_COMMON_EXCHANGE_ETCD_MAILBOX_H_
