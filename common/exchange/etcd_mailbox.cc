// SPDX-License-Identifier: Apache-2.0
#include "common/exchange/etcd_mailbox.h"

#include <arpa/inet.h>
#include <curl/curl.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <exception>
#include <memory>
#include <nlohmann/json.hpp>

#include "common/exchange/etcd_json.h"
#include "common/secret_file.h"
#include "common/verbs/rdma.h"

namespace rkv {
namespace {
using json = nlohmann::json;

constexpr size_t kMaxPasswordBytes = 4096;
constexpr int kListLimit = 4096;  // keys per List: well inside kMaxEtcdResponseBytes

// Request bodies: invalid UTF-8 (a password, a prefix) is replaced, never thrown about.
std::string Dump(const json& j) { return j.dump(-1, ' ', false, json::error_handler_t::replace); }

// Runs `f`, turning any exception (bad_alloc; a bug) into a Status: none leaves this class.
template <class F>
Status NoThrow(const char* what, F f) {
  try {
    return f();
  } catch (const std::exception& e) {
    return Status(Code::kIoError, std::string("etcd ") + what + ": unexpected: " + e.what());
  } catch (...) {
    return Status(Code::kIoError, std::string("etcd ") + what + ": unexpected exception");
  }
}

struct Sink {
  Sink(std::string* d, EtcdMailbox::Consumer c, void* a) : data(d), consume(c), arg(a) {}
  std::string* data;  // the body; for a stream, its unterminated last line
  EtcdMailbox::Consumer consume;
  void* arg;
  EtcdLineSplitter lines;  // for a stream: linear however the body is cut
  bool stopped = false;    // the consumer had enough
  bool overflow = false;   // more than kMaxEtcdResponseBytes unconsumed
  bool failed = false;     // an exception in the callback (allocation)
};

size_t Write(char* p, size_t size, size_t n, void* user) {
  auto* s = static_cast<Sink*>(user);
  const size_t len = size * n;
  try {
    if (s->data->size() + len > kMaxEtcdResponseBytes) {
      s->overflow = true;
      return 0;  // aborts the transfer (CURLE_WRITE_ERROR)
    }
    if (s->consume == nullptr) {
      s->data->append(p, len);
    } else if (s->lines.Feed(s->data, std::string_view(p, len), s->consume, s->arg)) {
      s->stopped = true;
      return 0;
    }
  } catch (...) {  // nothing may unwind through libcurl
    s->failed = true;
    return 0;
  }
  return len;
}

const bool kCurlReady = curl_global_init(CURL_GLOBAL_DEFAULT) == CURLE_OK;

// Parses an etcd endpoint with libcurl's URL parser, the one curl_easy_perform uses, into
// *host (as curl connects to it: "[::1]" keeps its brackets). Refuses an endpoint with a
// userinfo, query or fragment: none has a use here, and each can hide the host that curl
// connects to from a reader. The raw characters are refused too, since the request paths
// are appended to the endpoint and an empty query or fragment is not reported as a part.
Status ParseEndpoint(const std::string& url, std::string* host) {
  auto bad = [&](const std::string& why) {
    return Status(Code::kInvalidArgument, "--etcd=" + url + ": " + why);
  };
  std::unique_ptr<CURLU, void (*)(CURLU*)> u(curl_url(), curl_url_cleanup);
  if (u == nullptr) return Status(Code::kIoError, "curl_url: out of memory");
  CURLUcode rc = curl_url_set(u.get(), CURLUPART_URL, url.c_str(), 0);
  if (rc != CURLUE_OK) {
#if LIBCURL_VERSION_NUM >= 0x075000
    return bad(std::string("not a valid URL: ") + curl_url_strerror(rc));
#else
    return bad("not a valid URL (curl URL error " + std::to_string(int(rc)) + ")");
#endif
  }
  struct Part {
    CURLUPart part;
    const char* name;
  };
  for (const Part& p : {Part{CURLUPART_USER, "a user name (userinfo before '@')"},
                        Part{CURLUPART_PASSWORD, "a password (userinfo before '@')"},
                        Part{CURLUPART_OPTIONS, "login options (userinfo before '@')"},
                        Part{CURLUPART_QUERY, "a query ('?...')"},
                        Part{CURLUPART_FRAGMENT, "a fragment ('#...')"}}) {
    char* v = nullptr;
    rc = curl_url_get(u.get(), p.part, &v, 0);
    curl_free(v);
    if (rc == CURLUE_OK)
      return bad(std::string("has ") + p.name + "; give only http(s)://HOST:PORT");
  }
  const size_t odd = url.find_first_of("@?#");
  if (odd != std::string::npos)
    return bad(std::string("has ") +
               (url[odd] == '@'   ? "userinfo ('@')"
                : url[odd] == '?' ? "a query ('?')"
                                  : "a fragment ('#')") +
               "; give only http(s)://HOST:PORT");
  char* h = nullptr;
  rc = curl_url_get(u.get(), CURLUPART_HOST, &h, 0);
  if (rc != CURLUE_OK || h == nullptr) {
    curl_free(h);
    return bad("no host");
  }
  *host = h;
  curl_free(h);
  return Status::Ok();
}

}  // namespace

bool EtcdMailbox::IsLoopbackHost(const std::string& host) {
  if (host == "localhost") return true;
  std::string h = host;
  if (h.size() >= 2 && h.front() == '[' && h.back() == ']') h = h.substr(1, h.size() - 2);
  in_addr a4{};
  if (inet_pton(AF_INET, h.c_str(), &a4) == 1) return (ntohl(a4.s_addr) >> 24) == 127;
  in6_addr a6{};
  return inet_pton(AF_INET6, h.c_str(), &a6) == 1 && IN6_IS_ADDR_LOOPBACK(&a6);
}

namespace {
bool StartsWith(const std::string& s, const char* p) { return s.rfind(p, 0) == 0; }

// A watch: the gateway streams one JSON message per line.
struct WatchState {
  std::string key;
  std::string value;
  bool found = false;
  Status status;  // an error message or a canceled watch
};

// Handles one complete message; true when the wait is over (found, or failed).
bool WatchHandle(WatchState* w, std::string_view msg) {
  if (msg.find_first_not_of(" \t\r\n") == std::string_view::npos) return false;
  bool found = false;
  std::string v;
  Status s = ParseEtcdWatchMessage(msg, w->key, &found, &v);
  if (!s.ok()) {
    w->status = s;
    return true;
  }
  if (found) {
    w->found = true;
    w->value = std::move(v);
  }
  return found;
}

// One line of the stream. A message is decoded only once its line is complete (an
// unterminated last one when the stream ends, in WaitFor): never the buffer again and again.
bool WatchConsume(std::string_view line, void* arg) {
  return WatchHandle(static_cast<WatchState*>(arg), line);
}
}  // namespace

Status EtcdMailbox::CheckOptions(const ExchangeOptions& o) {
  auto bad = [](const std::string& m) { return Status(Code::kInvalidArgument, m); };
  const std::string& ep = o.etcd_endpoint;
  if (ep.empty()) return bad("the etcd exchange needs --etcd=http(s)://HOST:PORT");
  const bool https = StartsWith(ep, "https://");
  if (!https && !StartsWith(ep, "http://"))
    return bad("--etcd=" + ep + ": expected http://HOST:PORT or https://HOST:PORT");
  std::string host;
  Status s = ParseEndpoint(ep, &host);
  if (!s.ok()) return s;
  if (!https && (!o.etcd_cacert.empty() || !o.etcd_cert.empty() || !o.etcd_key.empty()))
    return bad("--etcd_cacert/--etcd_cert/--etcd_key need an https:// endpoint (--etcd=" + ep +
               ")");
  if (o.etcd_cert.empty() != o.etcd_key.empty())
    return bad("--etcd_cert and --etcd_key go together (a client certificate and its key)");
  if (o.etcd_user.empty() != o.etcd_password_file.empty())
    return bad("--etcd_user and --etcd_password_file go together");
  if (!o.etcd_user.empty() && !https && !IsLoopbackHost(host))
    return bad("refusing to send the etcd password in clear to " + host +
               " (not 127.0.0.0/8, ::1 or localhost): use an https:// endpoint");
  return Status::Ok();
}

Status EtcdMailbox::ReadPasswordFile(const std::string& path, std::string* password) {
  const std::string what = "etcd password file '" + path + "'";
  // The token file's rules (common/secret_file.h): directory, no-follow, regular, owner, mode.
  std::string buf;
  Status s = ReadSecretFile(path, what, kMaxPasswordBytes, &buf);
  if (!s.ok()) return s;
  if (!buf.empty() && buf.back() == '\n') buf.pop_back();
  if (!buf.empty() && buf.back() == '\r') buf.pop_back();
  if (buf.empty()) return Status(Code::kInvalidArgument, what + ": empty");
  *password = std::move(buf);
  return Status::Ok();
}

Status EtcdMailbox::Open(const ExchangeOptions& o, std::unique_ptr<Mailbox>* out) {
  return NoThrow("open", [&]() -> Status {
    Status s = CheckOptions(o);
    if (!s.ok()) return s;
    if (!kCurlReady) return Status(Code::kIoError, "curl_global_init failed");
    ExchangeOptions opts = o;
    if (opts.etcd_prefix.empty()) opts.etcd_prefix = "/rkv";
    std::unique_ptr<EtcdMailbox> m(new EtcdMailbox(std::move(opts)));
    if (!o.etcd_user.empty()) {
      s = ReadPasswordFile(o.etcd_password_file, &m->password_);
      if (s.ok()) s = m->Authenticate();
      if (!s.ok()) return s;
    }
    std::string resp;
    s = m->Post("/v3/lease/grant", Dump(json{{"TTL", kStaleMs / 1000}}), &resp, 5000);
    if (s.ok()) s = ParseEtcdLeaseGrantResponse(resp, &m->lease_);
    if (!s.ok()) return s;
    *out = std::move(m);
    return Status::Ok();
  });
}

EtcdMailbox::~EtcdMailbox() {
  if (lease_.empty()) return;
  std::string resp;
  (void)NoThrow("lease revoke", [&] {
    return Post("/v3/lease/revoke", Dump(json{{"ID", lease_}}), &resp, 2000);
  });
}

Status EtcdMailbox::Authenticate() {
  std::string resp, token;
  long http = 0;
  Status s =
      PostOnce("/v3/auth/authenticate", Dump(json{{"name", o_.etcd_user}, {"password", password_}}),
               &resp, 5000, nullptr, nullptr, &http);
  if (s.ok() && http != 200)
    s = Status(Code::kIoError, "etcd authenticate as '" + EtcdSnippet(o_.etcd_user, 64) +
                                   "': HTTP " + std::to_string(http) + ": " + EtcdSnippet(resp));
  if (s.ok()) s = ParseEtcdAuthenticateResponse(resp, &token);
  if (!s.ok()) return s;
  MutexLock l(&mu_);
  token_ = std::move(token);
  return Status::Ok();
}

Status EtcdMailbox::Post(const std::string& path, const std::string& body, std::string* response,
                         int timeout_ms, Consumer consume, void* arg) {
  long http = 0;
  Status s = PostOnce(path, body, response, timeout_ms, consume, arg, &http);
  if (s.ok() && http == 401 && !o_.etcd_user.empty()) {  // the token expired: renew, retry
    s = Authenticate();
    if (s.ok()) s = PostOnce(path, body, response, timeout_ms, consume, arg, &http);
  }
  if (s.ok() && http != 200 && http != 0)
    return Status(Code::kIoError, "etcd " + o_.etcd_endpoint + path + ": HTTP " +
                                      std::to_string(http) + ": " + EtcdSnippet(*response));
  return s;
}

// *http gets the status code; 0 when a consumer ended the transfer (that is a success).
Status EtcdMailbox::PostOnce(const std::string& path, const std::string& body,
                             std::string* response, int timeout_ms, Consumer consume, void* arg,
                             long* http) {
  *http = 0;
  CURL* c = curl_easy_init();
  if (c == nullptr) return Status(Code::kIoError, "curl_easy_init failed");
  const std::string url = o_.etcd_endpoint + path;
  std::string auth;
  if (path != "/v3/auth/authenticate") {
    MutexLock l(&mu_);
    if (!token_.empty()) auth = "Authorization: " + token_;
  }
  response->clear();
  Sink sink(response, consume, arg);
  curl_slist* headers = curl_slist_append(nullptr, "Content-Type: application/json");
  if (!auth.empty()) headers = curl_slist_append(headers, auth.c_str());
  curl_easy_setopt(c, CURLOPT_URL, url.c_str());
  // Never through a proxy: libcurl would otherwise honour http_proxy/https_proxy/ALL_PROXY
  // from the environment and send the password, token and records to it (in clear for an
  // http:// endpoint, which CheckOptions allows only because it stays on this host).
  curl_easy_setopt(c, CURLOPT_PROXY, "");
#if LIBCURL_VERSION_NUM >= 0x075500
  curl_easy_setopt(c, CURLOPT_PROTOCOLS_STR, "http,https");
#else
  curl_easy_setopt(c, CURLOPT_PROTOCOLS, long(CURLPROTO_HTTP | CURLPROTO_HTTPS));
#endif
  curl_easy_setopt(c, CURLOPT_POSTFIELDS, body.c_str());
  curl_easy_setopt(c, CURLOPT_POSTFIELDSIZE, long(body.size()));
  curl_easy_setopt(c, CURLOPT_HTTPHEADER, headers);
  curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, Write);
  curl_easy_setopt(c, CURLOPT_WRITEDATA, &sink);
  if (consume == nullptr)  // refused before the body, when the length is announced
    curl_easy_setopt(c, CURLOPT_MAXFILESIZE_LARGE, curl_off_t(kMaxEtcdResponseBytes));
  curl_easy_setopt(c, CURLOPT_TIMEOUT_MS, long(timeout_ms));
  curl_easy_setopt(c, CURLOPT_CONNECTTIMEOUT_MS, long(std::min(timeout_ms, 3000)));
  curl_easy_setopt(c, CURLOPT_NOSIGNAL, 1L);
  if (!o_.etcd_cacert.empty()) curl_easy_setopt(c, CURLOPT_CAINFO, o_.etcd_cacert.c_str());
  if (!o_.etcd_cert.empty()) curl_easy_setopt(c, CURLOPT_SSLCERT, o_.etcd_cert.c_str());
  if (!o_.etcd_key.empty()) curl_easy_setopt(c, CURLOPT_SSLKEY, o_.etcd_key.c_str());
  CURLcode rc = curl_easy_perform(c);
  long code = 0;
  curl_easy_getinfo(c, CURLINFO_RESPONSE_CODE, &code);
  curl_slist_free_all(headers);
  curl_easy_cleanup(c);
  if (sink.stopped) return Status::Ok();
  if (sink.overflow || rc == CURLE_FILESIZE_EXCEEDED)
    return Status(Code::kProtocolError, "etcd " + url + ": response larger than " +
                                            std::to_string(kMaxEtcdResponseBytes) +
                                            " bytes; transfer aborted");
  if (sink.failed) return Status(Code::kIoError, "etcd " + url + ": out of memory");
  if (rc == CURLE_OPERATION_TIMEDOUT && consume != nullptr)
    return Status(Code::kTimeout, "etcd watch timed out");
  if (rc != CURLE_OK)
    return Status(Code::kIoError, "etcd " + url + ": " + curl_easy_strerror(rc) +
                                      (rc == CURLE_COULDNT_CONNECT ? " (is etcd running?)" : ""));
  *http = code;
  return Status::Ok();
}

Status EtcdMailbox::Range(const std::string& key, bool* found, std::string* value,
                          int64_t* revision) {
  std::string resp;
  Status s = Post("/v3/kv/range", Dump(json{{"key", EncodeBase64(key)}}), &resp, 5000);
  EtcdRangeResponse r;
  if (s.ok()) s = ParseEtcdRangeResponse(resp, &r);
  if (!s.ok()) return s;
  *revision = r.revision;
  *found = false;
  for (EtcdKv& kv : r.kvs) {
    if (kv.key != key) continue;  // not what was asked for: ignored
    *value = std::move(kv.value);
    *found = true;
  }
  return Status::Ok();
}

Status EtcdMailbox::Put(const std::string& name, const std::string& bytes) {
  return NoThrow("put", [&]() -> Status {
    if (bytes.size() > kMaxEntryBytes)
      return Status(Code::kInvalidArgument,
                    "etcd put " + Key(name) + ": " + std::to_string(bytes.size()) +
                        " bytes, more than " + std::to_string(kMaxEntryBytes));
    std::string resp;
    return Post(
        "/v3/kv/put",
        Dump(json{
            {"key", EncodeBase64(Key(name))}, {"value", EncodeBase64(bytes)}, {"lease", lease_}}),
        &resp, 5000);
  });
}

Status EtcdMailbox::WaitFor(const std::string& name, std::string* bytes, int timeout_ms) {
  return NoThrow("wait", [&]() -> Status {
    bool found = false;
    int64_t rev = 0;
    std::string value;
    Status s = Range(Key(name), &found, &value, &rev);
    if (!s.ok()) return s;
    WatchState w;
    if (!found) {
      w.key = Key(name);
      json req = {{"create_request",
                   {{"key", EncodeBase64(w.key)}, {"start_revision", std::to_string(rev + 1)}}}};
      std::string resp;
      s = Post("/v3/watch", Dump(req), &resp, timeout_ms, WatchConsume, &w);
      if (!s.ok()) return s;
      if (!w.status.ok()) return w.status;
      if (!w.found && !resp.empty()) (void)WatchHandle(&w, resp);  // stream ended unterminated
      if (!w.status.ok()) return w.status;
      if (!w.found) return Status(Code::kTimeout, "no key " + Key(name));
      value = std::move(w.value);
    }
    if (value.size() > kMaxEntryBytes)
      return Status(Code::kProtocolError, "etcd " + Key(name) + ": " +
                                              std::to_string(value.size()) + " bytes, more than " +
                                              std::to_string(kMaxEntryBytes));
    *bytes = std::move(value);
    return Status::Ok();
  });
}

Status EtcdMailbox::List(const std::string& suffix, std::vector<std::string>* out) {
  out->clear();
  return NoThrow("list", [&]() -> Status {
    std::string start = o_.etcd_prefix + "/", end = start;
    end.back() = char(end.back() + 1);
    std::string resp;
    Status s = Post("/v3/kv/range",
                    Dump(json{{"key", EncodeBase64(start)},
                              {"range_end", EncodeBase64(end)},
                              {"keys_only", true},
                              {"limit", std::to_string(kListLimit)}}),
                    &resp, 5000);
    EtcdRangeResponse r;
    if (s.ok()) s = ParseEtcdRangeResponse(resp, &r);
    if (!s.ok()) return s;
    for (const EtcdKv& kv : r.kvs) {
      if (kv.key.size() <= start.size() || kv.key.compare(0, start.size(), start) != 0) continue;
      std::string n = kv.key.substr(start.size());
      if (n.size() > suffix.size() &&
          n.compare(n.size() - suffix.size(), suffix.size(), suffix) == 0)
        out->push_back(n);
    }
    return Status::Ok();
  });
}

bool EtcdMailbox::Alive(const std::string& name) {
  bool found = false;
  Status s = NoThrow("alive", [&] {
    std::string v;
    int64_t rev = 0;
    return Range(Key(name), &found, &v, &rev);
  });
  // An unreachable etcd is not proof that the peer left: report alive.
  return !s.ok() || found;
}

void EtcdMailbox::Remove(const std::string& name) {
  std::string resp;
  (void)NoThrow("remove", [&] {
    return Post("/v3/kv/deleterange", Dump(json{{"key", EncodeBase64(Key(name))}}), &resp, 2000);
  });
}

void EtcdMailbox::Heartbeat() {
  std::string resp;
  (void)NoThrow("keepalive", [&] {
    return Post("/v3/lease/keepalive", Dump(json{{"ID", lease_}}), &resp, 2000);
  });
}

}  // namespace rkv
