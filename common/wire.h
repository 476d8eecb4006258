// SPDX-License-Identifier: Apache-2.0
// Wire formats between kvserver and clients (see docs/wire-format.md).
//
// All multi-byte fields are little-endian, fixed width, and at fixed offsets; the structs below
// are packed images that are memcpy'd to and from the wire (the build requires a little-endian
// host). Every Decode* validates magic, version and lengths and returns a message saying what
// was wrong. Thread safety: pure functions.
#ifndef RKV_COMMON_WIRE_H_
#define RKV_COMMON_WIRE_H_

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "rkv/status.h"

static_assert(__BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__, "rkv wire format assumes little-endian");

namespace rkv::wire {

inline constexpr uint16_t kProtocolVersion = 7;
inline constexpr uint32_t kHelloMagic = 0x524b5648;    // "HVKR"
inline constexpr uint32_t kRequestMagic = 0x524b5251;  // "QRKR"
inline constexpr uint32_t kReplyMagic = 0x524b5250;    // "PRKR"
inline constexpr uint32_t kMaxKeySize = 1024;
inline constexpr uint32_t kMaxValueSize = 64 * 1024;
inline constexpr size_t kMaxReplyPayload = 4096 - 24;

// rdma_connect private data (limit 56 bytes on RDMA_PS_TCP).
struct __attribute__((packed)) ClientHello {
  uint32_t magic;
  uint16_t version;
  uint16_t flags;
  uint64_t client_nonce;
};
static_assert(sizeof(ClientHello) == 16);
static_assert(sizeof(ClientHello) <= 56, "rdma_cm connect private data limit");

inline constexpr size_t kNonceSize = 16;
inline constexpr size_t kMacSize = 32;  // HMAC-SHA256
// ServerHello::flags bit: the server requires authentication (OPEN must carry a valid mac).
inline constexpr uint16_t kHelloAuthRequired = 1;

// In a refusal's text (rdma_reject private data, at most 140 bytes with its "BUSY: " prefix, or
// the tcp exchange's error): a --max_conns_per_source refusal names how many of the source's
// connections are being torn down as "<n> still closing". They leave once drained (300 ms on
// rxe, at most the 10 s drain deadline), so rkv::Client retries that refusal within its
// connect timeout; a refusal without it means live connections hold the cap.
inline constexpr char kBusyStillClosing[] = " still closing";

// rdma_accept private data (limit 196 bytes on RDMA_PS_TCP); in manual mode it follows the
// server's parameter record. It carries no secret and no address: anyone who can reach the port
// gets it. The table's address, rkey and geometry come only in the OPEN reply.
struct __attribute__((packed)) ServerHello {
  uint32_t magic;
  uint16_t version;
  uint16_t flags;  // kHelloAuthRequired
  // Request credits: requests this client may have outstanding (sent, reply not yet received)
  // at once. A client that exceeds them is dropped (docs/design.md, fairness).
  uint32_t credits;
  uint32_t reserved;
  // Fresh per connection (getrandom): the challenge the client's OPEN mac must cover.
  uint8_t server_nonce[kNonceSize];
};
static_assert(sizeof(ServerHello) == 32);
static_assert(sizeof(ServerHello) <= 196, "rdma_cm accept private data limit");

// Value of the OPEN request (its key is empty): the client's nonce and its mac over the
// transcript (common/auth.h); all zero mac when the server does not require authentication.
struct __attribute__((packed)) OpenRequest {
  uint8_t client_nonce[kNonceSize];
  uint8_t mac[kMacSize];
};
static_assert(sizeof(OpenRequest) == 48);

// Payload of a successful OPEN reply: what this connection may read, and the server's proof
// (all zero without authentication). region_addr is the address the client's rkey is valid at.
struct __attribute__((packed)) OpenReply {
  uint32_t magic;  // kHelloMagic
  uint16_t version;
  uint16_t flags;
  uint64_t instance_id;
  uint64_t region_addr;
  uint64_t region_size;
  uint32_t rkey;
  uint32_t num_buckets;
  uint64_t hash_seed;
  uint32_t bucket_size;
  uint32_t slot_size;
  uint64_t overflow_offset;
  uint32_t overflow_slots;
  uint32_t max_key_size;
  uint32_t max_value_size;
  uint32_t max_request_size;
  uint32_t credits;
  // Cluster (docs/cluster.md, "Ownership words"): the number of slots in this server's
  // ownership table (0: the server is not in a cluster) and its region offset (8-byte words,
  // one per slot, after the table's bytes; a multiple of 8).
  uint32_t owner_slots;
  uint64_t owner_offset;
  uint8_t server_mac[kMacSize];
};
static_assert(sizeof(OpenReply) == 128);

// Payload of a MOVED (or TRY_AGAIN) reply to a PUT or DELETE: the slot, the epoch of the map the
// server went by, and the owner that map names (kNoOwner: none). The text after these 16 bytes
// is for people. A cluster client re-reads the map when `epoch` is newer than its own.
inline constexpr uint32_t kNoOwner = 0xffffffff;
struct __attribute__((packed)) MovedPayload {
  uint64_t epoch;
  uint32_t slot;
  uint32_t owner_id;
};
static_assert(sizeof(MovedPayload) == 16);

// kParams: the reply payload is the server's connection parameter record
// (common/verbs/conn_params.h, 128 bytes) read back from the QP the request arrived on, memory
// parameters included.
// kSnapshot: asks a durable server to take a snapshot in the background (no key, no value);
// the reply payload says whether one was started (kvctl snapshot then watches the stats).
// kOpen: the first request of every connection (value: OpenRequest; reply payload: OpenReply).
// Until an OPEN succeeds the server answers every other op with UNAUTHENTICATED and drops the
// connection; a failed OPEN is answered the same way.
enum class Op : uint8_t {
  kPut = 1,
  kDelete = 2,
  kStats = 3,
  kParams = 4,
  kSnapshot = 5,
  kOpen = 6,
  // Cluster migration, server to server (docs/cluster.md, "Migration"): BEGIN's key is 1..256
  // little-endian u32 slots, which the receiver purges and marks IMPORTING (refused if it owns
  // any); PUT and DELETE then apply to keys of IMPORTING slots only.
  kMigrateBegin = 7,
  kMigratePut = 8,
  kMigrateDelete = 9,
  // Replication, primary to backup (docs/cluster.md, "Replication"): the key is a 32-byte
  // wire::ReplicateHeader (epoch, sequence, sender, PUT or DELETE, digest) followed by the entry's
  // key; the value is the entry's value (empty for a DELETE). Only a backup of the key's slot at
  // the header's epoch applies it, in sequence order, from the slot's primary.
  kReplicate = 10,
  // One-sided replication (docs/replication-rings.md): a primary asks a memory-only backup for
  // a log ring on this connection. The key is a wire::RingGrantRequest; no value. The OK
  // reply's payload is a wire::RingGrantReply. Answered by the connection's worker.
  kRingGrant = 11
};
inline constexpr uint8_t kMaxOp = 11;

// RING_GRANT's key and its answer (little-endian; x86 and ARM: the structs' layout).
struct __attribute__((packed)) RingGrantRequest {
  uint64_t epoch;      // the asker's applied map epoch (its sender check, as REPLICATE's)
  uint32_t writer_id;  // the asker's server id: the only sender its ring's records may name
  uint32_t reserved;   // zero
};
static_assert(sizeof(RingGrantRequest) == 16);
struct __attribute__((packed)) RingGrantReply {
  uint32_t rkey;   // for RDMA WRITEs (and READs of its control block) on this connection only
  uint32_t size;   // the ring's bytes; its address is 0 (zero-based)
  uint64_t epoch;  // the grant's epoch G: the asker writes only once its own map is that new
  uint64_t reserved;
};
static_assert(sizeof(RingGrantReply) == 24);

// The prefix of a REPLICATE request's key (little-endian; x86 and ARM: the struct's layout).
struct __attribute__((packed)) ReplicateHeader {
  uint64_t epoch;       // the map epoch the primary writes at
  uint64_t sequence;    // the slot's write number at the primary: 1, 2, ...
  uint32_t sender_id;   // the primary's server id
  uint8_t kind;         // kReplicatePut or kReplicateDelete
  uint8_t reserved[3];  // zero
  uint64_t digest;      // ReplicateDigest(kind, key, value): a repeat must match it
};
static_assert(sizeof(ReplicateHeader) == 32);
// XXH3-64 of the value seeded with XXH3-64 of the key seeded with the kind.
uint64_t ReplicateDigest(uint8_t kind, std::string_view key, std::string_view value);
inline constexpr uint8_t kReplicatePut = 1;
inline constexpr uint8_t kReplicateDelete = 2;
// A promoted primary's question to a backup it kept (docs/cluster.md, "Failover"): the key
// after the header is the slot, a little-endian u32; no value; sequence 0; the digest is
// ReplicateDigest(kReplicateQuery, those 4 bytes, ""). The answer's payload is a
// ReplicaLastWrite followed by its key_size bytes of key: the last write this backup applied
// to the slot (has = 0: none since it became the slot's backup).
inline constexpr uint8_t kReplicateQuery = 3;
struct __attribute__((packed)) ReplicaLastWrite {
  uint64_t digest;    // the write's ReplicateDigest
  uint32_t has;       // 1: a write is named; 0: none (digest and key_size 0)
  uint32_t key_size;  // <= kMaxKeySize
};
static_assert(sizeof(ReplicaLastWrite) == 16);

struct __attribute__((packed)) RequestHeader {
  uint32_t magic;
  uint16_t version;
  uint8_t op;
  uint8_t flags;
  uint64_t request_id;
  uint32_t key_size;
  uint32_t value_size;
};
static_assert(sizeof(RequestHeader) == 24);
// A REPLICATE request carries a ReplicateHeader besides the largest key and value.
inline constexpr size_t kMaxRequestSize =
    sizeof(RequestHeader) + sizeof(ReplicateHeader) + kMaxKeySize + kMaxValueSize;

struct __attribute__((packed)) ReplyHeader {
  uint32_t magic;
  uint16_t status;  // rkv::Code
  uint8_t op;
  uint8_t flags;
  uint64_t request_id;
  uint32_t payload_size;
  uint32_t reserved;
};
static_assert(sizeof(ReplyHeader) == 24);
inline constexpr size_t kMaxReplySize = sizeof(ReplyHeader) + kMaxReplyPayload;

// Validates a ServerHello received as accept private data of `len` bytes (magic, version,
// length, credits).
Status DecodeServerHello(const void* data, size_t len, ServerHello* out);
// Validates an OPEN request value (exactly sizeof(OpenRequest) bytes).
Status DecodeOpenRequest(std::string_view value, OpenRequest* out);
// Validates an OPEN reply payload: exact length, magic, version, geometry within the region,
// non-zero limits and credits.
Status DecodeOpenReply(std::string_view payload, OpenReply* out);
Status DecodeClientHello(const void* data, size_t len, ClientHello* out);

// Encodes a request into buf (capacity cap). Returns bytes written, 0 if it does not fit.
size_t EncodeRequest(Op op, uint64_t request_id, std::string_view key, std::string_view value,
                     void* buf, size_t cap);

struct Request {
  Op op;
  uint64_t request_id;
  std::string_view key;    // points into the decoded buffer
  std::string_view value;  // points into the decoded buffer
};
// Validates a received request of `len` bytes; on error the message says what is malformed.
Status DecodeRequest(const void* data, size_t len, Request* out);

size_t EncodeReply(Op op, uint64_t request_id, Code status, std::string_view payload, void* buf,
                   size_t cap);
struct Reply {
  Code status;
  Op op;
  uint64_t request_id;
  std::string_view payload;
};
Status DecodeReply(const void* data, size_t len, Reply* out);

}  // namespace rkv::wire

#endif  // RKV_COMMON_WIRE_H_
