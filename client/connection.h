// SPDX-License-Identifier: Apache-2.0
// Connection: the client's narrow seam to one server: one RC QP, one CQ, one registered buffer.
//
// Open connects in one of two ways (Options::exchange): rdma_cm (the table geometry arrives in
// the accept private data), or manual mode: ibv_create_qp, then RESET->INIT->RTR->RTS with
// ibv_modify_qp from parameter records exchanged over TCP, a shared directory or etcd
// (common/exchange/exchange.h), the validator run before RTR. Either way Open then reads back every
// parameter from both QPs (ibv_query_qp here, Op::kParams at the server). The GET path only
// uses PostReads/WaitReads and the buffer, whichever way the QP got to RTS.
// Thread safety: none; owned and used by one Client (one thread at a time). In file/etcd mode
// the exchange channel owns a heartbeat thread (see common/exchange/mailbox_channel.h).
// Ownership: owns the exchange channel, device context (manual mode), rdma_cm channel and id
// (rdma_cm mode), PD, CQ, MR and QP, declared so that the QP is destroyed first.
// Lifecycle (State): kConnected after Open; kBroken after any failed completion, failed post
// or disconnect; a broken Connection is only destroyed (Client::Reconnect opens a new one).
#ifndef RKV_CLIENT_CONNECTION_H_
#define RKV_CLIENT_CONNECTION_H_

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <string_view>

#include "client/rpc_window.h"
#include "common/exchange/exchange.h"
#include "common/table/layout.h"
#include "common/verbs/rdma.h"
#include "common/wire.h"
#include "rkv/client.h"

namespace rkv {

class Connection {
 public:
  enum class State { kConnected, kBroken };
  // Buffer areas (offsets into buf()).
  static constexpr uint32_t kMaxBatch = 16;  // keys per MultiGet batch
  static constexpr uint64_t kBucketArea = 0;
  static constexpr uint64_t kOverflowArea = kBucketArea + kMaxBatch * 2 * 1024;
  static constexpr uint64_t kBlockArea = kOverflowArea + kMaxBatch * 4 * 128;
  static constexpr uint64_t kSendArea = kBlockArea + 72 * 1024;
  static constexpr uint64_t kRecvArea = kSendArea + 72 * 1024;
  static constexpr uint64_t kRecvAreaSize = 8 * 1024;
  // Pipelined requests (PostRpc): a send ring and one reply buffer per request in flight.
  static constexpr int kMaxPipeline = 16;
  static constexpr uint64_t kPipeSendArea = kRecvArea + kRecvAreaSize;
  static constexpr uint64_t kPipeSendSize = 256 * 1024;  // >= 3 requests of the largest size
  static constexpr uint64_t kPipeRecvArea = kPipeSendArea + kPipeSendSize;
  static constexpr uint64_t kPipeRecvSlot = 4096;  // wire::kMaxReplySize
  // Cluster: the slot's ownership word a GET reads after its entry (client/cluster_router.h).
  static constexpr uint64_t kOwnerArea = kPipeRecvArea + kMaxPipeline * kPipeRecvSlot;
  static constexpr uint64_t kBufferSize = kOwnerArea + 8 * kMaxBatch;
  static constexpr uint64_t kOverflowAreaSize = kBlockArea - kOverflowArea;  // 8 KiB
  static constexpr uint64_t kBlockAreaSize = kSendArea - kBlockArea;         // 72 KiB
  static constexpr int kMaxReads = 2 * kMaxBatch * 2;  // READs in one PostReads
  // READs a ReadPlan may hold: the rest are for a cluster GET's ownership words.
  static constexpr int kMaxPlanReads = kMaxReads - int(kMaxBatch);

  struct ReadOp {
    uint64_t local_offset;   // into buf()
    uint64_t remote_offset;  // into the server's region
    uint32_t length;
  };

  // `abandon` (may be null): SetAbandon's hook, asked from the start (rdma_cm mode: also while
  // the address, the route and the connect are awaited, every 50 ms).
  static Status Open(const std::string& host, uint16_t port, const Options& options,
                     std::unique_ptr<Connection>* out,
                     const std::function<bool()>* abandon = nullptr);
  ~Connection();

  // Posts n READs as one chain (one doorbell; only the last is signalled). Does not wait.
  Status PostReads(const ReadOp* ops, int n);
  // Waits for every chain posted since the last wait. Any error completion breaks the
  // connection.
  Status WaitReads();
  // Sends a request and waits for its reply (payload copied to *payload if non-null).
  Status Rpc(wire::Op op, std::string_view key, std::string_view value, Code* server_status,
             std::string* payload);

  // Pipelined requests (connection_pipeline.cc): up to pipeline_depth() outstanding at once (the
  // server's request credits, at most kMaxPipeline). Rpc and SendRaw refuse to run while any is
  // outstanding (their reply could be taken for a pipelined one).
  int pipeline_depth() const { return window_.depth(); }
  int rpcs_outstanding() const { return window_.outstanding(); }
  // Posts a request (a receive for its reply first, then the SEND) without waiting. *posted is
  // false, and nothing is done, when the window is full (take a reply first). *rid identifies
  // the request's reply.
  Status PostRpc(wire::Op op, std::string_view key, std::string_view value, uint64_t* rid,
                 bool* posted);
  // Waits (rpc_timeout_ms) for the next reply to a posted request. Any failure breaks the
  // connection: the requests still outstanding then have an unknown outcome.
  Status NextReply(uint64_t* rid, Code* server_status, std::string* payload);

  // For a waiter that owns many connections and sleeps in its own poll() (a server worker's
  // replication links, server/conn/replica_fast_path.h); never blocks. PollReply polls the CQ
  // once and says whether a pipelined reply is ready for NextReply (which then does not wait);
  // a failed completion breaks the connection (false; state()). completion_fd is the
  // completion channel's descriptor (-1 without one: Options::reply_spin_us < 0); RearmEvents
  // acknowledges every event waiting in it and asks for the next completion's, so the fd turns
  // readable when one arrives (poll after it: one that came before the request is polled).
  bool PollReply();
  // No pipelined request outstanding and every SEND completed: PostRpc will not wait.
  bool PipelineIdle() const { return window_.idle(); }
  int completion_fd() const { return comp_ ? comp_->fd : -1; }
  Status RearmEvents();

  // One-sided replication (connection_ring.cc; a server worker's replication links,
  // server/conn/replica_fast_path.h; docs/replication-rings.md). A ring chain is RDMA WRITEs
  // of bytes staged in ring_staging() to a backup's log ring (`rkey`, zero-based, valid on
  // this QP only), optionally followed by a READ of the ring's control block into
  // ring_control(); only its last work request is signalled, so its completion (taken by
  // PollReply; a failed one breaks the connection) says every WRITE of the chain was placed.
  // The staging area is the synchronous requests' send area: no Rpc while a chain is out
  // (refused), and a chain's bytes are not staged again before RingIdle().
  static constexpr uint32_t kRingStagingSize = 72 * 1024 - 64;
  struct RingPiece {
    uint64_t remote_offset;   // into the ring
    uint32_t staging_offset;  // into ring_staging()
    uint32_t length;
  };
  uint8_t* ring_staging() { return buf_.get() + kSendArea; }
  const uint8_t* ring_control() const { return buf_.get() + kSendArea + kRingStagingSize; }
  Status PostRingChain(uint32_t rkey, const RingPiece* pieces, int n, bool read_control);
  bool RingIdle() const { return ring_chains_ == 0; }

  // Test hook: sends `len` raw bytes as a request and waits for a reply (for malformed-input
  // tests). The bytes are not validated.
  Status SendRaw(const void* data, size_t len, Code* server_status, std::string* payload);

  uint8_t* buf() { return buf_.get(); }
  // What the OPEN reply granted: geometry, region size, rkey (valid only on this QP).
  const wire::OpenReply& hello() const { return hello_; }
  // The table's geometry as the OPEN reply gave it (heap_offset unknown: 0).
  const layout::Geometry& geometry() const { return geometry_; }
  const ServerInfo& info() const { return info_; }
  State state() const { return state_; }
  // While set (non-null), every wait (READs, Rpc, NextReply) asks `abandon` every 1024 empty
  // polls (every poll once the wait passed kBusyPollMs) whether to give up: true breaks the
  // connection at once with kConnectionLost (a request's outcome is unknown), as a lost connection
  // would. The callable must outlive the waits it is set for; the cluster router uses it to stop
  // waiting for a server the map failed over (docs/cluster.md, "Clients").
  void SetAbandon(const std::function<bool()>* abandon) { abandon_ = abandon; }
  // rdma_cm mode: whether the server closed the connection or its process died (a DISCONNECTED
  // event waits in the channel; one non-blocking poll, never on the GET path). True breaks the
  // connection. False in manual mode (the exchange channel watches the peer there).
  bool PeerGone() {
    if (state_ == State::kConnected && PeerDisconnected()) state_ = State::kBroken;
    return state_ != State::kConnected;
  }

 private:
  Connection() = default;
  Status OpenCm(const std::string& host, uint16_t port);
  Status OpenManual(const std::string& host, uint16_t port);
  // PD, CQ and MR on ctx; the QP's creation attributes.
  Status CreateResources(ibv_context* ctx);
  ibv_qp_init_attr QpInitAttr();
  // Creates the QP (on `id` in rdma_cm mode, else with ibv_create_qp), inline sends if the
  // device allows them; sets max_inline_.
  Status CreateQp(rdma_cm_id* id, ibv_qp** qp);
  static constexpr uint32_t kWantInline = 256;
  uint32_t max_inline_ = 0;  // requests up to this many bytes are sent inline
  int chains_posted_ = 0;    // READ chains posted and not yet waited for
  RpcWindow window_{kPipeSendSize, kMaxPipeline};
  uint64_t pipe_arrived_ = 0;             // pipelined replies received (taken or not)
  int ring_chains_ = 0;                   // ring chains posted and not yet completed
  uint32_t pipe_len_[kMaxPipeline] = {};  // byte length of the reply in each receive slot
  // Sends OPEN (with the mac when options_.auth_token is set) and checks the server's proof;
  // fills hello_. UNAUTHENTICATED if either side fails to prove the token.
  Status SendOpen();
  // Opens, then fills info_ from hello_ and the read-back parameters of both QPs.
  Status FinishOpen(const std::string& host, uint16_t port);
  // Polls until the wanted completions came (want_pipe: a pipelined reply not yet taken).
  // want_pipe_sends: every pipelined SEND's completion. Busy-polls for kBusyPollMs, then
  // sleeps kLongWaitSleepUs between polls (a wait that long is a failure being sorted out).
  // With Options::reply_spin_us >= 0 an RPC's wait (no READ) instead sleeps past the spin in
  // WaitForEvent, its checks (deadline, disconnect, abandon) run on every wake-up.
  static constexpr int kBusyPollMs = 20;  // above a round trip, an fsync, a replicated write
  static constexpr int kLongWaitSleepUs = 50;
  // Sleeps until cq_ has a completion (armed, then polled once more: a completion that arrived
  // before the arming is not missed), an rdma_cm event, or `max_ms` passed. Only with comp_.
  // kIoError when the channel reports an error.
  Status WaitForEvent(int max_ms);
  static constexpr int kEventWaitMs = 10;  // the longest sleep between checks
  bool cq_armed_ = false;  // a notification was requested and its event not yet taken
  Status Poll(int want_reads, bool want_recv, bool want_send, int timeout_ms,
              bool want_pipe = false, bool want_pipe_sends = false);
  // rdma_cm mode: true if the channel holds a DISCONNECTED (or device removal) event, consumed
  // (one non-blocking poll; never called on the GET path).
  bool PeerDisconnected();
  Status Broken(Status s);
  Status Exchange(size_t len, uint64_t rid, Code* server_status, std::string* payload);
  // Posts a receive of recv_len bytes at recv_at (wr id recv_id), then the request of len bytes
  // at send_at as a signalled SEND (wr id send_id; inline when it fits). Both in buf_.
  Status PostRequest(uint8_t* recv_at, uint32_t recv_len, uint64_t recv_id, const uint8_t* send_at,
                     uint32_t len, uint64_t send_id);

  Options options_;
  State state_ = State::kConnected;
  const std::function<bool()>* abandon_ = nullptr;  // SetAbandon
  wire::ServerHello server_hello_{};  // the accept data (or manual-mode reply): nonce, flags
  uint32_t server_qpn_ = 0;           // the server's QP number as our QP addresses it
  wire::OpenReply hello_{};
  layout::Geometry geometry_;
  ServerInfo info_;
  uint64_t next_request_id_ = 1;
  struct FreeDeleter {
    void operator()(uint8_t* p) const { free(p); }
  };
  std::unique_ptr<uint8_t, FreeDeleter> buf_;
  // Destruction order: qp_, mr_, cq_, comp_, pd_, id_, channel_, ctx_, exchange_.
  std::unique_ptr<ExchangeChannel> exchange_;  // manual mode: the control channel
  ContextPtr ctx_;                             // manual mode: the opened device
  EventChannelPtr channel_;
  CmIdPtr id_;
  PdPtr pd_;
  // With Options::reply_spin_us >= 0: cq_'s completion channel (every event it delivered is
  // acknowledged at once, so cq_ can be destroyed at any time).
  CompChannelPtr comp_;
  CqPtr cq_;
  MrPtr mr_;
  QpOwner qp_;
};

}  // namespace rkv

#endif  // RKV_CLIENT_CONNECTION_H_
