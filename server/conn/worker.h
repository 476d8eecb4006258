// SPDX-License-Identifier: Apache-2.0
// Worker: one thread, one completion channel + CQ, and the connections whose QPs use that CQ.
//
// The worker is the only thread that polls its CQ and the only one that posts on its
// connections' QPs (replies, keepalives, drain markers), so everything about a connection
// between adoption and kDrained happens on one thread: request execution, credit accounting,
// keepalives, and the close/drain sequence of server/conn/conn.h. Other threads talk to it through
// its command queue (Adopt, Close, LastWqe), which wakes it through an eventfd.
//
// Send work request ids: (Conn::serial << 4) | (signalled << 3) | (kind << 1), even (receive
// ids are odd, see server/conn/srq_pool.h); a send completion whose serial does not match the Conn
// now holding its QP number is stale and ignored.
// Selective signalling (server/conn/send_tracker.h): replies are signalled one in SignalEvery();
// a completion retires every earlier send of its QP. SRQ receive buffers go back in batches:
// those of one CQ batch are reposted with one post call.
// Before OPEN: a connection that is not kOpen gets only HandleUnopened (docs/design.md,
// "Connection lifecycle"); keepalives go to kOpen connections; one that has not opened within
// 2 x accept_timeout of its creation is closed (open_timeouts).
// Keepalive: when a kOpen connection has been silent for peer_timeout/3 the worker
// posts a zero-length RDMA WRITE (no memory is touched at the client, whose HCA alone answers),
// so a client that only does one-sided GETs stays known to be alive. A keepalive that fails
// (retries exhausted: the peer's host or link is gone) or silence past peer_timeout closes the
// connection.
// Request metrics (server/metrics/rpc_metrics.h): every reply posted is counted by the op and
// status in its header, with the time since its request's receive completion was polled (a
// PUT/DELETE that went through the write pool keeps its receive time in WorkerEnv's
// write_received ring). Relaxed atomics only: no lock, no allocation.
// Thread safety: Adopt/Close/LastWqe from any thread; everything else on the worker thread.
// Ownership: owns the completion channel, the CQ (destroyed after every QP using it: the
// Server destroys connections before workers) and the eventfd; holds a reference to each
// adopted Conn until it is drained.
#ifndef RKV_SERVER_WORKER_H_
#define RKV_SERVER_WORKER_H_

#include <algorithm>
#include <atomic>
#include <chrono>
#include <functional>
#include <memory>
#include <string>
#include <thread>
#include <unordered_map>
#include <vector>

#include "common/verbs/rdma.h"
#include "common/wire.h"
#include "server/conn/conn.h"
#include "server/conn/conn_registry.h"
#include "server/conn/replica_fast_path.h"
#include "server/conn/srq_pool.h"
#include "server/conn/wake_queue.h"
#include "server/metrics/counters.h"
#include "server/rpc_executor.h"
#include "server/server_options.h"
#include "server/write_log.h"
#include "server/write_pool.h"

namespace rkv {

// What every worker shares; all of it outlives the workers.
struct WorkerEnv {
  const ServerOptions* opt = nullptr;
  // Window mode: the shared SRQ. Null in registration mode: each connection receives into its
  // own PrivateDomain (server/conn/private_domain.h).
  SrqPool* srq = nullptr;
  RpcExecutor* exec = nullptr;
  // PUT and DELETE go here when set (a durable server: they wait for the log); else the worker
  // executes them itself.
  WritePool* writes = nullptr;
  // A replicated cluster (server/cluster/replicator.h): a PUT/DELETE that the worker's fast
  // path (replica_links below) does not take goes to `writes` (it waits for the backups), and
  // REPLICATE to `repl_writes`, a pool of its own, so that two primaries waiting for each
  // other's backups never wait for their own pool threads.
  WritePool* repl_writes = nullptr;
  // With `writes`: the log, asked before each hand-over whether this worker may log the write
  // itself (WriteLog::WriteInline). Outlives the workers.
  const WriteLog* log = nullptr;
  // A cluster server: whether a REPLICATE naming `sender`, sent at map `epoch`, may come from a
  // connection whose peer is `peer_ipv4` (network byte order; 0: not an IPv4 rdma_cm
  // connection). OK, or the refusal to answer: UNAVAILABLE (ask again; not counted) or
  // INVALID_ARGUMENT (counted in repl_refused_sender) (server/cluster/sender_addresses.h).
  // Empty: not checked.
  std::function<Status(uint32_t sender, uint64_t epoch, uint32_t peer_ipv4)> replicate_sender;
  // A memory-only backup of a replicated cluster with --replication_rings: RING_GRANT gives a
  // log ring of ring_bytes (docs/replication-rings.md). Null: RING_GRANT is refused.
  cluster::RingDrainer* rings = nullptr;
  size_t ring_bytes = 0;
  ConnRegistry* registry = nullptr;
  ServerCounters* counters = nullptr;
  uint8_t* send_base = nullptr;  // registered: max_connections * ReplySlots() * kSendSlotSize
  uint32_t send_lkey = 0;        // window mode; a PrivateDomain registers its connection's share
  // Replies of at most this many bytes are sent inline (IBV_SEND_INLINE: the HCA copies them from
  // the work request, no DMA read of the send buffer); every QP is created with this capacity.
  uint32_t max_inline = 0;
  const std::atomic<bool>* stop = nullptr;
  // The shared token (docs/security.md); empty: authentication is off.
  std::string auth_token;
  // The OPEN reply without per-connection fields (rkey, server mac).
  wire::OpenReply open_reply{};
  // What OPEN grants a client (docs/security.md, "Private rkeys"): windows: a type-2 memory
  // window bound on its QP over region_mr (registered with MW_BIND, no remote access); else a
  // registration of the region of its own (ibv_reg_mr_iova, iova 0) in the connection's own PD
  // (Conn::domain()). Either is zero-based.
  ibv_pd* pd = nullptr;
  ibv_mr* region_mr = nullptr;
  uint8_t* region = nullptr;
  uint64_t region_size = 0;
  bool windows = false;
  // With a write pool: per connection slot, CreditLimit() + 1 receive times: a ring of those of
  // the connection's waiting_writes (in order, starting at write_ring_head[slot]), then the one
  // of its write in the pool. Slots belong to one live connection, hence to one worker.
  Conn::Clock::time_point* write_received = nullptr;  // max_connections * (CreditLimit() + 1)
  uint32_t* write_ring_head = nullptr;                // max_connections
  // A replicated cluster with --replicate_on_worker: the options of the workers' replication
  // links (server/conn/replica_fast_path.h) and the cluster's slot count. Null: no fast path.
  const Options* replica_links = nullptr;
  uint32_t owner_slots = 0;
};

class Worker {
 public:
  static constexpr size_t kSendSlotSize = 4096;
  // Reply buffers per connection: one per request it may have unacknowledged (received, reply
  // send not completed). A client with C requests in flight (rkv::Client::Execute) may have as
  // many replies received whose send completions the server has not polled yet (the ACK's
  // completion and the next request's receive are processed by different tasks of the device,
  // in either order), so 2C + kCreditSlack are tolerated; one more request is dropped.
  static int SendSlots(const ServerOptions& o) { return 2 * o.credits + kCreditSlack; }
  // Replies are signalled one in this many (1: every one): at most the credits, at most 16.
  static int SignalEvery(const ServerOptions& o) {
    return o.reply_signal_every > 0 ? o.reply_signal_every : std::max(1, std::min(16, o.credits));
  }
  // The drop threshold (docs/design.md, "Selective signalling"): requests received whose reply
  // is not known complete, not counting the unsignalled trailing run (no completion can show
  // them yet), plus writes waiting for the pool. SendSlots plus N - 1: an unsignalled reply the
  // client has had counts until the completion of the next signalled one is polled.
  static int CreditLimit(const ServerOptions& o) { return SendSlots(o) + SignalEvery(o) - 1; }
  // Reply buffers per connection: the credit limit plus the trailing run (at most N - 1), so
  // that no buffer of a reply not known complete is reused.
  static int ReplySlots(const ServerOptions& o) { return CreditLimit(o) + SignalEvery(o) - 1; }
  // Registration mode: receive buffers of a connection's own queue once it is open (and its
  // QP's max_recv_wr): one more than the requests a client may have in flight plus the slack
  // (a buffer is reposted as soon as its request is executed). A client that sends far past
  // its credits meets RNR for the rest and is dropped once its unacknowledged replies fill the
  // send slots.
  static int PrivateReceiveBuffers(const ServerOptions& o) { return o.credits + kCreditSlack + 1; }
  // Send queue depth of a connection's QP: replies + a keepalive + the drain marker + slack.
  static int SendQueueDepth(const ServerOptions& o) { return ReplySlots(o) + 4; }

  Worker(int index, WorkerEnv env) : index_(index), env_(env) {}
  ~Worker();
  Worker(const Worker&) = delete;
  Worker& operator=(const Worker&) = delete;

  // Creates the completion channel and a CQ of `cqe` entries on ctx.
  [[nodiscard]] Status Init(ibv_context* ctx, int cqe);
  void Start();
  void Join();
  ibv_cq* cq() const { return cq_.get(); }

  // Any thread. Adopt before the QP can receive (before rdma_accept / RTR).
  void Adopt(std::shared_ptr<Conn> c) { Push(Cmd::kAdopt, std::move(c)); }
  // Called by Conn::RequestClose only.
  void Close(std::shared_ptr<Conn> c) { Push(Cmd::kClose, std::move(c)); }
  void LastWqe(std::shared_ptr<Conn> c) { Push(Cmd::kLastWqe, std::move(c)); }
  // Called by the WritePool: the reply to a request of `c` it executed (dropped if `c` is
  // closing by then).
  void Reply(std::shared_ptr<Conn> c, std::string reply) {
    queue_.Push({Cmd::kReply, std::move(c), std::move(reply)});
  }

 private:
  enum class Cmd { kAdopt, kClose, kLastWqe, kReply };
  struct Command {
    Cmd cmd;
    std::shared_ptr<Conn> conn;
    std::string reply;  // kReply only
  };
  using SendKind = SendTracker::Kind;
  static constexpr SendKind kReply = SendTracker::kReply, kKeepalive = SendTracker::kKeepalive,
                            kMarker = SendTracker::kMarker, kBind = SendTracker::kBind;
  using Clock = Conn::Clock;

  void Push(Cmd cmd, std::shared_ptr<Conn> c) { queue_.Push({cmd, std::move(c), {}}); }
  void Loop();
  void DrainCommands();
  void HandleCompletion(const ibv_wc& wc);
  // A receive completion of c whose request bytes are at msg (an SRQ or a private buffer).
  void HandleReceive(const std::shared_ptr<Conn>& c, const ibv_wc& wc, const uint8_t* msg);
  // Registration mode: a receive completion of a connection's own receive queue (buffer `buf`
  // of its PrivateDomain), reposted once handled.
  void HandlePrivateReceive(const ibv_wc& wc, uint32_t buf);
  void HandleRequest(const std::shared_ptr<Conn>& c, const uint8_t* msg, uint32_t len);
  // A request of a connection that is not kOpen: an OPEN is verified and answered (kOpen on
  // success); anything else, or a failed OPEN, is answered UNAUTHENTICATED and the connection
  // is closed once that reply has completed.
  void HandleUnopened(const std::shared_ptr<Conn>& c, const uint8_t* msg, uint32_t len);
  // Gives c its private rkey (a window bound on its QP, or its own registration), owned by c;
  // fills reply->rkey. The bind is posted before the OPEN reply, so it is done before the client
  // can use the rkey.
  Status Grant(const std::shared_ptr<Conn>& c, wire::OpenReply* reply);
  // Verifies an OPEN and fills *reply; UNAUTHENTICATED (message for the client) on failure.
  Status Open(const std::shared_ptr<Conn>& c, const wire::Request& req, wire::OpenReply* reply);
  // Encodes a reply into the connection's next send slot and posts it.
  void PostReply(const std::shared_ptr<Conn>& c, wire::Op op, uint64_t request_id, Code code,
                 std::string_view payload);
  // A REPLICATE over a connection that does not come from its sender's address: refused
  // (answered and counted here). False for anything else.
  bool RefuseReplicate(const std::shared_ptr<Conn>& c, const uint8_t* msg, uint32_t len);
  // RING_GRANT (worker_ring.cc): true when `msg` is one (answered here).
  bool HandleRingGrant(const std::shared_ptr<Conn>& c, const uint8_t* msg, uint32_t len);
  // The ring itself: registered for this connection's QP only, given to the drainer.
  [[nodiscard]] Status GrantRing(const std::shared_ptr<Conn>& c, const wire::Request& req,
                                 std::string* payload);
  // Takes a decoded PUT/DELETE for the write pool (false: no pool, execute it here).
  bool Offload(const std::shared_ptr<Conn>& c, const uint8_t* msg, uint32_t len,
               Clock::time_point received);
  // Submits the connection's next waiting write if none of its writes is in the pool.
  void SubmitNextWrite(const std::shared_ptr<Conn>& c);
  void SendReply(const std::shared_ptr<Conn>& c, const std::string& reply);
  // Request metrics for a reply of n bytes at `reply` just posted.
  void CountReply(const void* reply, size_t n, Clock::time_point received);
  std::shared_ptr<Conn> Find(uint32_t qpn);
  bool PostSend(Conn& c, SendKind kind, const void* data, uint32_t len);
  // The connection's next reply buffer (of ReplySlots) in the registered send buffers.
  uint8_t* NextReplyBuffer(const Conn& c) const;
  // Posts a reply encoded in NextReplyBuffer(c) and counts it; false if the post failed.
  // received: the request's receive time for the metrics (null: not counted).
  bool PostReplyBuffer(Conn& c, const uint8_t* out, size_t n, const Clock::time_point* received);
  // Receive reposts: in window mode the SRQ buffers whose requests this CQ batch handled are
  // posted together at the end of the batch (FlushReposts); in registration mode at once.
  void QueueRepost(const std::shared_ptr<Conn>& c, uint32_t buf);
  void FlushReposts();
  void Tick();
  void AdvanceClose(const std::shared_ptr<Conn>& c);
  void FinishDrain(const std::shared_ptr<Conn>& c, bool leak);

  const int index_;
  const WorkerEnv env_;
  CompChannelPtr channel_;
  CqPtr cq_;  // declared after channel_: destroyed first
  // Bounded by a few commands per connection plus one reply per request credit.
  WakeQueue<Command> queue_;
  std::thread thread_;
  // Worker thread only.
  std::unordered_map<uint32_t, std::shared_ptr<Conn>> conns_;
  std::vector<std::shared_ptr<Conn>> closing_;
  Clock::time_point last_tick_{};
  // At most one CQ batch (32 completions) of receive buffers awaiting their repost.
  static constexpr int kRepostBatch = 32;
  uint32_t repost_buf_[kRepostBatch];
  int reposts_ = 0;
  // Replicated writes in flight on this worker (null: none go this way). Reset by Join, after
  // the thread ended and before the command queue is emptied (its helper may still reply).
  std::unique_ptr<ReplicaFastPath> fast_;
  std::vector<pollfd> pfds_;                      // the loop's poll set (worker thread)
  std::vector<ReplicaFastPath::Done> fast_done_;  // reused by the loop
  // Replies of fast-path writes: as the pool's (kReply) would be.
  void FinishFast();
};

}  // namespace rkv

#endif  // RKV_SERVER_WORKER_H_
