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
// the pure functions of etcd_json.h (every field and type checked); no exception leaves any
// method of this class; a response over kMaxEtcdResponseBytes aborts its transfer; a watch
// stream is split into lines as it arrives and each line decoded once (work linear in the
// bytes, however etcd cuts them). Optional:
// TLS (https:// endpoint; etcd_cacert verifies the server, etcd_cert/etcd_key authenticate
// this side) and etcd v3 auth (etcd_user + etcd_password_file: /v3/auth/authenticate gives a
// token sent in the Authorization header; renewed once when etcd answers 401). A password is
// never sent in clear to a host other than the loopback (IsLoopbackHost). Never through a
// proxy: every request goes straight to the endpoint (http_proxy, https_proxy, ALL_PROXY and
// the like in the environment are ignored).
// Thread safety: one user thread plus one heartbeat thread (every call uses its own curl
// handle; the auth token is guarded by mu_; the rest is immutable after Open).
#ifndef RKV_COMMON_EXCHANGE_ETCD_MAILBOX_H_
#define RKV_COMMON_EXCHANGE_ETCD_MAILBOX_H_

#include <memory>
#include <string>

#include "common/exchange/etcd_json.h"
#include "common/exchange/mailbox.h"
#include "common/mutex.h"
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

  // Checks the options' combination (scheme, TLS files, user/password, cleartext password)
  // without contacting etcd. Pure, for tests. The endpoint is parsed with libcurl's URL parser
  // (the one that picks the host curl connects to) and must have no userinfo, query or
  // fragment; a password goes over plain http only to a host IsLoopbackHost accepts.
  [[nodiscard]] static Status CheckOptions(const ExchangeOptions& o);
  // The host as libcurl's URL parser gives it: a numeric IPv4 address in 127.0.0.0/8, ::1
  // (bracketed or not) or exactly "localhost". Any other name, even "127.x.example", is not.
  static bool IsLoopbackHost(const std::string& host);
  // Reads a password file with the token file's checks (common/secret_file.h: parent
  // directory not writable by others, O_NOFOLLOW, regular file, owned by this user, mode & 077
  // == 0), at most 4 KiB; one trailing newline (LF or CRLF) is dropped.
  [[nodiscard]] static Status ReadPasswordFile(const std::string& path, std::string* password);

  // Streaming calls (watch) hand each complete line (one message; EtcdLineSplitter) to a
  // consumer as it arrives; the consumer returns true to end the transfer. The unterminated
  // rest is left in the response.
  using Consumer = EtcdLineSplitter::OnLine;

 private:
  explicit EtcdMailbox(ExchangeOptions o) : o_(std::move(o)) {}
  std::string Key(const std::string& name) const { return o_.etcd_prefix + "/" + name; }
  // POSTs `body` to endpoint + path; *response gets the body (at most kMaxEtcdResponseBytes,
  // else an error). With auth, a 401 renews the token and retries once.
  Status Post(const std::string& path, const std::string& body, std::string* response,
              int timeout_ms, Consumer consume = nullptr, void* arg = nullptr);
  Status PostOnce(const std::string& path, const std::string& body, std::string* response,
                  int timeout_ms, Consumer consume, void* arg, long* http);
  Status Authenticate();
  // Reads `key`: *found, *value, and the store's revision.
  Status Range(const std::string& key, bool* found, std::string* value, int64_t* revision);

  const ExchangeOptions o_;
  std::string password_;  // set by Open when o_.etcd_user is set
  std::string lease_;     // decimal lease ID, set by Open
  Mutex mu_;
  std::string token_ GUARDED_BY(mu_);  // etcd auth token ("" without auth)
};

}  // namespace rkv

#endif  // RKV_COMMON_EXCHANGE_ETCD_MAILBOX_H_
