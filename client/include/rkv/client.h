// SPDX-License-Identifier: Apache-2.0
// rkv::Client: a connection to one kvserver.
//
// GETs are served by one-sided RDMA READs of the server's table: the server's CPU never runs
// for a GET. PUT and DELETE are send/recv RPCs executed by the server. A GET never returns a
// torn, freed or wrong-key value: entries carry an XXH3 checksum and a version, and the client
// compares keys itself (see docs/design.md).
//
// Thread safety: a Client is NOT thread-safe. Use one Client per thread (each owns its own QP,
// CQ and buffers). Different Clients may be used concurrently.
// Ownership: the Client owns every verbs/rdma_cm object it creates; destroying it disconnects.
// Errors: no exceptions; every call returns rkv::Status. By default (Options::auto_reconnect
// false), after kConnectionLost every call fails fast until Reconnect() succeeds.
// Reconnection (Options::auto_reconnect true): a call finds the connection lost when it fails
// and the connection is unusable: an error completion (the server died or the QP failed), a
// failed post, no completion within rpc_timeout_ms (kTimeout), a malformed reply, or a
// connection an earlier call already lost. That call then reconnects to the same address: an
// attempt at once, then attempts separated by waits of reconnect_initial_backoff_ms doubling up
// to reconnect_max_backoff_ms, each drawn at random from [w/2, w], all within
// reconnect_timeout_ms. If no attempt succeeds, the call returns kConnectionLost whose message
// carries the original failure and the last connect error; the next call tries again. If one
// succeeds (the server may be the same instance or a restarted one with a new id, region and
// rkey; reconnects and server_restarts count these):
//  - Get, MultiGet, Stats and RequestSnapshot are retried once on the new connection and return the
//  retried
//    result (reads are safe to repeat). A Get of a key the restarted server does not hold returns
//    NOT_FOUND. If the retry fails too, its failure is returned (not retried again).
//  - Put and Delete are never sent twice. A write that was sent on the lost connection has an
//    unknown outcome: the old server may or may not have applied it (retrying could overwrite
//    another client's newer write, or report NOT_FOUND for a DELETE that happened). A write issued
//    when the connection was already lost is not sent at all. Either way the call returns
//    kServerRestarted if the reconnect found a new server instance id, else kConnectionLost, with
//    a message saying the connection was re-established and whether the write's outcome is
//    unknown or it was not sent; the caller decides whether to issue it again. The next call
//    works normally. A write whose reconnect fails returns kConnectionLost (same wording).
// So a call that meets a lost server may take up to rpc_timeout_ms to notice it (an error
// completion when the QP's retries run out, else the timeout: on soft-RoCE a killed server was
// noticed only by the timeout), then up to about reconnect_timeout_ms reconnecting, then a
// read's retry. Connect itself does not retry: it fails fast if the server cannot be reached.
// Waits poll without sleeping for their first 20 ms, then sleep 50 us between polls (a wait
// that long is a failure being sorted out, not a round trip: the core is left to others).
// Consistency: per key linearizable. Once Put returns OK, every Get that starts later, from any
// client, returns that value or a newer one.
#ifndef RKV_CLIENT_H_
#define RKV_CLIENT_H_

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "rkv/connection_params.h"
#include "rkv/status.h"

namespace rkv {

struct Options {
  int connect_timeout_ms = 5000;
  int rpc_timeout_ms = 10000;
  // Upper bound on re-reads of one GET that keep seeing an entry being written.
  int max_get_retries = 1000;
  // How to connect: rdma_cm (default) or manual mode with parameters exchanged over tcp, file
  // or etcd (see rkv/connection_params.h and docs/connection.md).
  ExchangeOptions exchange;
  // Connection parameters a user may set (device, port, GID index, MTU, PSN, timers, ...).
  QpSettings qp;
  // Reconnect automatically when a call finds the connection lost (see "Reconnection" in the
  // Client contract below: reads are retried once, writes never). Off: calls fail fast with
  // kConnectionLost until Reconnect() is called.
  bool auto_reconnect = false;
  // Wait before the second connection attempt of a reconnect (the first is made at once); each
  // later wait doubles, up to reconnect_max_backoff_ms. A wait of w ms is drawn uniformly from
  // [w/2, w] so that many clients do not retry in step. Must be >= 0 (0: no wait).
  int reconnect_initial_backoff_ms = 50;
  // Cap on the wait between attempts. Must be >= reconnect_initial_backoff_ms.
  int reconnect_max_backoff_ms = 1000;
  // Total time one call may spend reconnecting, attempts and waits included (each attempt's
  // connect_timeout_ms and exchange.timeout_ms are cut to what remains). Must be >= 0 (0: a
  // single attempt with the full connect_timeout_ms). Past it the call returns kConnectionLost.
  int reconnect_timeout_ms = 30000;
  // Connect returns kInvalidArgument naming the option if a reconnect_* value breaks its rule
  // (checked whether or not auto_reconnect is on).
  // The secret shared with the server (kvserver --auth_token_file; the bytes, not a path). Set:
  // the client proves it at connect without sending it, and refuses a server that does not
  // prove it back or does not require it. Empty: only a server without authentication can be
  // used; one that requires it gives UNAUTHENTICATED "server requires authentication".
  std::string auth_token;
  // Entries of the location cache: key hash -> where the key's entry was last seen, so that a
  // GET of a key this client has read or written reads its slot (128 B, plus the value's heap
  // block) instead of its 2 KiB bucket pair. Every hit is verified (a stale location costs a
  // fallback read, never a wrong answer; docs/design.md, "The location cache"). 32 bytes per
  // entry, allocated at Connect (65536: 2 MiB); rounded up to a power of two; 0 turns the cache
  // off. At most 4194304 (Connect returns kInvalidArgument naming the option).
  int location_cache_entries = 65536;
  // How a wait for a PUT/DELETE reply uses the core. -1 (default): it polls (the lowest
  // latency with a core to spare). N >= 0: it polls for N microseconds, then sleeps until a
  // completion arrives (an interrupt: a completion channel), for a process that shares its
  // cores with the server it waits for. GETs always poll. At most 1000000 (Connect returns
  // kInvalidArgument naming the option).
  int reply_spin_us = -1;
  // rdma_cm mode: the local address to connect from (an IPv4 address of an RDMA interface, or a
  // name resolving to one); empty: the route's choice. kvserver's replication links use their
  // server's --listen address: a backup takes REPLICATE only from the address its sender
  // registered.
  std::string local_address;

  // Cluster addresses (etcd://HOST:PORT/NAME) only. true: a thread watches the cluster's slot
  // map in etcd, so a client learns of moves as they are committed. false: no watch; the client
  // re-reads the map only when a server redirects it (MOVED), at the cost of a redirection per
  // moved slot it meets (for many short-lived clients; tests use it for a deliberately stale
  // map). Either way no stale value is returned (docs/cluster.md).
  bool watch_cluster_map = true;
};

// Counters kept by the client; cumulative since Connect.
struct ClientCounters {
  uint64_t gets = 0;              // Get calls plus keys passed to MultiGet
  uint64_t reads_posted = 0;      // RDMA READ work requests posted
  uint64_t round_trips = 0;       // batches of READs waited for (one network round trip each)
  uint64_t checksum_retries = 0;  // GET attempts restarted after a torn or inconsistent entry
  uint64_t rpcs = 0;              // PUT/DELETE/STATS requests sent
  uint64_t reconnects = 0;        // successful reconnects: automatic, or by Reconnect()
  uint64_t server_restarts = 0;   // reconnects that found a new server instance id
  uint64_t bytes_read = 0;        // bytes requested by the READs posted (GET and MultiGet)
  uint64_t cache_hits = 0;        // Gets answered through a cached location
  uint64_t cache_misses = 0;      // Gets that read the bucket pair (no entry, or it was stale)
  // Cluster clients (Connect("etcd://...")): operations sent again after MOVED or TRY_AGAIN,
  // and reads of the slot map from etcd made for them.
  uint64_t redirects = 0;
  uint64_t map_refreshes = 0;
  // Writes to a replicated cluster whose wait for a reply was given up because the map failed
  // the server over while it waited (returned CONNECTION_LOST: outcome unknown).
  uint64_t abandoned_waits = 0;
};
// (A Get or MultiGet retried after an automatic reconnect counts its keys in `gets` again.)
// Sums and differences, field by field (e.g. several clients' counters, or a phase's share).
inline ClientCounters& operator+=(ClientCounters& a, const ClientCounters& b) {
  a.gets += b.gets;
  a.reads_posted += b.reads_posted;
  a.round_trips += b.round_trips;
  a.checksum_retries += b.checksum_retries;
  a.rpcs += b.rpcs;
  a.reconnects += b.reconnects;
  a.server_restarts += b.server_restarts;
  a.bytes_read += b.bytes_read;
  a.cache_hits += b.cache_hits;
  a.cache_misses += b.cache_misses;
  a.redirects += b.redirects;
  a.map_refreshes += b.map_refreshes;
  a.abandoned_waits += b.abandoned_waits;
  return a;
}
inline ClientCounters& operator-=(ClientCounters& a, const ClientCounters& b) {
  a.gets -= b.gets;
  a.reads_posted -= b.reads_posted;
  a.round_trips -= b.round_trips;
  a.checksum_retries -= b.checksum_retries;
  a.rpcs -= b.rpcs;
  a.reconnects -= b.reconnects;
  a.server_restarts -= b.server_restarts;
  a.bytes_read -= b.bytes_read;
  a.cache_hits -= b.cache_hits;
  a.cache_misses -= b.cache_misses;
  a.redirects -= b.redirects;
  a.map_refreshes -= b.map_refreshes;
  a.abandoned_waits -= b.abandoned_waits;
  return a;
}

// What the server granted at OPEN (after the rdma_cm accept or the manual exchange), plus the
// connection in use.
struct ServerInfo {
  uint64_t instance_id = 0;
  uint64_t region_addr = 0;
  uint32_t rkey = 0;
  uint64_t region_size = 0;
  uint32_t num_buckets = 0;
  uint32_t overflow_slots = 0;
  uint64_t hash_seed = 0;  // seed of the table's XXH3-64 key hash (docs/wire-format.md, Table)
  uint32_t max_key_size = 0;
  uint32_t max_value_size = 0;
  uint16_t protocol_version = 0;
  uint32_t request_credits = 0;  // requests this client may have outstanding (Client::Execute)
  std::string device;
  uint8_t port = 0;
  uint32_t qp_num = 0;
  uint32_t path_mtu = 0;   // bytes
  int gid_index = -1;      // source GID index of the QP's path (-1: no GRH, InfiniBand LID routing)
  std::string link_layer;  // "Ethernet" (RoCE) or "InfiniBand"
  Exchange exchange = Exchange::kRdmaCm;  // how the connection was set up
  // Every connection parameter as the two QPs really use it: `local` read back from this
  // client's QP (ibv_query_qp), `peer` read back by the server from its QP (memory parameters
  // included). mtu_note says when the path MTU was negotiated down (manual mode).
  ConnParams local, peer;
  std::string mtu_note;
};

class ClientImpl;
class ClusterRouter;

// One operation of a pipelined batch (Client::Execute).
struct BatchOp {
  enum class Type : uint8_t { kGet, kPut, kDelete };
  Type type = Type::kGet;
  std::string_view key;
  std::string_view value;         // kPut: the value
  std::string* result = nullptr;  // kGet: receives the value (required; capacity reused)
  Status status;                  // set by Execute: OK, NOT_FOUND or this operation's error
};

// `kvctl check`: runs the connection-parameter validator against the server at `address`
// without connecting a data QP. Manual modes exchange CHECK records (the server validates its
// side, this call the client's); rdma_cm resolves the route and reports it. *report gets the
// "parameter local peer" table and both verdicts. kParamMismatch if a rule is broken.
Status CheckConnection(const std::string& address, const Options& options, std::string* report);

class Client {
 public:
  // address is "HOST:PORT" (IPv4 address or name of an RDMA-capable interface's address).
  // Two BUSY refusals pass by themselves and are tried again, with short jittered pauses,
  // within connect_timeout_ms: this host has too many connects in setup at once (kvserver
  // --max_pending_per_source), or it is at its connection cap (--max_conns_per_source) while
  // some of its connections are still closing on the server (a loop of connect and close
  // meets it). Any other refusal is returned at once (BUSY for live connections included).
  static Status Connect(const std::string& address, const Options& options,
                        std::unique_ptr<Client>* client);
  ~Client();
  Client(const Client&) = delete;
  Client& operator=(const Client&) = delete;

  // One-sided GET. On OK *value holds the value (its capacity is reused: no allocation when
  // large enough). NOT_FOUND if absent.
  Status Get(std::string_view key, std::string* value);
  // Posts the READs of all keys at once (in batches of up to 16 keys), then resolves each.
  // (*statuses)[i] is OK or NOT_FOUND or an error for keys[i]; the returned Status is not OK
  // only when the connection failed.
  Status MultiGet(const std::vector<std::string_view>& keys, std::vector<std::string>* values,
                  std::vector<Status>* statuses);
  Status Put(std::string_view key, std::string_view value);
  Status Delete(std::string_view key);
  // Executes ops[0..n) with many operations in flight on this connection: the PUTs and DELETEs
  // are pipelined up to the server's request credits (ServerInfo::request_credits; each reply is
  // taken as it comes and the next request posted), and meanwhile every GET's READs are posted
  // together as MultiGet posts them. Writes are applied in the order given; a GET of a key that
  // the same batch writes may return the value from before or after that write (they run
  // concurrently). ops[i].status is set for every operation. The returned Status is not OK only
  // when the connection failed; then each operation says what happened to it: a PUT or DELETE
  // that was sent and not answered has kConnectionLost "outcome unknown" (it may or may not have
  // been applied), one not yet sent kConnectionLost "not sent", a GET not yet decided the
  // failure. Nothing is retried; with auto_reconnect the connection is re-established before
  // the call returns (the next call can go on). Through a cluster address the writes of one
  // key are applied in the order given, writes of different keys in any order (they may be on
  // different servers), and each server's share is in flight at once; a write whose server
  // failed is reported the same way, the others go on (docs/cluster.md, "Clients").
  Status Execute(BatchOp* ops, size_t n);
  Status Execute(std::vector<BatchOp>* ops) { return Execute(ops->data(), ops->size()); }
  // Server counters as "name value" lines.
  Status Stats(std::string* text);
  // Asks a durable server (kvserver --data_dir) to take a snapshot in the background; returns at
  // once with the server's answer in *message ("snapshot started", or one is already running).
  // Watch Stats' snapshots_taken / snapshots_failed for the outcome. INVALID_ARGUMENT from a
  // memory-only server.
  Status RequestSnapshot(std::string* message);
  // Drops the current connection and connects again to the same address: one attempt, no
  // backoff, whatever Options::auto_reconnect says. Returns kServerRestarted (after connecting)
  // if the server's instance id changed.
  Status Reconnect();

  // Cumulative since Connect: they survive reconnects.
  const ClientCounters& counters() const;
  const ServerInfo& server_info() const;

 private:
  explicit Client(std::unique_ptr<ClientImpl> impl);
  explicit Client(std::unique_ptr<ClusterRouter> router);
  std::unique_ptr<ClientImpl> impl_;       // one server (ADDR:PORT)
  std::unique_ptr<ClusterRouter> router_;  // a cluster (etcd://...)
};

}  // namespace rkv

#endif  // RKV_CLIENT_H_
