// SPDX-License-Identifier: Apache-2.0
// EtcdTransport: HTTP POSTs of JSON to etcd's v3 gateway (/v3/kv/*, /v3/lease/*, /v3/watch,
// /v3/auth/authenticate) with libcurl, over one or more endpoints of one etcd cluster.
//
// Endpoints: a request goes to the endpoint that answered last; when that one cannot be
// reached (connect, send or receive failure, or no answer before the request's share of its
// deadline), the next is tried, each at most once per request. etcd itself keeps the members
// consistent: any member answers for the cluster (a member cut off from its quorum answers with
// an error, which is returned, not failed over). A request that reached a member whose answer
// was lost may run twice: callers make writes idempotent or guard them with a transaction.
// Security (issue 12): what answers at an endpoint is untrusted. A response over
// kMaxEtcdResponseBytes aborts its transfer; a stream is split into lines as it arrives
// (EtcdLineSplitter: work linear in the bytes). TLS (https:// endpoints; cacert verifies the
// server, cert/key authenticate this side) and etcd v3 auth (user + password_file:
// /v3/auth/authenticate gives a token sent in the Authorization header; renewed once when etcd
// answers 401). A password is never sent in clear to a host other than the loopback
// (IsLoopbackHost). Never through a proxy (http_proxy, ALL_PROXY and the like are ignored).
// Connections: a request takes an idle curl handle (or makes one) and gives it back after, so
// its connection stays open for the next request (no TCP connect or TLS handshake per request;
// libcurl reconnects if etcd closed it meanwhile). At most kMaxIdleHandles are kept. A stream
// (a watch) has a handle and connection of its own, closed when it ends: it runs on a curl
// multi handle that looks every kInterruptPollMs at the caller's interrupt and, with another
// member to try, at whether etcd answered within 500 ms (a member that did not is skipped).
// Thread safety: Post may be called from several threads at once (each call uses a curl handle
// no other call uses meanwhile; the token, the endpoint in use and the idle handles are
// guarded by mu_). No exception leaves a method.
#ifndef RKV_COMMON_ETCD_ETCD_TRANSPORT_H_
#define RKV_COMMON_ETCD_ETCD_TRANSPORT_H_

#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "common/etcd/etcd_json.h"
#include "common/mutex.h"
#include "rkv/status.h"

namespace rkv {

// Where etcd is and how to talk to it.
struct EtcdSettings {
  std::vector<std::string> endpoints;  // http(s)://HOST:PORT each, members of one cluster
  std::string cacert;                  // CA bundle that verifies etcd's certificate
  std::string cert, key;               // client certificate and key (PEM), together
  std::string user, password_file;     // etcd v3 auth, together
};

class EtcdTransport {
 public:
  // Checks the settings (schemes, TLS files, user/password, cleartext password) without
  // contacting etcd. Pure. Each endpoint is parsed with libcurl's URL parser and must have no
  // userinfo, query or fragment; all are http or all https; a password goes over plain http
  // only to hosts IsLoopbackHost accepts. `flag` names the option in messages ("--etcd").
  [[nodiscard]] static Status CheckSettings(const EtcdSettings& o, const char* flag = "--etcd");
  // A numeric IPv4 address in 127.0.0.0/8, ::1 (bracketed or not) or exactly "localhost".
  static bool IsLoopbackHost(const std::string& host);
  // Reads a password file with the token file's checks (common/secret_file.h), at most 4 KiB;
  // one trailing newline (LF or CRLF) is dropped.
  [[nodiscard]] static Status ReadPasswordFile(const std::string& path, std::string* password);

  // Checks the settings, reads the password and authenticates (with a user). Contacts etcd only
  // with a user.
  [[nodiscard]] static Status Open(const EtcdSettings& o, std::unique_ptr<EtcdTransport>* out);

  // Each complete line of a streamed answer (watch, keepalive) goes to a consumer as it
  // arrives; it returns true to end the transfer (a success). The unterminated rest is left in
  // the response.
  using Consumer = EtcdLineSplitter::OnLine;
  // POSTs `body` to path at an endpoint; *response gets the body (at most
  // kMaxEtcdResponseBytes). HTTP statuses other than 200 are errors naming the endpoint. A
  // stream that ends by its deadline is kTimeout (not failed over).
  // interrupt (may be null; must not throw): looked at every kInterruptPollMs while the
  // request runs; once it returns true the transfer ends, kTimeout "interrupted" (so a long
  // watch call can still end promptly when its caller has something else to do).
  [[nodiscard]] Status Post(const std::string& path, const std::string& body, std::string* response,
                            int timeout_ms, Consumer consume = nullptr, void* arg = nullptr,
                            const std::function<bool()>* interrupt = nullptr);
  static constexpr int kInterruptPollMs = 20;
  // The endpoint requests go to now.
  std::string endpoint() const;
  const EtcdSettings& settings() const { return o_; }
  // Requests that moved to another endpoint because one could not be reached.
  uint64_t failovers() const;
  // Post calls made (each a request to etcd, retries not counted): what a component costs etcd.
  uint64_t posts() const { return posts_.load(std::memory_order_relaxed); }
  // Of those, reads (/v3/kv/range).
  uint64_t range_posts() const { return range_posts_.load(std::memory_order_relaxed); }
  // Connections opened to etcd (libcurl's CURLINFO_NUM_CONNECTS, summed).
  uint64_t connects() const { return connects_.load(std::memory_order_relaxed); }
  ~EtcdTransport();
  EtcdTransport(const EtcdTransport&) = delete;
  EtcdTransport& operator=(const EtcdTransport&) = delete;

 private:
  explicit EtcdTransport(EtcdSettings o) : o_(std::move(o)) {}
  Status Authenticate(const std::string& endpoint, int timeout_ms);
  // One POST to one endpoint. *http gets the status (0 when a consumer ended the transfer);
  // *unreachable: the endpoint could not be reached (worth trying another).
  Status PostOnce(const std::string& endpoint, const std::string& path, const std::string& body,
                  std::string* response, int timeout_ms, Consumer consume, void* arg, long* http,
                  bool* unreachable, const std::function<bool()>* interrupt = nullptr,
                  int header_ms = 0);

  const EtcdSettings o_;
  std::string password_;  // set by Open with a user
  mutable Mutex mu_;
  std::string token_ GUARDED_BY(mu_);   // etcd auth token ("" without auth)
  size_t current_ GUARDED_BY(mu_) = 0;  // index into o_.endpoints
  uint64_t failovers_ GUARDED_BY(mu_) = 0;
  static constexpr size_t kMaxIdleHandles = 8;
  void* TakeHandle();                        // an idle curl handle, or a new one (null: none)
  void GiveBack(void* handle);               // reset; kept if fewer than kMaxIdleHandles are idle
  std::vector<void*> idle_ GUARDED_BY(mu_);  // CURL* handles, their connections open
  std::atomic<uint64_t> connects_{0};
  std::atomic<uint64_t> posts_{0};
  std::atomic<uint64_t> range_posts_{0};
};

}  // namespace rkv

#endif  // RKV_COMMON_ETCD_ETCD_TRANSPORT_H_
