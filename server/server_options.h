// SPDX-License-Identifier: Apache-2.0
// ServerOptions: everything kvserver is configured with (flags in server/main.cc).
// Thread safety: plain data, immutable once the Server is constructed.
#ifndef RKV_SERVER_SERVER_OPTIONS_H_
#define RKV_SERVER_SERVER_OPTIONS_H_

#include <cstdint>
#include <string>

#include "common/cluster/cluster_address.h"
#include "common/etcd/etcd_transport.h"
#include "common/verbs/conn_params.h"
#include "rkv/connection_params.h"
#include "server/durability/log_writer.h"

namespace rkv {

struct ServerOptions {
  std::string host = "0.0.0.0";
  uint16_t port = 7470;
  // --cluster (docs/cluster.md): the cluster to join (name empty: none), etcd's TLS and auth
  // settings (endpoints from `cluster`), this server's failure domain and its lease's TTL.
  cluster::ClusterAddress cluster;
  EtcdSettings cluster_etcd;
  std::string zone;
  int cluster_lease_ttl_s = 2;
  // A backup unreachable from its primary this long is reported (0: never; docs/cluster.md,
  // "Partial partitions").
  int cluster_suspect_after_ms = 5000;
  // A replicated write goes to the backups from the worker that received it
  // (server/conn/replica_fast_path.h); false: through the write pool.
  bool replicate_on_worker = true;
  // One-sided replication (docs/replication-rings.md): the fast path writes to log rings its
  // backups granted, and a memory-only backup grants them, of this many bytes.
  bool replication_rings = true;
  size_t replication_ring_bytes = 1 << 20;
  // With --data_dir: a server whose log fails steps down, and probes its directory again after
  // this long (doubling; docs/cluster.md, "A failing disk").
  int cluster_disk_hold_ms = 30000;
  uint64_t migration_rate = 64ull << 20;  // bytes/s a slot migration copies at most (0: unpaced)
  uint64_t memory = 256ull << 20;
  uint32_t buckets = 0;  // 0: derived from memory and index_fraction
  double index_fraction = 0.25;
  int workers = 2;
  // Microseconds a worker keeps polling its CQ after its last completion before it sleeps on the
  // completion channel (docs/kvserver.md, "Polling"). 0: never spin (sleep at once). The Server
  // resolves -1 (auto) to 50 when the process may run on at least workers + 2 CPUs, else 0.
  int poll_spin_us = -1;
  // Replies signalled one in this many; 0 (auto) is resolved by Server::Init from the device
  // (Worker::SignalEvery reads the resolved value).
  int reply_signal_every = 0;
  int max_connections = 1024;
  // Connections in setup at once (rdma_cm accepted but not established, manual handshakes in
  // progress); more are refused.
  int max_pending = 64;
  int srq_depth = 256;
  int max_bad_requests = 16;  // a client that sends more malformed requests is disconnected
  // Requests a client may have outstanding (announced in the hello); a client with more than
  // 2 x credits + kCreditSlack (+ N - 1, selective signalling) unacknowledged requests is
  // dropped (Worker::CreditLimit).
  int credits = 4;
  // A connection that shows no sign of life (requests, completions, keepalive answers) for
  // this long is torn down; keepalives go out after a third of it without traffic.
  int peer_timeout_ms = 30000;
  // rdma_cm: accept -> ESTABLISHED, and a manual handshake, must finish within this.
  int accept_timeout_ms = 5000;
  // Per source address (server/conn/source_limiter.h): live connections (0: no cap), of them not
  // yet opened (in setup or without a successful OPEN; 0: no cap; -1: max(1, max_pending / 8)), and
  // connection attempts per second on average with bursts of connect_burst_per_source (0: no rate
  // limit). rdma_cm and tcp-exchange connections; file and etcd exchanges have no source address.
  // Server::Start refuses values out of range (CheckLimitOptions).
  int max_conns_per_source = 64;
  int max_pending_per_source = -1;
  double connects_per_source_per_s = 1000;
  int connect_burst_per_source = 1000;
  // Durability (docs/design.md, "Durability"). Empty data_dir: memory-only.
  std::string data_dir;
  wal::FsyncMode fsync = wal::FsyncMode::kEverySec;
  bool recover_truncate = false;  // keep what precedes a corrupt record instead of refusing
  uint64_t snapshot_log_bytes = 64ull << 20;  // snapshot when the log file grows past (0: never)
  int write_threads = 16;                     // durable servers: PUT/DELETE threads
  int commit_timeout_ms = 30000;              // a log commit stalled this long breaks the log
  // The shared secret clients must prove (kvserver --auth_token_file; docs/security.md).
  // Empty: no authentication (then listening on a wildcard address needs
  // allow_unauthenticated).
  std::string auth_token;
  bool allow_unauthenticated = false;
  // How each client gets its private rkey (docs/security.md, "Private rkeys"): false: a type-2
  // memory window when the device has them, else a registration of its own; true: always a
  // registration of its own (ibv_reg_mr_iova), e.g. to compare their cost.
  bool rkey_registration = false;
  // Prometheus endpoint (kvserver --metrics_listen; docs/metrics.md). Empty host: none.
  std::string metrics_host;
  uint16_t metrics_port = 0;
  ExchangeOptions exchange;  // kRdmaCm: rdma_cm only; else also manual mode over this method
  QpSettings qp;             // connection parameters (docs/connection.md)
};

// Unacknowledged requests tolerated beyond the announced credits: a reply the client has
// received may not have completed at the server yet (acknowledgements can be coalesced).
inline constexpr int kCreditSlack = 2;

}  // namespace rkv

#endif  // RKV_SERVER_SERVER_OPTIONS_H_
