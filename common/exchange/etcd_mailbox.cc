// SPDX-License-Identifier: Apache-2.0
#include "common/exchange/etcd_mailbox.h"

#include <exception>
#include <memory>
#include <nlohmann/json.hpp>

#include "common/etcd/etcd_json.h"
#include "common/etcd/no_throw.h"

namespace rkv {
namespace {
using json = nlohmann::json;
using etcd_internal::Dump;
using etcd_internal::NoThrow;

constexpr int kListLimit = 4096;  // keys per List: well inside kMaxEtcdResponseBytes

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

EtcdSettings EtcdMailbox::SettingsOf(const ExchangeOptions& o) {
  EtcdSettings e;
  if (!o.etcd_endpoint.empty()) e.endpoints.push_back(o.etcd_endpoint);
  e.cacert = o.etcd_cacert;
  e.cert = o.etcd_cert;
  e.key = o.etcd_key;
  e.user = o.etcd_user;
  e.password_file = o.etcd_password_file;
  return e;
}

Status EtcdMailbox::Open(const ExchangeOptions& o, std::unique_ptr<Mailbox>* out) {
  return NoThrow("open", [&]() -> Status {
    std::unique_ptr<EtcdTransport> t;
    Status s = EtcdTransport::Open(SettingsOf(o), &t);
    if (!s.ok()) return s;
    ExchangeOptions opts = o;
    if (opts.etcd_prefix.empty()) opts.etcd_prefix = "/rkv";
    std::unique_ptr<EtcdMailbox> m(new EtcdMailbox(std::move(opts), std::move(t)));
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

Status EtcdMailbox::Post(const std::string& path, const std::string& body, std::string* response,
                         int timeout_ms, Consumer consume, void* arg) {
  return transport_->Post(path, body, response, timeout_ms, consume, arg);
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
