// SPDX-License-Identifier: Apache-2.0
#include "common/etcd/etcd_client.h"

#include <charconv>
#include <exception>
#include <nlohmann/json.hpp>

#include "common/etcd/no_throw.h"

namespace rkv {
namespace {
using json = nlohmann::json;
using etcd_internal::Dump;
using etcd_internal::NoThrow;

json OpJson(const EtcdClient::Op& op) {
  if (op.type == EtcdClient::Op::kDelete)
    return {{"request_delete_range", {{"key", EncodeBase64(op.key)}}}};
  json put = {{"key", EncodeBase64(op.key)}, {"value", EncodeBase64(op.value)}};
  if (op.lease != 0) put["lease"] = std::to_string(op.lease);
  return {{"request_put", put}};
}

json CompareJson(const EtcdClient::Compare& c) {
  static const char* kResult[] = {"EQUAL", "GREATER", "LESS", "NOT_EQUAL"};
  json j = {{"key", EncodeBase64(c.key)}, {"result", kResult[c.result]}};
  switch (c.target) {
    case EtcdClient::Compare::kVersion:
      j["target"] = "VERSION";
      j["version"] = std::to_string(c.number);
      break;
    case EtcdClient::Compare::kCreateRevision:
      j["target"] = "CREATE";
      j["create_revision"] = std::to_string(c.number);
      break;
    case EtcdClient::Compare::kModRevision:
      j["target"] = "MOD";
      j["mod_revision"] = std::to_string(c.number);
      break;
    case EtcdClient::Compare::kValue:
      j["target"] = "VALUE";
      j["value"] = EncodeBase64(c.value);
      break;
  }
  return j;
}

struct WatchSink {
  const EtcdClient::OnEvents* on;
  Status status;
  bool done = false;
};
bool WatchLine(std::string_view line, void* arg) {
  auto* w = static_cast<WatchSink*>(arg);
  if (line.find_first_not_of(" \t\r\n") == std::string_view::npos) return false;
  std::vector<EtcdEvent> events;
  int64_t revision = 0;
  w->status = ParseEtcdWatchEvents(line, &events, &revision);
  if (!w->status.ok()) return true;
  if (events.empty()) return false;  // created, progress
  try {
    w->done = (*w->on)(events, revision);
  } catch (...) {
    w->status = Status(Code::kIoError, "etcd watch: the event handler threw");
    return true;
  }
  return w->done;
}

}  // namespace

std::string EtcdClient::PrefixEnd(const std::string& prefix) {
  std::string end = prefix;
  while (!end.empty()) {
    if (static_cast<unsigned char>(end.back()) < 0xff) {
      end.back() = char(static_cast<unsigned char>(end.back()) + 1);
      return end;
    }
    end.pop_back();
  }
  return std::string(1, '\0');  // every key: etcd's "range to the end"
}

Status EtcdClient::Open(const EtcdSettings& settings, std::unique_ptr<EtcdClient>* out) {
  std::unique_ptr<EtcdTransport> t;
  Status s = EtcdTransport::Open(settings, &t);
  if (!s.ok()) return s;
  out->reset(new EtcdClient(std::move(t)));
  return Status::Ok();
}

Status EtcdClient::Get(const std::string& key, bool* found, EtcdKv* kv, int64_t* revision) {
  *found = false;
  return NoThrow("get", [&]() -> Status {
    std::string resp;
    Status s = transport_->Post("/v3/kv/range", Dump(json{{"key", EncodeBase64(key)}}), &resp,
                                kCallTimeoutMs);
    EtcdRangeResponse r;
    if (s.ok()) s = ParseEtcdRangeResponse(resp, &r);
    if (!s.ok()) return s;
    if (revision != nullptr) *revision = r.revision;
    for (EtcdKv& e : r.kvs) {
      if (e.key != key) continue;  // not what was asked for: ignored
      *kv = std::move(e);
      *found = true;
    }
    return Status::Ok();
  });
}

Status EtcdClient::GetPrefix(const std::string& prefix, std::vector<EtcdKv>* kvs, int64_t* revision,
                             bool keys_only, bool* more) {
  kvs->clear();
  return NoThrow("get prefix", [&]() -> Status {
    json req = {{"key", EncodeBase64(prefix)},
                {"range_end", EncodeBase64(PrefixEnd(prefix))},
                {"limit", std::to_string(kMaxRangeKeys)}};
    if (keys_only) req["keys_only"] = true;
    std::string resp;
    Status s = transport_->Post("/v3/kv/range", Dump(req), &resp, kCallTimeoutMs);
    EtcdRangeResponse r;
    if (s.ok()) s = ParseEtcdRangeResponse(resp, &r);
    if (!s.ok()) return s;
    if (revision != nullptr) *revision = r.revision;
    if (more != nullptr) *more = int64_t(r.kvs.size()) >= kMaxRangeKeys;
    for (EtcdKv& e : r.kvs) {
      if (e.key.compare(0, prefix.size(), prefix) != 0) continue;  // outside the range: ignored
      kvs->push_back(std::move(e));
    }
    return Status::Ok();
  });
}

Status EtcdClient::Put(const std::string& key, const std::string& value, int64_t lease) {
  return NoThrow("put", [&]() -> Status {
    json req = {{"key", EncodeBase64(key)}, {"value", EncodeBase64(value)}};
    if (lease != 0) req["lease"] = std::to_string(lease);
    std::string resp;
    return transport_->Post("/v3/kv/put", Dump(req), &resp, kCallTimeoutMs);
  });
}

Status EtcdClient::Delete(const std::string& key) {
  return NoThrow("delete", [&]() -> Status {
    std::string resp;
    return transport_->Post("/v3/kv/deleterange", Dump(json{{"key", EncodeBase64(key)}}), &resp,
                            kCallTimeoutMs);
  });
}

Status EtcdClient::Txn(const std::vector<Compare>& compares, const std::vector<Op>& then,
                       const std::vector<Op>& otherwise, bool* succeeded, int64_t* revision) {
  *succeeded = false;
  return NoThrow("txn", [&]() -> Status {
    json c = json::array(), t = json::array(), f = json::array();
    for (const Compare& x : compares) c.push_back(CompareJson(x));
    for (const Op& x : then) t.push_back(OpJson(x));
    for (const Op& x : otherwise) f.push_back(OpJson(x));
    json req = {{"compare", c}, {"success", t}, {"failure", f}};
    std::string resp;
    Status s = transport_->Post("/v3/kv/txn", Dump(req), &resp, kCallTimeoutMs);
    int64_t rev = 0;
    if (s.ok()) s = ParseEtcdTxnResponse(resp, succeeded, &rev);
    if (s.ok() && revision != nullptr) *revision = rev;
    return s;
  });
}

Status EtcdClient::GrantLease(int64_t ttl_s, int64_t* id) {
  return NoThrow("lease grant", [&]() -> Status {
    std::string resp, decimal;
    Status s = transport_->Post("/v3/lease/grant", Dump(json{{"TTL", std::to_string(ttl_s)}}),
                                &resp, kCallTimeoutMs);
    if (s.ok()) s = ParseEtcdLeaseGrantResponse(resp, &decimal);
    if (!s.ok()) return s;
    int64_t v = 0;
    auto [p, ec] = std::from_chars(decimal.data(), decimal.data() + decimal.size(), v);
    if (ec != std::errc() || p != decimal.data() + decimal.size() || v <= 0)
      return Status(Code::kProtocolError, "etcd lease grant: bad lease ID");
    *id = v;
    return Status::Ok();
  });
}

Status EtcdClient::KeepAlive(int64_t id, int64_t* ttl_left) {
  *ttl_left = 0;
  return NoThrow("lease keepalive", [&]() -> Status {
    // One request and its answer, not a stream held open: the gateway ends the response once
    // the request body has ended, so the call fails over between members like any other.
    std::string resp;
    Status s = transport_->Post("/v3/lease/keepalive", Dump(json{{"ID", std::to_string(id)}}),
                                &resp, kCallTimeoutMs);
    if (!s.ok()) return s;
    const size_t start = resp.find_first_not_of(" \t\r\n");
    if (start == std::string::npos)
      return Status(Code::kProtocolError, "etcd lease keepalive: no answer");
    const size_t end = resp.find('\n', start);
    return ParseEtcdKeepAliveMessage(
        std::string_view(resp).substr(start, end == std::string::npos ? end : end - start),
        ttl_left);
  });
}

Status EtcdClient::RevokeLease(int64_t id) {
  return NoThrow("lease revoke", [&]() -> Status {
    std::string resp;
    return transport_->Post("/v3/lease/revoke", Dump(json{{"ID", std::to_string(id)}}), &resp,
                            kCallTimeoutMs);
  });
}

Status EtcdClient::Watch(const std::string& key, bool prefix, int64_t from, int timeout_ms,
                         const OnEvents& on_events, const std::function<bool()>& interrupt) {
  return NoThrow("watch", [&]() -> Status {
    json create = {{"key", EncodeBase64(key)}, {"start_revision", std::to_string(from)}};
    if (prefix) create["range_end"] = EncodeBase64(PrefixEnd(key));
    WatchSink sink{&on_events, Status::Ok(), false};
    std::string resp;
    Status s = transport_->Post("/v3/watch", Dump(json{{"create_request", create}}), &resp,
                                timeout_ms, WatchLine, &sink, interrupt ? &interrupt : nullptr);
    if (!sink.status.ok()) return sink.status;
    if (!s.ok()) return s;
    if (!sink.done && !resp.empty() && !WatchLine(resp, &sink) && sink.status.ok())
      return Status(Code::kTimeout, "etcd watch ended");
    if (!sink.status.ok()) return sink.status;
    return sink.done ? Status::Ok() : Status(Code::kTimeout, "etcd watch ended");
  });
}

}  // namespace rkv
