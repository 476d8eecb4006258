// SPDX-License-Identifier: Apache-2.0
#include "common/etcd/etcd_transport.h"

#include <curl/curl.h>

#include <algorithm>
#include <chrono>
#include <exception>
#include <memory>
#include <nlohmann/json.hpp>

#include "common/etcd/no_throw.h"

namespace rkv {
namespace {
using json = nlohmann::json;
using etcd_internal::Dump;
using etcd_internal::NoThrow;

struct Sink {
  Sink(std::string* d, EtcdTransport::Consumer c, void* a) : data(d), consume(c), arg(a) {}
  std::string* data;  // the body; for a stream, its unterminated last line
  EtcdTransport::Consumer consume;
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

// curl_easy_perform's equivalent for a stream, on a multi handle of its own, that looks
// between libcurl's steps (every kInterruptPollMs) at `interrupt` (may be null): once it is
// true (or throws) the transfer is abandoned (*interrupted; its connection closed); and, with
// header_ms > 0, at whether the answer's status line came within header_ms: etcd answers a
// watch at once, so a member that did not is treated as unreachable (CURLE_OPERATION_TIMEDOUT
// with no status) and the caller tries the next endpoint with the time left.
CURLcode PerformStream(CURL* c, const std::function<bool()>* interrupt, int header_ms,
                       bool* interrupted) {
  *interrupted = false;
  const auto header_deadline =
      std::chrono::steady_clock::now() + std::chrono::milliseconds(header_ms);
  const auto cut = [&] {
    if (interrupt == nullptr) return false;
    try {
      return (*interrupt)();
    } catch (...) {  // a caller's bug: ends the call, never unwinds through libcurl
      return true;
    }
  };
  if (cut()) {
    *interrupted = true;
    return CURLE_OK;
  }
  CURLM* m = curl_multi_init();
  if (m == nullptr) return CURLE_OUT_OF_MEMORY;
  if (curl_multi_add_handle(m, c) != CURLM_OK) {
    curl_multi_cleanup(m);
    return CURLE_FAILED_INIT;
  }
  CURLcode rc = CURLE_OK;
  for (;;) {
    int running = 0;
    if (curl_multi_perform(m, &running) != CURLM_OK) {
      rc = CURLE_FAILED_INIT;  // local (memory, a bad handle): not the member's fault
      break;
    }
    if (running == 0) {
      int queued = 0;
      while (CURLMsg* msg = curl_multi_info_read(m, &queued))
        if (msg->msg == CURLMSG_DONE) rc = msg->data.result;
      break;
    }
    if (cut()) {
      *interrupted = true;
      break;
    }
    if (header_ms > 0 && std::chrono::steady_clock::now() >= header_deadline) {
      long code = 0;
      curl_easy_getinfo(c, CURLINFO_RESPONSE_CODE, &code);
      if (code == 0) {
        rc = CURLE_OPERATION_TIMEDOUT;
        break;
      }
    }
    if (curl_multi_poll(m, nullptr, 0, EtcdTransport::kInterruptPollMs, nullptr) != CURLM_OK) {
      rc = CURLE_FAILED_INIT;
      break;
    }
  }
  curl_multi_remove_handle(m, c);
  curl_multi_cleanup(m);
  return rc;
}

// Failures after which another member may answer: it could not be reached, or it answered
// that it cannot serve (no leader, shutting down: the gateway's 502/503/504).
bool Unreachable(CURLcode rc) {
  switch (rc) {
    case CURLE_COULDNT_CONNECT:
    case CURLE_COULDNT_RESOLVE_HOST:
    case CURLE_SEND_ERROR:
    case CURLE_RECV_ERROR:
    case CURLE_GOT_NOTHING:
    case CURLE_OPERATION_TIMEDOUT:
      return true;
    default:
      return false;
  }
}

}  // namespace

Status EtcdTransport::Open(const EtcdSettings& o, std::unique_ptr<EtcdTransport>* out) {
  return NoThrow("open", [&]() -> Status {
    Status s = CheckSettings(o);
    if (!s.ok()) return s;
    if (!kCurlReady) return Status(Code::kIoError, "curl_global_init failed");
    std::unique_ptr<EtcdTransport> t(new EtcdTransport(o));
    if (!o.user.empty()) {
      s = ReadPasswordFile(o.password_file, &t->password_);
      // Any member will do: the first that answers.
      if (s.ok()) {
        for (size_t i = 0; i < o.endpoints.size(); ++i) {
          s = t->Authenticate(o.endpoints[i], 5000);
          if (s.ok()) {
            MutexLock l(&t->mu_);
            t->current_ = i;
            break;
          }
        }
      }
      if (!s.ok()) return s;
    }
    *out = std::move(t);
    return Status::Ok();
  });
}

std::string EtcdTransport::endpoint() const {
  MutexLock l(&mu_);
  return o_.endpoints[current_];
}

EtcdTransport::~EtcdTransport() {
  MutexLock l(&mu_);
  for (void* h : idle_) curl_easy_cleanup(static_cast<CURL*>(h));
  idle_.clear();
}

void* EtcdTransport::TakeHandle() {
  {
    MutexLock l(&mu_);
    if (!idle_.empty()) {
      void* h = idle_.back();
      idle_.pop_back();
      return h;
    }
  }
  return curl_easy_init();
}

void EtcdTransport::GiveBack(void* handle) {
  CURL* c = static_cast<CURL*>(handle);
  curl_easy_reset(c);  // options back to defaults; its open connections are kept
  // No signal use by libcurl, in its cleanup either (a process-wide SIGPIPE handler swap).
  curl_easy_setopt(c, CURLOPT_NOSIGNAL, 1L);
  {
    MutexLock l(&mu_);
    if (idle_.size() < kMaxIdleHandles) {
      idle_.push_back(c);
      return;
    }
  }
  curl_easy_cleanup(c);
}

uint64_t EtcdTransport::failovers() const {
  MutexLock l(&mu_);
  return failovers_;
}

Status EtcdTransport::Authenticate(const std::string& endpoint, int timeout_ms) {
  std::string resp, token;
  long http = 0;
  bool unreachable = false;
  Status s = PostOnce(endpoint, "/v3/auth/authenticate",
                      Dump(json{{"name", o_.user}, {"password", password_}}), &resp, timeout_ms,
                      nullptr, nullptr, &http, &unreachable);
  if (s.ok() && http != 200)
    s = Status(Code::kIoError, "etcd authenticate as '" + EtcdSnippet(o_.user, 64) + "' at " +
                                   endpoint + ": HTTP " + std::to_string(http) + ": " +
                                   EtcdSnippet(resp));
  if (s.ok()) s = ParseEtcdAuthenticateResponse(resp, &token);
  if (!s.ok()) return s;
  MutexLock l(&mu_);
  token_ = std::move(token);
  return Status::Ok();
}

Status EtcdTransport::Post(const std::string& path, const std::string& body, std::string* response,
                           int timeout_ms, Consumer consume, void* arg,
                           const std::function<bool()>* interrupt) {
  posts_.fetch_add(1, std::memory_order_relaxed);
  if (path == "/v3/kv/range") range_posts_.fetch_add(1, std::memory_order_relaxed);
  return NoThrow("request", [&]() -> Status {
    const size_t n = o_.endpoints.size();
    const auto deadline =
        std::chrono::steady_clock::now() + std::chrono::milliseconds(std::max(timeout_ms, 1));
    size_t start;
    {
      MutexLock l(&mu_);
      start = current_;
    }
    Status last;
    for (size_t i = 0; i < n; ++i) {
      const size_t at = (start + i) % n;
      const std::string& ep = o_.endpoints[at];
      const int left = int(std::chrono::duration_cast<std::chrono::milliseconds>(
                               deadline - std::chrono::steady_clock::now())
                               .count());
      if (left <= 0) break;
      // A request gives each remaining endpoint a share of what is left, so that a member that
      // hangs (stopped, cut off) leaves time for the others; a stream waits its whole time.
      const int attempt = consume != nullptr || i + 1 == n
                              ? left
                              : std::max(std::min(left, 1000), left / int(n - i));
      long http = 0;
      bool unreachable = false;
      // A stream with other members to try: one that sends no answer within half a second
      // (or half the time left) is given up for the next (PerformStream).
      const int header_ms = consume != nullptr && i + 1 < n ? std::min(500, left / 2) : 0;
      Status s = PostOnce(ep, path, body, response, attempt, consume, arg, &http, &unreachable,
                          interrupt, header_ms);
      if (s.ok() && http == 401 && !o_.user.empty()) {  // the token expired: renew, retry
        const auto remaining = [&] {
          return int(std::chrono::duration_cast<std::chrono::milliseconds>(
                         deadline - std::chrono::steady_clock::now())
                         .count());
        };
        s = remaining() > 0 ? Authenticate(ep, std::min(5000, remaining()))
                            : Status(Code::kTimeout, "etcd " + path + ": no time left");
        if (s.ok() && remaining() > 0)
          s = PostOnce(ep, path, body, response, std::min(attempt, remaining()), consume, arg,
                       &http, &unreachable, interrupt, header_ms);
      }
      if (s.ok() && (http == 502 || http == 503 || http == 504)) {
        unreachable = true;
        s = Status(Code::kIoError, "etcd " + ep + path + ": HTTP " + std::to_string(http) + ": " +
                                       EtcdSnippet(*response));
      }
      if (!s.ok() && unreachable) {
        last = s;
        // The next request starts at the next member, even if this one fails everywhere.
        MutexLock l(&mu_);
        if (current_ == at) current_ = (at + 1) % n;
        continue;
      }
      if (at != start) {
        MutexLock l(&mu_);
        current_ = at;
        ++failovers_;
      }
      if (s.ok() && http != 200 && http != 0)
        return Status(Code::kIoError, "etcd " + ep + path + ": HTTP " + std::to_string(http) +
                                          ": " + EtcdSnippet(*response));
      return s;
    }
    if (last.ok()) last = Status(Code::kTimeout, "etcd " + path + ": no time left");
    return n > 1 ? Status(last.code(), last.message() + " (every endpoint tried)") : last;
  });
}

// *http gets the status code; 0 when a consumer ended the transfer (that is a success).
Status EtcdTransport::PostOnce(const std::string& endpoint, const std::string& path,
                               const std::string& body, std::string* response, int timeout_ms,
                               Consumer consume, void* arg, long* http, bool* unreachable,
                               const std::function<bool()>* interrupt, int header_ms) {
  *http = 0;
  *unreachable = false;
  // A stream's connection never outlives it (ended, timed out or interrupted mid-answer), and
  // a pooled handle added to a multi handle would lose its kept connection: streams get a
  // handle of their own.
  const bool stream = consume != nullptr;
  CURL* c = stream ? curl_easy_init() : static_cast<CURL*>(TakeHandle());
  if (c == nullptr) return Status(Code::kIoError, "curl_easy_init failed");
  const std::string url = endpoint + path;
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
  // http:// endpoint, which CheckSettings allows only because it stays on this host).
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
  curl_easy_setopt(c, CURLOPT_CONNECTTIMEOUT_MS, long(std::min(timeout_ms, 2000)));
  curl_easy_setopt(c, CURLOPT_NOSIGNAL, 1L);
  if (!o_.cacert.empty()) curl_easy_setopt(c, CURLOPT_CAINFO, o_.cacert.c_str());
  if (!o_.cert.empty()) curl_easy_setopt(c, CURLOPT_SSLCERT, o_.cert.c_str());
  if (!o_.key.empty()) curl_easy_setopt(c, CURLOPT_SSLKEY, o_.key.c_str());
  bool interrupted = false;
  CURLcode rc =
      stream ? PerformStream(c, interrupt, header_ms, &interrupted) : curl_easy_perform(c);
  long code = 0;
  curl_easy_getinfo(c, CURLINFO_RESPONSE_CODE, &code);
  long connects = 0;
  if (curl_easy_getinfo(c, CURLINFO_NUM_CONNECTS, &connects) == CURLE_OK && connects > 0)
    connects_.fetch_add(uint64_t(connects), std::memory_order_relaxed);
  // Before the headers go: the handle still points at them until its reset or cleanup.
  if (stream) {
    curl_easy_cleanup(c);
  } else {
    GiveBack(c);
  }
  curl_slist_free_all(headers);
  if (interrupted) return Status(Code::kTimeout, "etcd " + url + ": interrupted");
  if (sink.stopped) return Status::Ok();
  if (sink.overflow || rc == CURLE_FILESIZE_EXCEEDED)
    return Status(Code::kProtocolError, "etcd " + url + ": response larger than " +
                                            std::to_string(kMaxEtcdResponseBytes) +
                                            " bytes; transfer aborted");
  if (sink.failed) return Status(Code::kIoError, "etcd " + url + ": out of memory");
  if (rc == CURLE_OPERATION_TIMEDOUT && consume != nullptr && code != 0)
    return Status(Code::kTimeout, "etcd watch timed out");  // the stream was up: not a failover
  if (rc != CURLE_OK) {
    // A stream that delivered lines is not restarted elsewhere (they would come twice).
    *unreachable = Unreachable(rc) && sink.lines.lines() == 0;
    return Status(rc == CURLE_OPERATION_TIMEDOUT ? Code::kTimeout : Code::kIoError,
                  "etcd " + url + ": " + curl_easy_strerror(rc) +
                      (rc == CURLE_COULDNT_CONNECT ? " (is etcd running?)" : ""));
  }
  *http = code;
  return Status::Ok();
}

}  // namespace rkv
