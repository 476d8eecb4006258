// SPDX-License-Identifier: Apache-2.0
#include "common/etcd/etcd_json.h"

#include <charconv>
#include <exception>
#include <nlohmann/json.hpp>

#include "common/printable.h"

namespace rkv {
namespace {
using json = nlohmann::json;

Status Bad(const char* what, const std::string& why) {
  return Status(Code::kProtocolError, std::string("etcd ") + what + ": " + why);
}

// Deepest nesting of arrays/objects, outside strings; stops counting past the limit.
int Depth(std::string_view t) {
  int depth = 0, max = 0;
  bool in_string = false, escaped = false;
  for (char c : t) {
    if (in_string) {
      if (escaped)
        escaped = false;
      else if (c == '\\')
        escaped = true;
      else if (c == '"')
        in_string = false;
      continue;
    }
    if (c == '"') {
      in_string = true;
    } else if (c == '{' || c == '[') {
      if (++depth > max) max = depth;
      if (max > kMaxEtcdJsonDepth) break;
    } else if (c == '}' || c == ']') {
      --depth;
    }
  }
  return max;
}

// Parses `t` into an object; errors name `what`.
Status ParseObject(const char* what, std::string_view t, json* out) {
  if (t.size() > kMaxEtcdResponseBytes)
    return Bad(what, "response of " + std::to_string(t.size()) + " bytes, more than " +
                         std::to_string(kMaxEtcdResponseBytes));
  if (Depth(t) > kMaxEtcdJsonDepth)
    return Bad(what, "JSON nested deeper than " + std::to_string(kMaxEtcdJsonDepth) + " levels");
  *out = json::parse(t.begin(), t.end(), nullptr, /*allow_exceptions=*/false);
  if (out->is_discarded()) return Bad(what, "not JSON: " + EtcdSnippet(t));
  if (!out->is_object())
    return Bad(what, std::string("expected a JSON object, got ") + out->type_name() + ": " +
                         EtcdSnippet(t));
  return Status::Ok();
}

// obj[name] if obj is an object that has it, else nullptr. Never inserts, never throws.
const json* Field(const json& obj, const char* name) {
  if (!obj.is_object()) return nullptr;
  auto it = obj.find(name);
  return it == obj.end() ? nullptr : &*it;
}

Status WrongType(const char* what, const char* field, const char* want, const json& got) {
  return Bad(what,
             std::string("field '") + field + "' is " + got.type_name() + ", expected " + want);
}

// An int64 field: a decimal string (protobuf JSON) or a JSON integer.
Status Int64Field(const char* what, const json& obj, const char* field, bool required,
                  int64_t* out) {
  const json* f = Field(obj, field);
  if (f == nullptr) {
    if (required) return Bad(what, std::string("field '") + field + "' missing");
    *out = 0;
    return Status::Ok();
  }
  if (f->is_number_integer()) {
    if (f->is_number_unsigned() && f->get<uint64_t>() > uint64_t(INT64_MAX))
      return Bad(what, std::string("field '") + field + "' out of range");
    *out = f->get<int64_t>();
    return Status::Ok();
  }
  if (!f->is_string()) return WrongType(what, field, "an integer or a decimal string", *f);
  const std::string& s = f->get_ref<const std::string&>();
  int64_t v = 0;
  auto [p, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
  if (s.empty() || ec != std::errc() || p != s.data() + s.size())
    return Bad(what, std::string("field '") + field + "' is not a decimal int64: \"" +
                         EtcdSnippet(s, 40) + "\"");
  *out = v;
  return Status::Ok();
}

// A bytes field (base64); absent means empty.
Status BytesField(const char* what, const json& obj, const char* field, bool required,
                  std::string* out) {
  out->clear();
  const json* f = Field(obj, field);
  if (f == nullptr)
    return required ? Bad(what, std::string("field '") + field + "' missing") : Status::Ok();
  if (!f->is_string()) return WrongType(what, field, "a base64 string", *f);
  if (!DecodeBase64(f->get_ref<const std::string&>(), out))
    return Bad(what, std::string("field '") + field + "' is not base64");
  return Status::Ok();
}

Status BoolField(const char* what, const json& obj, const char* field, bool* out) {
  *out = false;
  const json* f = Field(obj, field);
  if (f == nullptr) return Status::Ok();
  if (!f->is_boolean()) return WrongType(what, field, "a boolean", *f);
  *out = f->get<bool>();
  return Status::Ok();
}

Status StringField(const char* what, const json& obj, const char* field, std::string* out) {
  out->clear();
  const json* f = Field(obj, field);
  if (f == nullptr) return Status::Ok();
  if (!f->is_string()) return WrongType(what, field, "a string", *f);
  *out = f->get_ref<const std::string&>();
  return Status::Ok();
}

// The gateway's error object: {"error":{"message":...}} (stream) or {"error":"...",
// "message":...,"code":N} (unary). Empty if `j` is not an error.
std::string ErrorText(const json& j) {
  const json* e = Field(j, "error");
  if (e == nullptr) return "";
  const json* m = e->is_object() ? Field(*e, "message") : Field(j, "message");
  if (m != nullptr && m->is_string()) return EtcdSnippet(m->get_ref<const std::string&>());
  if (e->is_string()) return EtcdSnippet(e->get_ref<const std::string&>());
  return "(an error without a message)";
}

// An answer: a JSON object that is not the gateway's error object.
Status ParseAnswer(const char* what, std::string_view t, json* out) {
  Status s = ParseObject(what, t, out);
  if (!s.ok()) return s;
  if (std::string e = ErrorText(*out); !e.empty()) return Bad(what, "error: " + e);
  return Status::Ok();
}

// A stream message's "result" object.
Status ResultField(const char* what, const json& j, std::string_view t, const json** out) {
  const json* r = Field(j, "result");
  if (r == nullptr) return Bad(what, "field 'result' missing: " + EtcdSnippet(t));
  if (!r->is_object()) return WrongType(what, "result", "an object", *r);
  *out = r;
  return Status::Ok();
}

// Runs `f`, turning any exception (bad_alloc; a bug) into a Status.
template <class F>
Status NoThrow(const char* what, F f) {
  try {
    return f();
  } catch (const std::exception& e) {
    return Bad(what, std::string("unexpected: ") + e.what());
  } catch (...) {
    return Bad(what, "unexpected exception");
  }
}

int B64Value(char c) {
  if (c >= 'A' && c <= 'Z') return c - 'A';
  if (c >= 'a' && c <= 'z') return c - 'a' + 26;
  if (c >= '0' && c <= '9') return c - '0' + 52;
  if (c == '+' || c == '-') return 62;
  if (c == '/' || c == '_') return 63;
  return -1;
}
}  // namespace

std::string EncodeBase64(std::string_view in) {
  static const char* t = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
  std::string out;
  out.reserve((in.size() + 2) / 3 * 4);
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

bool DecodeBase64(std::string_view in, std::string* out) {
  out->clear();
  size_t n = in.size();
  size_t pad = 0;
  while (pad < 2 && n > 0 && in[n - 1] == '=') {
    --n;
    ++pad;
  }
  if (pad > 0 && in.size() % 4 != 0) return false;  // padding only on a full last quantum
  if (n % 4 == 1) return false;                     // 6 bits cannot end a byte
  out->reserve(n / 4 * 3 + 2);
  uint32_t acc = 0;
  int bits = 0;
  for (size_t i = 0; i < n; ++i) {
    int v = B64Value(in[i]);
    if (v < 0) return false;
    acc = (acc << 6 | uint32_t(v)) & 0xffffff;
    bits += 6;
    if (bits >= 8) {
      bits -= 8;
      out->push_back(char((acc >> bits) & 0xff));
    }
  }
  return true;
}

std::string EtcdSnippet(std::string_view text, size_t max) { return Printable(text, max); }

// One mvccpb.KeyValue object.
Status KvField(const char* what, const json& kv, EtcdKv* e) {
  if (!kv.is_object()) return WrongType(what, "kv", "an object", kv);
  Status s = BytesField(what, kv, "key", true, &e->key);
  if (s.ok()) s = BytesField(what, kv, "value", false, &e->value);
  if (s.ok()) s = Int64Field(what, kv, "create_revision", false, &e->create_revision);
  if (s.ok()) s = Int64Field(what, kv, "mod_revision", false, &e->mod_revision);
  if (s.ok()) s = Int64Field(what, kv, "version", false, &e->version);
  if (s.ok()) s = Int64Field(what, kv, "lease", false, &e->lease);
  if (s.ok() && (e->create_revision < 0 || e->mod_revision < 0 || e->version < 0))
    s = Bad(what, "negative revision or version");
  return s;
}

// The header's revision: required or optional, never negative.
Status HeaderRevision(const char* what, const json& j, bool required, int64_t* revision) {
  *revision = 0;
  const json* header = Field(j, "header");
  if (header == nullptr) return required ? Bad(what, "field 'header' missing") : Status::Ok();
  if (!header->is_object()) return WrongType(what, "header", "an object", *header);
  Status s = Int64Field(what, *header, "revision", required, revision);
  if (s.ok() && *revision < 0) return Bad(what, "negative revision");
  return s;
}

Status ParseEtcdRangeResponse(std::string_view text, EtcdRangeResponse* out) {
  return NoThrow("range", [&]() -> Status {
    constexpr const char* kWhat = "range";
    json j;
    Status s = ParseAnswer(kWhat, text, &j);
    if (!s.ok()) return s;
    EtcdRangeResponse r;
    s = HeaderRevision(kWhat, j, true, &r.revision);
    if (!s.ok()) return s;
    if (const json* kvs = Field(j, "kvs"); kvs != nullptr) {
      if (!kvs->is_array()) return WrongType(kWhat, "kvs", "an array", *kvs);
      for (const json& kv : *kvs) {
        if (!kv.is_object()) return WrongType(kWhat, "kvs[]", "an object", kv);
        EtcdKv e;
        s = KvField(kWhat, kv, &e);
        if (!s.ok()) return s;
        r.kvs.push_back(std::move(e));
      }
    }
    *out = std::move(r);
    return Status::Ok();
  });
}

Status ParseEtcdLeaseGrantResponse(std::string_view text, std::string* lease_id) {
  return NoThrow("lease grant", [&]() -> Status {
    constexpr const char* kWhat = "lease grant";
    json j;
    Status s = ParseAnswer(kWhat, text, &j);
    if (!s.ok()) return s;
    int64_t id = 0;
    s = Int64Field(kWhat, j, "ID", true, &id);
    if (!s.ok()) return s;
    if (id <= 0) return Bad(kWhat, "lease ID " + std::to_string(id) + " is not positive");
    *lease_id = std::to_string(id);
    return Status::Ok();
  });
}

Status ParseEtcdAuthenticateResponse(std::string_view text, std::string* token) {
  return NoThrow("authenticate", [&]() -> Status {
    constexpr const char* kWhat = "authenticate";
    json j;
    Status s = ParseAnswer(kWhat, text, &j);
    if (!s.ok()) return s;
    const json* t = Field(j, "token");
    if (t == nullptr) return Bad(kWhat, "field 'token' missing (is auth enabled in etcd?)");
    if (!t->is_string()) return WrongType(kWhat, "token", "a string", *t);
    const std::string& v = t->get_ref<const std::string&>();
    if (v.empty() || v.size() > 4096)
      return Bad(kWhat, "token of " + std::to_string(v.size()) + " bytes (expected 1..4096)");
    for (char c : v)
      if (c <= 0x20 || c >= 0x7f)
        return Bad(kWhat, "token has a character that cannot go in an HTTP header");
    *token = v;
    return Status::Ok();
  });
}

bool EtcdLineSplitter::Feed(std::string* buffer, std::string_view bytes, OnLine on_line,
                            void* arg) {
  buffer->append(bytes.data(), bytes.size());
  const std::string_view b(*buffer);
  size_t start = 0;  // the first line not handed out yet
  bool stop = false;
  while (!stop) {
    const size_t end = b.find('\n', scanned_);
    bytes_scanned_ += (end == std::string_view::npos ? b.size() : end + 1) - scanned_;
    if (end == std::string_view::npos) {
      scanned_ = b.size();
      break;
    }
    ++lines_;
    stop = on_line(b.substr(start, end - start), arg);
    start = scanned_ = end + 1;
  }
  // What is left after the last line end came with this chunk: erasing is linear too.
  buffer->erase(0, start);
  scanned_ -= start;
  return stop;
}

Status ParseEtcdWatchMessage(std::string_view text, std::string_view key, bool* found,
                             std::string* value) {
  *found = false;
  return NoThrow("watch", [&]() -> Status {
    constexpr const char* kWhat = "watch";
    json j;
    Status s = ParseAnswer(kWhat, text, &j);
    if (!s.ok()) return s;
    const json* r = nullptr;
    s = ResultField(kWhat, j, text, &r);
    if (!s.ok()) return s;
    bool canceled = false;
    s = BoolField(kWhat, *r, "canceled", &canceled);
    if (!s.ok()) return s;
    if (canceled) {
      std::string reason;
      s = StringField(kWhat, *r, "cancel_reason", &reason);
      if (!s.ok()) return s;
      return Bad(kWhat, "canceled by etcd" + (reason.empty() ? "" : ": " + EtcdSnippet(reason)));
    }
    const json* events = Field(*r, "events");
    if (events == nullptr) return Status::Ok();  // "created", progress notifications
    if (!events->is_array()) return WrongType(kWhat, "events", "an array", *events);
    for (const json& ev : *events) {
      if (!ev.is_object()) return WrongType(kWhat, "events[]", "an object", ev);
      std::string type;
      s = StringField(kWhat, ev, "type", &type);
      if (!s.ok()) return s;
      if (!type.empty() && type != "PUT") continue;  // DELETE
      const json* kv = Field(ev, "kv");
      if (kv == nullptr) continue;
      if (!kv->is_object()) return WrongType(kWhat, "kv", "an object", *kv);
      std::string k, v;
      s = BytesField(kWhat, *kv, "key", true, &k);
      if (s.ok()) s = BytesField(kWhat, *kv, "value", false, &v);
      if (!s.ok()) return s;
      if (k == key) {
        *found = true;
        *value = std::move(v);
        return Status::Ok();
      }
    }
    return Status::Ok();
  });
}

Status ParseEtcdTxnResponse(std::string_view text, bool* succeeded, int64_t* revision) {
  return NoThrow("txn", [&]() -> Status {
    constexpr const char* kWhat = "txn";
    json j;
    Status s = ParseAnswer(kWhat, text, &j);
    if (!s.ok()) return s;
    s = HeaderRevision(kWhat, j, true, revision);
    if (s.ok()) s = BoolField(kWhat, j, "succeeded", succeeded);
    return s;
  });
}

Status ParseEtcdKeepAliveMessage(std::string_view text, int64_t* ttl) {
  *ttl = 0;
  return NoThrow("lease keepalive", [&]() -> Status {
    constexpr const char* kWhat = "lease keepalive";
    json j;
    Status s = ParseAnswer(kWhat, text, &j);
    if (!s.ok()) return s;
    const json* r = nullptr;
    s = ResultField(kWhat, j, text, &r);
    if (!s.ok()) return s;
    s = Int64Field(kWhat, *r, "TTL", false, ttl);
    if (s.ok() && *ttl < 0) *ttl = 0;
    return s;
  });
}

Status ParseEtcdWatchEvents(std::string_view text, std::vector<EtcdEvent>* events,
                            int64_t* revision) {
  *revision = 0;
  return NoThrow("watch", [&]() -> Status {
    constexpr const char* kWhat = "watch";
    json j;
    Status s = ParseAnswer(kWhat, text, &j);
    if (!s.ok()) return s;
    const json* r = nullptr;
    s = ResultField(kWhat, j, text, &r);
    if (!s.ok()) return s;
    s = HeaderRevision(kWhat, *r, false, revision);
    if (!s.ok()) return s;
    bool canceled = false;
    s = BoolField(kWhat, *r, "canceled", &canceled);
    if (!s.ok()) return s;
    if (canceled) {
      std::string reason;
      s = StringField(kWhat, *r, "cancel_reason", &reason);
      if (!s.ok()) return s;
      return Bad(kWhat, "canceled by etcd" + (reason.empty() ? "" : ": " + EtcdSnippet(reason)));
    }
    const json* list = Field(*r, "events");
    if (list == nullptr) return Status::Ok();
    if (!list->is_array()) return WrongType(kWhat, "events", "an array", *list);
    for (const json& ev : *list) {
      if (!ev.is_object()) return WrongType(kWhat, "events[]", "an object", ev);
      std::string type;
      s = StringField(kWhat, ev, "type", &type);
      if (!s.ok()) return s;
      if (!type.empty() && type != "PUT" && type != "DELETE")
        return Bad(kWhat, "event type '" + EtcdSnippet(type, 20) + "'");
      const json* kv = Field(ev, "kv");
      if (kv == nullptr) return Bad(kWhat, "event without 'kv'");
      EtcdEvent e;
      e.deleted = type == "DELETE";
      s = KvField(kWhat, *kv, &e.kv);
      if (!s.ok()) return s;
      events->push_back(std::move(e));
    }
    return Status::Ok();
  });
}

}  // namespace rkv
