// SPDX-License-Identifier: Apache-2.0
// Server: kvserver's composition root. Start() builds everything: the rdma_cm listener
// (CmAcceptor), the table region (registered for windows), the shared receive queue (SrqPool;
// window mode only: in registration mode each connection has a PD and a receive queue of its
// own, server/conn/private_domain.h), one Worker per --workers (each a thread with its own CQ), the
// async-event thread, and with
// --exchange=tcp|file|etcd the manual-mode acceptor. Run() serves on the calling thread (it
// becomes the rdma_cm thread) until Stop().
//
// Threads and what each owns: the rdma_cm thread (CmAcceptor: listener, rdma_cm ids);
// workers (a CQ each, and the connections assigned to it from adoption to drain); the
// exchange thread and its handshake threads (ManualAcceptor); the async-event thread. The
// connection lifecycle is documented in server/conn/conn.h. GETs never reach the server.
// Ownership: the Server owns every component. Destruction: threads are stopped and joined
// first; then every connection is dropped (QP destroyed, then its own PD if any, then its id)
// while the CQs, SRQ, PD and event channel still exist; then workers (CQs), SRQ pool, MRs, PD,
// listener. With --metrics_listen (ServerOptions::metrics_host) Start() also binds the Prometheus
// endpoint (server/metrics/metrics_http_server.h), which serves on threads of its own and only
// reads the counters and CollectStats' figures; it is stopped and joined first at shutdown.
// Thread safety: Stop() may be called from any thread, also a signal handler (it only sets
// an atomic flag); everything else from the thread that owns the Server.
#ifndef RKV_SERVER_SERVER_H_
#define RKV_SERVER_SERVER_H_

#include <atomic>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "common/verbs/rdma.h"
#include "rkv/status.h"
#include "server/cluster/cluster_node.h"
#include "server/cluster/ownership_table.h"
#include "server/conn/async_events.h"
#include "server/conn/cm_acceptor.h"
#include "server/conn/conn_registry.h"
#include "server/conn/manual_acceptor.h"
#include "server/conn/source_limiter.h"
#include "server/conn/srq_pool.h"
#include "server/conn/worker.h"
#include "server/durability/dir_lock.h"
#include "server/durability/durable_log.h"
#include "server/durability/snapshotter.h"
#include "server/metrics/counters.h"
#include "server/metrics/metrics_http_server.h"
#include "server/metrics/metrics_registry.h"
#include "server/rpc_executor.h"
#include "server/server_options.h"
#include "server/store/table.h"
#include "server/write_pool.h"

namespace rkv {

class Server {
 public:
  explicit Server(ServerOptions options);
  ~Server();
  Server(const Server&) = delete;
  Server& operator=(const Server&) = delete;

  // Allocates and registers the region, binds and listens. Logs the advertised parameters.
  [[nodiscard]] Status Start();
  // Serves until Stop(); returns the first fatal error, or OK.
  [[nodiscard]] Status Run();
  void Stop() { stop_.store(true); }
  uint16_t bound_port() const { return cm_ ? cm_->bound_port() : 0; }
  // The metrics endpoint's port (0: none).
  uint16_t metrics_port() const { return metrics_http_ ? metrics_http_->port() : 0; }

 private:
  // The accept private data without a nonce (no address, rkey or geometry).
  wire::ServerHello MakeHello() const;
  // What a successful OPEN returns (without the per-connection server mac).
  wire::OpenReply MakeOpenReply() const;
  // --data_dir: lock the directory, recover the table from it, open the log, make the
  // snapshotter.
  [[nodiscard]] Status OpenDurability();
  // The `kvctl stats` figures: the counters', the table's and, when durable, the log's.
  std::vector<StatValue> CollectStats() const;
  std::string StatsText() const;
  // --metrics_listen: bind and start the endpoint.
  [[nodiscard]] Status StartMetrics();
  void StopThreads();

  // Immutable once Init has resolved its automatic values (reply_signal_every needs the device),
  // which happens before any thread that reads it starts.
  ServerOptions opt_;
  std::atomic<bool> stop_{false};
  std::atomic<uint64_t> next_serial_{0};
  uint64_t instance_id_ = 0;
  ServerCounters counters_;

  // Declared in creation order; destroyed in reverse (see the header comment).
  std::unique_ptr<CmAcceptor> cm_;  // event channel + listen id
  ibv_context* ctx_ = nullptr;      // owned by librdmacm's device list
  PdPtr pd_;
  struct Unmap {
    size_t len;
    void operator()(uint8_t* p) const;
  };
  std::unique_ptr<uint8_t, Unmap> region_{nullptr, Unmap{0}};
  uint64_t region_bytes_ = 0;  // registered: the table's --memory, then the ownership table
  uint64_t owner_offset_ = 0;  // --cluster: region offset of the ownership words
  std::unique_ptr<Table> table_;
  std::unique_ptr<cluster::OwnershipTable> owners_;  // --cluster only; in region_
  wal::DirLock dir_lock_;
  std::unique_ptr<wal::DurableLog> log_;           // --data_dir only; the table's WriteLog
  std::unique_ptr<wal::Snapshotter> snapshotter_;  // --data_dir only
  MrPtr region_mr_;       // windows only, MW_BIND only: its rkey grants nothing remotely
  bool windows_ = false;  // the device has type-2 memory windows
  std::vector<uint8_t> send_buf_;
  MrPtr send_mr_;                 // windows only (else each connection's PD registers its share)
  std::unique_ptr<SrqPool> srq_;  // windows only (else a receive queue per connection)
  std::unique_ptr<RpcExecutor> exec_;
  // --data_dir or a replicated cluster: PUT/DELETE off the workers (they wait for the log or
  // the backups); repl_writes_: a replicated cluster's REPLICATE requests (WorkerEnv).
  std::unique_ptr<WritePool> writes_;
  std::unique_ptr<WritePool> repl_writes_;
  Options replica_links_;  // the workers' replication links' options (WorkerEnv::replica_links)
  // --data_dir only: receive times of writes waiting for or in the pool (WorkerEnv).
  std::vector<Conn::Clock::time_point> write_received_;
  std::vector<uint32_t> write_ring_head_;
  std::vector<std::unique_ptr<Worker>> workers_;
  std::unique_ptr<ConnRegistry> registry_;
  std::unique_ptr<SourceLimiter> limiter_;  // per-address caps; Leases may outlive it
  std::unique_ptr<AsyncEvents> async_;
  std::unique_ptr<ManualAcceptor> manual_;
  std::unique_ptr<metrics::MetricsRegistry> metrics_;         // --metrics_listen only
  std::unique_ptr<metrics::MetricsHttpServer> metrics_http_;  // reads metrics_; stopped first
  // --cluster only. Destroyed first (declared last): its threads write owners_' words.
  std::unique_ptr<cluster::ClusterNode> cluster_;
};

}  // namespace rkv

#endif  // RKV_SERVER_SERVER_H_
