// SPDX-License-Identifier: Apache-2.0
// EtcdMailbox: a Mailbox in etcd (the `etcd` exchange method), spoken to through etcd's v3
// JSON gateway (HTTP POST of JSON to /v3/kv/*, /v3/lease/*, /v3/watch, /v3/auth/authenticate;
// keys and values base64) with libcurl and nlohmann::json. Entries live under
// "<prefix>/<name>", all attached to one lease of this mailbox (TTL kStaleMs): Heartbeat()
// keeps the lease alive, the destructor revokes it (deleting the entries), and a dead
// process's entries expire with it. WaitFor reads the key and, if absent, watches it from the
// next revision (no polling).
//
// Security (issue 12): what answers at the endpoint is untrusted. Its answers are decoded by
// the pure functions of common/etcd/etcd_json.h (every field and type checked); no exception
// leaves any method of this class; the transport (common/etcd/etcd_transport.h: TLS, etcd
// auth, no proxy, bounded responses, streams split into lines as they arrive) is shared with
// the cluster's etcd client.
// Thread safety: one user thread plus one heartbeat thread (the transport is thread-safe; the
// rest is immutable after Open).
#ifndef RKV_COMMON_EXCHANGE_ETCD_MAILBOX_H_
#define RKV_COMMON_EXCHANGE_ETCD_MAILBOX_H_

#include <memory>
#include <string>

#include "common/etcd/etcd_json.h"
#include "common/etcd/etcd_transport.h"
#include "common/exchange/mailbox.h"
#include "rkv/connection_params.h"

namespace rkv {

class EtcdMailbox : public Mailbox {
 public:
  // Uses o.etcd_endpoint, etcd_prefix and the etcd security fields of `o`.
  [[nodiscard]] static Status Open(const ExchangeOptions& o, std::unique_ptr<Mailbox>* out);
  ~EtcdMailbox() override;
  Status Put(const std::string& name, const std::string& bytes) override;
  Status WaitFor(const std::string& name, std::string* bytes, int timeout_ms) override;
  Status List(const std::string& suffix, std::vector<std::string>* out) override;
  bool Alive(const std::string& name) override;
  void Remove(const std::string& name) override;
  void Heartbeat() override;
  std::string Describe(const std::string& name) const override {
    return "etcd " + o_.etcd_endpoint + " " + Key(name);
  }

  // Checks the options' combination without contacting etcd (EtcdTransport::CheckSettings).
  [[nodiscard]] static Status CheckOptions(const ExchangeOptions& o) {
    return EtcdTransport::CheckSettings(SettingsOf(o));
  }
  static bool IsLoopbackHost(const std::string& host) {
    return EtcdTransport::IsLoopbackHost(host);
  }
  [[nodiscard]] static Status ReadPasswordFile(const std::string& path, std::string* password) {
    return EtcdTransport::ReadPasswordFile(path, password);
  }
  // The transport settings of the exchange options (one endpoint).
  static EtcdSettings SettingsOf(const ExchangeOptions& o);

  // Streaming calls (watch) hand each complete line (one message; EtcdLineSplitter) to a
  // consumer as it arrives; the consumer returns true to end the transfer. The unterminated
  // rest is left in the response.
  using Consumer = EtcdTransport::Consumer;

 private:
  EtcdMailbox(ExchangeOptions o, std::unique_ptr<EtcdTransport> t)
      : o_(std::move(o)), transport_(std::move(t)) {}
  std::string Key(const std::string& name) const { return o_.etcd_prefix + "/" + name; }
  // EtcdTransport::Post.
  Status Post(const std::string& path, const std::string& body, std::string* response,
              int timeout_ms, Consumer consume = nullptr, void* arg = nullptr);
  // Reads `key`: *found, *value, and the store's revision.
  Status Range(const std::string& key, bool* found, std::string* value, int64_t* revision);

  const ExchangeOptions o_;
  const std::unique_ptr<EtcdTransport> transport_;
  std::string lease_;  // decimal lease ID, set by Open
};

}  // namespace rkv

#endif  // RKV_COMMON_EXCHANGE_ETCD_MAILBOX_H_
