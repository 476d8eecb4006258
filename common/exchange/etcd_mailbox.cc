#include "common/exchange/etcd_mailbox.h"

#include <curl/curl.h>

#include <nlohmann/json.hpp>

namespace rkv {
namespace {
using json = nlohmann::json;

std::string B64(const std::string& in) {
  static const char* t = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
  std::string out;
  size_t i = 0;
  for (; i + 2 < in.size(); i += 3) {
    uint32_t v =
        uint32_t(uint8_t(in[i])) << 16 | uint32_t(uint8_t(in[i + 1])) << 8 | uint8_t(in[i + 2]);
    out += {t[v >> 18], t[(v >> 12) & 63], t[(v >> 6) & 63], t[v & 63]};
  }
  if (i + 1 == in.size()) {
    uint32_t v = uint32_t(uint8_t(in[i])) << 16;
    out += {t[v >> 18], t[(v >> 12) & 63], '=', '='};
  } else if (i + 2 == in.size()) {
    uint32_t v = uint32_t(uint8_t(in[i])) << 16 | uint32_t(uint8_t(in[i + 1])) << 8;
    out += {t[v >> 18], t[(v >> 12) & 63], t[(v >> 6) & 63], '='};
  }
  return out;
}

bool Unb64(const std::string& in, std::string* out) {
  out->clear();
  uint32_t acc = 0;
  int bits = 0;
  for (char c : in) {
    int v;
    if (c >= 'A' && c <= 'Z')
      v = c - 'A';
    else if (c >= 'a' && c <= 'z')
      v = c - 'a' + 26;
    else if (c >= '0' && c <= '9')
      v = c - '0' + 52;
    else if (c == '+')
      v = 62;
    else if (c == '/')
      v = 63;
    else if (c == '=')
      break;
    else
      return false;
    acc = acc << 6 | uint32_t(v);
    bits += 6;
    if (bits >= 8) {
      bits -= 8;
      out->push_back(char((acc >> bits) & 0xff));
    }
  }
  return true;
}

struct Sink {
  std::string* data;
  bool (*stop)(const std::string&, void*);
  void* arg;
  bool stopped = false;
};

size_t Write(char* p, size_t size, size_t n, void* user) {
  auto* s = static_cast<Sink*>(user);
  s->data->append(p, size * n);
  if (s->stop && s->stop(*s->data, s->arg)) {
    s->stopped = true;
    return 0;  // ends the transfer
  }
  return size * n;
}

const bool kCurlReady = curl_global_init(CURL_GLOBAL_DEFAULT) == CURLE_OK;

// The watch stream is a sequence of JSON objects; is there a PUT event for the key yet?
struct WatchState {
  std::string key_b64;
  std::string value;
  bool found = false;
};
bool WatchSawPut(const std::string& data, void* arg) {
  auto* w = static_cast<WatchState*>(arg);
  // Objects are separated by newlines (grpc-gateway's streaming format).
  size_t start = 0;
  while (start < data.size()) {
    size_t end = data.find('\n', start);
    if (end == std::string::npos) end = data.size();
    json j = json::parse(data.begin() + start, data.begin() + end, nullptr, false);
    start = end + 1;
    if (j.is_discarded() || !j.contains("result")) continue;
    for (const auto& e : j["result"].value("events", json::array())) {
      if (e.value("type", "PUT") != "PUT" || !e.contains("kv")) continue;
      if (e["kv"].value("key", "") == w->key_b64) {
        w->found = Unb64(e["kv"].value("value", ""), &w->value);
        if (w->found) return true;
      }
    }
  }
  return false;
}
}  // namespace

Status EtcdMailbox::Open(const std::string& endpoint, const std::string& prefix,
                         std::unique_ptr<Mailbox>* out) {
  if (!kCurlReady) return Status(Code::kIoError, "curl_global_init failed");
  if (endpoint.empty()) return Status(Code::kInvalidArgument, "the etcd exchange needs --etcd");
  std::unique_ptr<EtcdMailbox> m(new EtcdMailbox(endpoint, prefix.empty() ? "/rkv" : prefix));
  std::string resp;
  Status s = m->Post("/v3/lease/grant", json{{"TTL", kStaleMs / 1000}}.dump(), &resp, 5000);
  if (!s.ok()) return s;
  json j = json::parse(resp, nullptr, false);
  if (j.is_discarded() || !j.contains("ID"))
    return Status(Code::kProtocolError,
                  "etcd lease grant: unexpected answer: " + resp.substr(0, 200));
  m->lease_ = j["ID"].is_string() ? j["ID"].get<std::string>() : j["ID"].dump();
  *out = std::move(m);
  return Status::Ok();
}

EtcdMailbox::~EtcdMailbox() {
  std::string resp;
  if (!lease_.empty()) (void)Post("/v3/lease/revoke", json{{"ID", lease_}}.dump(), &resp, 2000);
}

Status EtcdMailbox::Post(const std::string& path, const std::string& body, std::string* response,
                         int timeout_ms, bool (*stop)(const std::string&, void*),
                         void* stop_arg) const {
  CURL* c = curl_easy_init();
  if (c == nullptr) return Status(Code::kIoError, "curl_easy_init failed");
  std::string url = endpoint_ + path;
  response->clear();
  Sink sink{response, stop, stop_arg};
  curl_slist* headers = curl_slist_append(nullptr, "Content-Type: application/json");
  curl_easy_setopt(c, CURLOPT_URL, url.c_str());
  curl_easy_setopt(c, CURLOPT_POSTFIELDS, body.c_str());
  curl_easy_setopt(c, CURLOPT_POSTFIELDSIZE, long(body.size()));
  curl_easy_setopt(c, CURLOPT_HTTPHEADER, headers);
  curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, Write);
  curl_easy_setopt(c, CURLOPT_WRITEDATA, &sink);
  curl_easy_setopt(c, CURLOPT_TIMEOUT_MS, long(timeout_ms));
  curl_easy_setopt(c, CURLOPT_CONNECTTIMEOUT_MS, long(std::min(timeout_ms, 3000)));
  curl_easy_setopt(c, CURLOPT_NOSIGNAL, 1L);
  CURLcode rc = curl_easy_perform(c);
  long http = 0;
  curl_easy_getinfo(c, CURLINFO_RESPONSE_CODE, &http);
  curl_slist_free_all(headers);
  curl_easy_cleanup(c);
  if (sink.stopped) return Status::Ok();
  if (rc == CURLE_OPERATION_TIMEDOUT && stop != nullptr)
    return Status(Code::kTimeout, "etcd watch timed out");
  if (rc != CURLE_OK)
    return Status(Code::kIoError, "etcd " + url + ": " + curl_easy_strerror(rc) +
                                      (rc == CURLE_COULDNT_CONNECT ? " (is etcd running?)" : ""));
  if (http != 200)
    return Status(Code::kIoError, "etcd " + url + ": HTTP " + std::to_string(http) + ": " +
                                      response->substr(0, 200));
  return Status::Ok();
}

Status EtcdMailbox::Range(const std::string& key, bool* found, std::string* value,
                          int64_t* revision) const {
  std::string resp;
  Status s = Post("/v3/kv/range", json{{"key", B64(key)}}.dump(), &resp, 5000);
  if (!s.ok()) return s;
  json j = json::parse(resp, nullptr, false);
  if (j.is_discarded()) return Status(Code::kProtocolError, "etcd range: not JSON");
  *revision = std::stoll(j["header"].value("revision", std::string("0")));
  *found = false;
  for (const auto& kv : j.value("kvs", json::array())) {
    if (!Unb64(kv.value("value", ""), value))
      return Status(Code::kProtocolError, "etcd range: bad base64 value");
    *found = true;
  }
  return Status::Ok();
}

Status EtcdMailbox::Put(const std::string& name, const std::string& bytes) {
  std::string resp;
  return Post("/v3/kv/put",
              json{{"key", B64(Key(name))}, {"value", B64(bytes)}, {"lease", lease_}}.dump(), &resp,
              5000);
}

Status EtcdMailbox::WaitFor(const std::string& name, std::string* bytes, int timeout_ms) {
  bool found = false;
  int64_t rev = 0;
  Status s = Range(Key(name), &found, bytes, &rev);
  if (!s.ok() || found) return s;
  WatchState w;
  w.key_b64 = B64(Key(name));
  json req = {
      {"create_request", {{"key", w.key_b64}, {"start_revision", std::to_string(rev + 1)}}}};
  std::string resp;
  s = Post("/v3/watch", req.dump(), &resp, timeout_ms, WatchSawPut, &w);
  if (!s.ok()) return s;
  if (!w.found) return Status(Code::kTimeout, "no key " + Key(name));
  *bytes = w.value;
  return Status::Ok();
}

Status EtcdMailbox::List(const std::string& suffix, std::vector<std::string>* out) {
  out->clear();
  std::string start = prefix_ + "/", end = start;
  end.back() = char(end.back() + 1);
  std::string resp;
  Status s = Post("/v3/kv/range",
                  json{{"key", B64(start)}, {"range_end", B64(end)}, {"keys_only", true}}.dump(),
                  &resp, 5000);
  if (!s.ok()) return s;
  json j = json::parse(resp, nullptr, false);
  if (j.is_discarded()) return Status(Code::kProtocolError, "etcd range: not JSON");
  for (const auto& kv : j.value("kvs", json::array())) {
    std::string k;
    if (!Unb64(kv.value("key", ""), &k) || k.size() <= start.size()) continue;
    std::string n = k.substr(start.size());
    if (n.size() > suffix.size() && n.compare(n.size() - suffix.size(), suffix.size(), suffix) == 0)
      out->push_back(n);
  }
  return Status::Ok();
}

bool EtcdMailbox::Alive(const std::string& name) {
  bool found = false;
  std::string v;
  int64_t rev = 0;
  // An unreachable etcd is not proof that the peer left: report alive.
  if (!Range(Key(name), &found, &v, &rev).ok()) return true;
  return found;
}

void EtcdMailbox::Remove(const std::string& name) {
  std::string resp;
  (void)Post("/v3/kv/deleterange", json{{"key", B64(Key(name))}}.dump(), &resp, 2000);
}

void EtcdMailbox::Heartbeat() {
  std::string resp;
  (void)Post("/v3/lease/keepalive", json{{"ID", lease_}}.dump(), &resp, 2000);
}

}  // namespace rkv
