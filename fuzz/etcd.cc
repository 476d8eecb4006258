// SPDX-License-Identifier: Apache-2.0
// Harness: the decoders of etcd v3 JSON-gateway responses (common/etcd/etcd_json.h), which
// the etcd mailbox and the etcd client run on whatever answers at an etcd endpoint: range,
// lease grant, authenticate, one watch-stream message (a key's match, and all its events), txn
// and one keepalive message; and the base64 of the gateway's bytes fields.
// Every decoder gets the whole input. An exception escaping a decoder is a crash (libFuzzer
// aborts on it): none may throw.
// Invariants: a decoded range re-serialised (EncodeBase64 + nlohmann::json) decodes to the same
// keys, values and revision; decoded bytes are never longer than the input; a lease ID is a
// positive decimal; a token is 1..4096 printable characters without spaces; a watch match has
// the value of a PUT of the watched key; base64 decoding inverts encoding; EtcdSnippet is
// printable and bounded.
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "common/etcd/etcd_json.h"
#include "fuzz/fuzz_util.h"

namespace {
using namespace rkv;
using json = nlohmann::json;

constexpr std::string_view kWatchedKey = "/rkv/0123456789abcdef.s.1";

void CheckRange(std::string_view text) {
  EtcdRangeResponse r;
  if (!ParseEtcdRangeResponse(text, &r).ok()) return;
  FUZZ_CHECK(r.revision >= 0);
  json j = {{"header", {{"revision", std::to_string(r.revision)}}}, {"kvs", json::array()}};
  size_t bytes = 0;
  for (const EtcdKv& kv : r.kvs) {
    bytes += kv.key.size() + kv.value.size();
    j["kvs"].push_back({{"key", EncodeBase64(kv.key)}, {"value", EncodeBase64(kv.value)}});
  }
  FUZZ_CHECK(bytes <= text.size());
  EtcdRangeResponse again;
  FUZZ_CHECK(ParseEtcdRangeResponse(j.dump(), &again).ok());
  FUZZ_CHECK(again.revision == r.revision && again.kvs.size() == r.kvs.size());
  for (size_t i = 0; i < r.kvs.size(); ++i)
    FUZZ_CHECK(again.kvs[i].key == r.kvs[i].key && again.kvs[i].value == r.kvs[i].value);
}

void CheckLease(std::string_view text) {
  std::string id;
  if (!ParseEtcdLeaseGrantResponse(text, &id).ok()) return;
  FUZZ_CHECK(!id.empty() && id.size() <= 19 && id[0] != '0');
  for (char c : id) FUZZ_CHECK(c >= '0' && c <= '9');
}

void CheckToken(std::string_view text) {
  std::string token;
  if (!ParseEtcdAuthenticateResponse(text, &token).ok()) return;
  FUZZ_CHECK(!token.empty() && token.size() <= 4096 && token.size() <= text.size());
  for (char c : token) FUZZ_CHECK(c > 0x20 && c < 0x7f);
}

void CheckWatch(std::string_view text) {
  bool found = false;
  std::string value = "unchanged";
  Status s = ParseEtcdWatchMessage(text, kWatchedKey, &found, &value);
  if (!s.ok()) {
    FUZZ_CHECK(!found && s.code() == Code::kProtocolError && !s.message().empty());
    return;
  }
  if (found) FUZZ_CHECK(value.size() <= text.size());
}

void CheckClient(std::string_view text) {
  bool succeeded = false;
  int64_t rev = -1;
  if (ParseEtcdTxnResponse(text, &succeeded, &rev).ok()) FUZZ_CHECK(rev >= 0);
  int64_t ttl = -1;
  if (ParseEtcdKeepAliveMessage(text, &ttl).ok()) FUZZ_CHECK(ttl >= 0);
  std::vector<EtcdEvent> events;
  Status s = ParseEtcdWatchEvents(text, &events, &rev);
  if (!s.ok()) {
    FUZZ_CHECK(s.code() == Code::kProtocolError && !s.message().empty());
    return;
  }
  size_t bytes = 0;
  for (const EtcdEvent& e : events) {
    bytes += e.kv.key.size() + e.kv.value.size();
    FUZZ_CHECK(e.kv.create_revision >= 0 && e.kv.mod_revision >= 0 && e.kv.version >= 0);
  }
  FUZZ_CHECK(bytes <= text.size() && rev >= 0);
}

void CheckBase64(std::string_view text) {
  std::string out;
  if (DecodeBase64(text, &out)) {
    FUZZ_CHECK(out.size() <= text.size() * 3 / 4);
    std::string again;
    FUZZ_CHECK(DecodeBase64(EncodeBase64(out), &again) && again == out);
  }
  std::string back;
  const std::string enc = EncodeBase64(text);
  FUZZ_CHECK(enc.size() == (text.size() + 2) / 3 * 4);
  FUZZ_CHECK(DecodeBase64(enc, &back) && back == text);
  const std::string snippet = EtcdSnippet(text, 64);
  FUZZ_CHECK(snippet.size() <= 4 * 64 + 3);
  for (char c : snippet) FUZZ_CHECK(c >= 0x20 && c < 0x7f);
}

// The watch stream's line splitter: any chunking gives the same lines, each byte is scanned
// once (linear work), and lines + what stays buffered give back the input.
void CheckSplitter(std::string_view text) {
  if (text.empty()) return;
  const size_t chunk = size_t(uint8_t(text[0]) % 17) + 1;
  std::string whole_buf, chunk_buf;
  std::vector<std::string> whole_lines, chunk_lines;
  auto collect = [](std::string_view line, void* arg) {
    static_cast<std::vector<std::string>*>(arg)->emplace_back(line);
    return false;
  };
  EtcdLineSplitter whole, chunked;
  FUZZ_CHECK(!whole.Feed(&whole_buf, text, collect, &whole_lines));
  for (size_t at = 0; at < text.size(); at += chunk)
    FUZZ_CHECK(!chunked.Feed(&chunk_buf, text.substr(at, chunk), collect, &chunk_lines));
  FUZZ_CHECK(whole_lines == chunk_lines && whole_buf == chunk_buf);
  FUZZ_CHECK(chunked.bytes_scanned() <= text.size() && whole.bytes_scanned() <= text.size());
  std::string back;
  for (const std::string& l : whole_lines) back += l + "\n";
  FUZZ_CHECK(back + whole_buf == text);
}

void Seeds(const fuzz::SeedWriter& w) {
  const std::string key = EncodeBase64(kWatchedKey), value = EncodeBase64("\x52\x4b\x56\x58 msg");
  w.Write("range", json{{"header",
                         {{"cluster_id", "14841639068965178418"},
                          {"member_id", "10276657743932975437"},
                          {"revision", "42"},
                          {"raft_term", "2"}}},
                        {"kvs",
                         {{{"key", key},
                           {"create_revision", "41"},
                           {"mod_revision", "41"},
                           {"version", "1"},
                           {"value", value},
                           {"lease", "7587869999912345"}}}},
                        {"count", "1"}}
                       .dump());
  w.Write("range-empty", R"({"header":{"revision":"7"}})");
  w.Write(
      "range-keys-only",
      json{{"header", {{"revision", 9}}}, {"kvs", {{{"key", key}}, {{"key", "L3Jrdi94"}}}}}.dump());
  w.Write("lease-grant", R"({"header":{"revision":"5"},"ID":"7587869999912345","TTL":"10"})");
  w.Write("authenticate", R"({"header":{"revision":"5"},"token":"abcDEF.123"})");
  w.Write("watch-created", R"({"result":{"header":{"revision":"43"},"created":true}})");
  w.Write("watch-put", json{{"result",
                             {{"header", {{"revision", "44"}}},
                              {"events", {{{"kv", {{"key", key}, {"value", value}}}}}}}}}
                           .dump());
  w.Write("watch-delete",
          json{{"result", {{"events", {{{"type", "DELETE"}, {"kv", {{"key", key}}}}}}}}}.dump());
  w.Write(
      "watch-canceled",
      R"({"result":{"canceled":true,"cancel_reason":"mvcc: required revision has been compacted"}})");
  w.Write("error", R"({"error":"etcdserver: user name is empty","code":3,"message":"x"})");
  w.Write("txn",
          R"({"header":{"revision":"50"},"succeeded":true,"responses":[{"response_put":{}}]})");
  w.Write("keepalive",
          R"({"result":{"header":{"revision":"50"},"ID":"7587869999912345","TTL":"9"}})");
}
}  // namespace

RKV_FUZZ_SEEDS(Seeds)

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view text = fuzz::AsText(data, size);
  CheckRange(text);
  CheckLease(text);
  CheckToken(text);
  CheckWatch(text);
  CheckClient(text);
  CheckBase64(text);
  CheckSplitter(text);
  return 0;
}
