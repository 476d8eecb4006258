// SPDX-License-Identifier: Apache-2.0
// EtcdTransport (common/etcd/etcd_transport.h): the settings' checks, made without contacting
// etcd: endpoints (parsed with libcurl's URL parser), TLS files, the password file and where a
// password may go in clear.
#include <arpa/inet.h>
#include <curl/curl.h>
#include <netinet/in.h>

#include <memory>
#include <string>

#include "common/etcd/etcd_transport.h"
#include "common/secret_file.h"

namespace rkv {
namespace {

constexpr size_t kMaxPasswordBytes = 4096;

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

bool StartsWith(const std::string& s, const char* p) { return s.rfind(p, 0) == 0; }

}  // namespace

bool EtcdTransport::IsLoopbackHost(const std::string& host) {
  if (host == "localhost") return true;
  std::string h = host;
  if (h.size() >= 2 && h.front() == '[' && h.back() == ']') h = h.substr(1, h.size() - 2);
  in_addr a4{};
  if (inet_pton(AF_INET, h.c_str(), &a4) == 1) return (ntohl(a4.s_addr) >> 24) == 127;
  in6_addr a6{};
  return inet_pton(AF_INET6, h.c_str(), &a6) == 1 && IN6_IS_ADDR_LOOPBACK(&a6);
}

Status EtcdTransport::CheckSettings(const EtcdSettings& o, const char* flag) {
  auto bad = [](const std::string& m) { return Status(Code::kInvalidArgument, m); };
  const std::string f = flag;
  if (o.endpoints.empty()) return bad("etcd needs " + f + "=http(s)://HOST:PORT");
  if (o.endpoints.size() > 16) return bad(f + ": more than 16 etcd endpoints");
  bool any_https = false, any_http = false;
  std::vector<std::string> hosts;
  for (const std::string& ep : o.endpoints) {
    const bool https = StartsWith(ep, "https://");
    if (!https && !StartsWith(ep, "http://"))
      return bad(f + "=" + ep + ": expected http://HOST:PORT or https://HOST:PORT");
    (https ? any_https : any_http) = true;
    std::string host;
    Status s = ParseEndpoint(ep, &host);
    if (!s.ok()) return s;
    hosts.push_back(host);
  }
  if (any_https && any_http) return bad(f + ": mixes http:// and https:// endpoints");
  const std::string& ep = o.endpoints.front();
  if (!any_https && (!o.cacert.empty() || !o.cert.empty() || !o.key.empty()))
    return bad("--etcd_cacert/--etcd_cert/--etcd_key need an https:// endpoint (" + f + "=" + ep +
               ")");
  if (o.cert.empty() != o.key.empty())
    return bad("--etcd_cert and --etcd_key go together (a client certificate and its key)");
  if (o.user.empty() != o.password_file.empty())
    return bad("--etcd_user and --etcd_password_file go together");
  if (!o.user.empty() && !any_https) {
    for (const std::string& host : hosts)
      if (!IsLoopbackHost(host))
        return bad("refusing to send the etcd password in clear to " + host +
                   " (not 127.0.0.0/8, ::1 or localhost): use an https:// endpoint");
  }
  return Status::Ok();
}

Status EtcdTransport::ReadPasswordFile(const std::string& path, std::string* password) {
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

}  // namespace rkv
