// SPDX-License-Identifier: Apache-2.0
// Pure decoders of etcd v3 JSON-gateway responses, for the etcd client (etcd_client.h) and the
// etcd mailbox (common/exchange/etcd_mailbox.h).
// What answers at the etcd endpoint is untrusted input: every function here takes the
// response text, checks every field's presence and JSON type, and returns a Status; none
// throws (nlohmann::json is used with exceptions off and a final catch-all), none reads
// beyond its input, and deeply nested input is refused before it is parsed. These are the
// entry points for the etcd libFuzzer harness.
//
// Field encodings follow the gateway's protobuf JSON mapping: int64 fields are decimal strings
// (a JSON integer is accepted too), bytes fields (key, value) base64 (standard or URL-safe,
// padded or not); fields equal to their default (an empty value, event type PUT, ...) are
// omitted.
// Thread safety: stateless functions. Ownership: outputs are plain values.
#ifndef RKV_COMMON_ETCD_ETCD_JSON_H_
#define RKV_COMMON_ETCD_ETCD_JSON_H_

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "rkv/status.h"

namespace rkv {

// The largest response the etcd mailbox accepts (the transfer is aborted past it), and for a
// watch stream the largest unconsumed message. Entries are at most Mailbox::kMaxEntryBytes.
inline constexpr size_t kMaxEtcdResponseBytes = 1 << 20;
// Deeper JSON nesting than this is refused unparsed (etcd's answers nest 4 levels).
inline constexpr int kMaxEtcdJsonDepth = 32;

struct EtcdKv {
  std::string key;    // decoded bytes
  std::string value;  // decoded bytes (empty for keys_only ranges)
  // Revisions (0 when etcd omits them: a default value) and the key's lease (0: none).
  int64_t create_revision = 0, mod_revision = 0, version = 0, lease = 0;
};

struct EtcdRangeResponse {
  int64_t revision = 0;  // header.revision: the store's revision when the range was served
  std::vector<EtcdKv> kvs;
};

// /v3/kv/range: {"header":{"revision":"N",...},"kvs":[{"key":B64,"value":B64,...}],...}.
// header.revision is required (a watch starts after it); kvs may be absent (no match).
[[nodiscard]] Status ParseEtcdRangeResponse(std::string_view text, EtcdRangeResponse* out);

// /v3/lease/grant: {"ID":"N","TTL":"N",...}. *lease_id gets the ID as a decimal string.
[[nodiscard]] Status ParseEtcdLeaseGrantResponse(std::string_view text, std::string* lease_id);

// /v3/auth/authenticate: {"token":"..."}. The token is sent back as an HTTP header, so it must
// be 1..4096 printable ASCII characters without spaces (no header injection).
[[nodiscard]] Status ParseEtcdAuthenticateResponse(std::string_view text, std::string* token);

// One message of a /v3/watch stream (the gateway sends one JSON object per line):
// {"result":{"events":[{"type":"PUT"|"DELETE","kv":{...}}],"canceled":bool,...}} or
// {"error":{...}}. *found is set (and *value gets the decoded value) when the message holds a
// PUT of exactly `key` (raw bytes, not base64). An error message, or a watch that etcd
// canceled (compaction, permission), is an error Status: the wait cannot succeed any more.
[[nodiscard]] Status ParseEtcdWatchMessage(std::string_view text, std::string_view key, bool* found,
                                           std::string* value);

// /v3/kv/txn: {"header":{"revision":"N"},"succeeded":bool,...}. The responses of the branch
// that ran are not decoded (callers read what they need with a range afterwards).
[[nodiscard]] Status ParseEtcdTxnResponse(std::string_view text, bool* succeeded,
                                          int64_t* revision);

// One message of /v3/lease/keepalive (streamed): {"result":{"ID":"N","TTL":"N"}}. *ttl gets
// the seconds left; 0 (or absent) means the lease has expired or never existed.
[[nodiscard]] Status ParseEtcdKeepAliveMessage(std::string_view text, int64_t* ttl);

struct EtcdEvent {
  bool deleted = false;  // DELETE (kv holds the key and mod_revision only); else PUT
  EtcdKv kv;
};

// One message of a /v3/watch stream, all its events: *events gets them (appended), *revision
// the message's header revision (0 if absent). A "created" or progress message has none. An
// error, or a watch etcd canceled (compacted past its start: the watcher must re-read), is an
// error Status.
[[nodiscard]] Status ParseEtcdWatchEvents(std::string_view text, std::vector<EtcdEvent>* events,
                                          int64_t* revision);

// Splits a stream of lines as its bytes arrive: etcd's /v3/watch (the gRPC gateway streams one
// JSON message per line). Work is linear in the bytes fed, however the stream is cut into
// chunks: each byte is scanned for '\n' once and each line is handed out once, so an etcd
// dribbling a message a byte at a time costs no more than sending it whole. The unterminated
// rest stays in the caller's buffer (the caller bounds its size: kMaxEtcdResponseBytes).
// One splitter per buffer and stream: the buffer may change only through Feed.
class EtcdLineSplitter {
 public:
  // Called with each complete line, without its '\n'; returns true to stop.
  using OnLine = bool (*)(std::string_view line, void* arg);

  // Appends `bytes` to *buffer, then hands each line now complete to on_line, in order, until
  // it returns true; erases the lines handed out from *buffer. True when on_line returned true
  // (the lines after that one stay in *buffer, unread).
  bool Feed(std::string* buffer, std::string_view bytes, OnLine on_line, void* arg);

  // Test hooks: bytes examined for a line end so far, and lines handed out.
  size_t bytes_scanned() const { return bytes_scanned_; }
  size_t lines() const { return lines_; }

 private:
  size_t scanned_ = 0;  // the buffer's first scanned_ bytes hold no '\n'
  size_t bytes_scanned_ = 0;
  size_t lines_ = 0;
};

// Base64 as the gateway's bytes fields use it. Decode is strict about the alphabet and where
// '=' may appear; false on anything else.
std::string EncodeBase64(std::string_view in);
[[nodiscard]] bool DecodeBase64(std::string_view in, std::string* out);

// At most `max` bytes of `text` for an error message, non-printable bytes as \xNN
// (common/printable.h's Printable).
std::string EtcdSnippet(std::string_view text, size_t max = 200);

}  // namespace rkv

#endif  // RKV_COMMON_ETCD_ETCD_JSON_H_
