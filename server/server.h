// Server: accepts rdma_cm connections (and, with --exchange=tcp|file|etcd, manual-mode
// connections whose parameters are exchanged over that channel), advertises the table region,
// executes PUT/DELETE/STATS/PARAMS.
//
// Threads: Run() owns the rdma_cm thread (listener, event channel, lifecycle of rdma_cm
// connections); in manual mode it starts the exchange thread, which owns the exchange listener
// and the whole lifecycle of manual connections (handshake, validator, liveness of their
// control channels, destruction). It starts `workers` threads, each owning one completion
// channel + CQ. A connection's QP uses one worker's CQ for sends and receives; all QPs share
// one SRQ. GETs never reach the server.
// Ownership: the Server owns the region (mmap), its MR, the PD, SRQ, CQs and every Conn.
// Destruction order of members: connections, CQs (workers), MRs, SRQ, PD, listener id, channel.
// Connection lifecycle (Conn::State, documented at its declaration).
// Thread safety: Stop() may be called from any thread (e.g. a signal handler sets the flag);
// all other methods are called by the thread that calls Run().
#ifndef RKV_SERVER_SERVER_H_
#define RKV_SERVER_SERVER_H_

#include <atomic>
#include <chrono>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "common/exchange.h"
#include "common/mutex.h"
#include "common/rdma.h"
#include "rkv/status.h"
#include "server/table.h"

namespace rkv {

struct ServerOptions {
  std::string host = "0.0.0.0";
  uint16_t port = 7470;
  uint64_t memory = 256ull << 20;
  uint32_t buckets = 0;  // 0: derived from memory and index_fraction
  double index_fraction = 0.25;
  int workers = 2;
  int max_connections = 1024;
  int srq_depth = 256;
  int max_bad_requests = 16;  // a client that sends more malformed requests is disconnected
  ExchangeOptions exchange;   // kRdmaCm: rdma_cm only; else also manual mode over this method
  QpSettings qp;              // connection parameters (docs/connection.md)
};

class Server {
 public:
  explicit Server(ServerOptions options);
  ~Server();
  Server(const Server&) = delete;
  Server& operator=(const Server&) = delete;

  // Allocates and registers the region, binds and listens. Logs the advertised parameters.
  Status Start();
  // Serves until Stop(); returns the first fatal error, or OK.
  Status Run();
  void Stop() { stop_.store(true); }
  uint16_t bound_port() const { return bound_port_; }

 private:
  struct Conn {
    // Lifecycle: kAccepting (QP created; rdma_cm: accept sent; manual: records being
    // exchanged) -> kEstablished -> kClosing (QP in ERR, waiting for its in-flight sends to
    // flush) -> destroyed. Only the owning thread (cm thread for rdma_cm connections, exchange
    // thread for manual ones) changes it; workers read it.
    enum class State { kAccepting, kEstablished, kClosing };
    std::atomic<State> state{State::kAccepting};
    int index = 0;             // send-buffer slot
    int worker = 0;            // whose CQ this QP uses
    rdma_cm_id* id = nullptr;  // rdma_cm mode: owned, destroyed after the QP; null in manual mode
    ibv_qp* qp = nullptr;      // id->qp, or (manual mode) owned: ibv_destroy_qp
    std::unique_ptr<ExchangeChannel> control;  // manual mode: the open exchange channel
    std::atomic<int> sends_in_flight{0};
    std::atomic<int> bad_requests{0};
    std::atomic<bool> disconnect_requested{false};
    uint32_t next_send = 0;  // used by the owning worker only
  };
  struct Worker {
    CompChannelPtr channel;
    CqPtr cq;  // declared after channel: destroyed first
    std::thread thread;
  };
  static constexpr int kSendSlotsPerConn = 4;
  static constexpr size_t kSendSlotSize = 4096;

  void WorkerLoop(int w);
  void ExchangeLoop();
  void HandleExchange(std::unique_ptr<ExchangeChannel> ch);
  wire::ServerHello MakeHello() const;
  ibv_qp_init_attr QpAttr(int worker) const;
  bool TakeSlot(int* index);
  void ReleaseSlot(int index);
  // One line with the parameters both QPs use, for the connection log.
  static std::string ParamsLine(ibv_qp* qp);
  void HandleRecv(const ibv_wc& wc);
  void HandleConnectRequest(rdma_cm_event* ev);
  void CloseConn(rdma_cm_id* id);
  void DestroyConn(std::shared_ptr<Conn> c);
  std::shared_ptr<Conn> FindByQpn(uint32_t qpn);
  Status PostRecv(uint32_t index);
  std::string StatsText();

  const ServerOptions opt_;
  std::atomic<bool> stop_{false};
  uint64_t instance_id_ = 0;
  uint16_t bound_port_ = 0;

  EventChannelPtr channel_;
  CmIdPtr listen_id_;
  ibv_context* ctx_ = nullptr;  // owned by librdmacm's device list
  PdPtr pd_;
  SrqPtr srq_;
  struct Unmap {
    size_t len;
    void operator()(uint8_t* p) const;
  };
  std::unique_ptr<uint8_t, Unmap> region_{nullptr, Unmap{0}};
  std::vector<uint8_t> recv_buf_, send_buf_;
  MrPtr region_mr_, recv_mr_, send_mr_;
  std::unique_ptr<Table> table_;
  std::vector<std::unique_ptr<Worker>> workers_;
  std::unique_ptr<ExchangeListener> exchange_listener_;  // owned by the exchange thread
  std::thread exchange_thread_;
  std::vector<std::shared_ptr<Conn>> manual_;  // exchange thread only
  // Channels of finished exchanges (refused, checked, failed) kept until the client has read
  // the last reply and left, or the exchange timeout passed: a file or etcd entry removed at
  // once could vanish before the client reads it. Exchange thread only.
  std::vector<std::pair<std::unique_ptr<ExchangeChannel>, std::chrono::steady_clock::time_point>>
      lingering_;

  Mutex conns_mu_;
  std::map<uint32_t, std::shared_ptr<Conn>> by_qpn_ GUARDED_BY(conns_mu_);
  std::map<rdma_cm_id*, std::shared_ptr<Conn>> by_id_;  // cm thread only
  std::vector<int> free_slots_ GUARDED_BY(conns_mu_);

  // Counters (relaxed atomics; read by STATS).
  std::atomic<uint64_t> connections_total_{0}, connections_active_{0}, connections_rejected_{0};
  std::atomic<uint64_t> rpc_put_{0}, rpc_delete_{0}, rpc_stats_{0}, rpc_params_{0}, rpc_bad_{0};
  std::atomic<uint64_t> put_errors_{0}, clients_dropped_{0}, replies_dropped_{0};
};

}  // namespace rkv

#endif  // RKV_SERVER_SERVER_H_
