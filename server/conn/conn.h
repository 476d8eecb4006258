// SPDX-License-Identifier: Apache-2.0
// Conn: one client connection of kvserver: its QP (and rdma_cm id), its slot, the worker that
// serves it, and the state that says who may touch the QP.
//
// Lifecycle (State). Every transition has one thread that may make it:
//
//   kSetup ──(owner: rdma_cm ESTABLISHED / manual READY)──> kEstablished
//     │   └──(worker: a valid OPEN)──> kOpen <──(worker: a valid OPEN)──┘ │
//     └──────────(any thread: RequestClose)─────────────────────────────────┴──> kClosing
//   (kOpen too: any thread may RequestClose it.)
//   kClosing ──(worker: QP in ERR, every posted WR flushed)──> kDrained
//   kDrained ──(owner: DestroyVerbs: QP, its own PD if any, then id)──> destroyed (slot
//                 released by the owner)
//
//   kSetup        The owner (rdma_cm thread, or a manual handshake thread) created the QP and
//                 handed the Conn to its worker (Worker::Adopt) before the QP can receive: the
//                 worker serves requests that arrive before the owner sees the connection
//                 established, but sends no keepalives. The owner closes it at its deadline.
//   kEstablished  The QP is connected but the client has not opened yet: it knows only the
//                 ServerHello (no address, rkey or geometry). The worker answers an OPEN (kOpen
//                 on success) and any other request with UNAUTHENTICATED, then closes.
//   kOpen         Authenticated (or authentication is off) and serving: the worker posts
//                 replies and keepalives on the QP; the owner may only query it (ibv_query_qp
//                 is safe alongside posting). An OPEN may arrive before the owner has seen the
//                 connection established (kSetup -> kOpen); MarkEstablished then keeps kOpen.
//                 A connection that is not kOpen within 2 x --accept_timeout of its creation
//                 is closed by its worker: no unauthenticated connection lingers.
//   kClosing      RequestClose won the race (a compare-and-swap: exactly one close per
//                 connection) and queued the Conn to its worker. The worker moves the QP to ERR,
//                 waits for the SRQ's Last WQE Reached event (or a grace period), posts a
//                 marker WR and waits for it and every earlier WR to complete. Nothing new is
//                 posted; completions of the QP are consumed and ignored.
//   kDrained      No work request of the QP can complete any more and the worker has removed
//                 the Conn from its table and the registry: only the owner touches the QP now.
//                 The worker tells the owner (ConnOwner::OnDrained), which destroys QP and id on
//                 its own thread (rdma_cm ids belong to the rdma_cm thread) and frees the slot.
//                 A QP number is reused only after that destruction, so a completion can never
//                 be taken for a newer connection with the same QP number; send work requests
//                 carry the Conn's serial as well, and the worker drops any that do not match.
//
// Ownership and lifetime: Conns are shared_ptr-owned. The owner keeps a reference until it has
// destroyed the verbs objects; the worker keeps one while the Conn is in its table; a thread
// that handles an event of the Conn (async event, command queue) holds one until it is done.
// The Worker and ConnOwner a Conn points to outlive every thread that can reach the Conn
// (kvserver joins all of its threads before it destroys workers and owners).
// Thread safety: state_ is atomic; close_reason_ is guarded by mu_; `w` is touched by the
// worker thread only; `control` by the owner thread only; the rest is immutable.
#ifndef RKV_SERVER_CONN_H_
#define RKV_SERVER_CONN_H_

#include <infiniband/verbs.h>
#include <rdma/rdma_cma.h>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <deque>
#include <memory>
#include <string>

#include "common/exchange/exchange.h"
#include "common/mutex.h"
#include "server/conn/private_domain.h"
#include "server/conn/send_tracker.h"
#include "server/conn/source_limiter.h"

namespace rkv {

class Conn;
class Worker;

// The thread that created a Conn and destroys its verbs objects.
class ConnOwner {
 public:
  virtual ~ConnOwner() = default;
  // Called by the worker once the Conn is kDrained; must only queue the Conn for the owner's
  // thread (never destroy here: this runs on the worker).
  virtual void OnDrained(std::shared_ptr<Conn> c) = 0;
};

class Conn : public std::enable_shared_from_this<Conn> {
 public:
  enum class State : int { kSetup, kEstablished, kOpen, kClosing, kDrained };
  enum class Kind : int { kRdmaCm, kManual };
  using Clock = std::chrono::steady_clock;

  // Takes ownership of `qp` (and of `id` when non-null: rdma_cm mode, id->qp == qp) and of
  // `domain` (registration mode: the QP's own PD with its receive buffers; null: the QP is in
  // the server's PD and receives from the shared SRQ).
  // server_nonce: the challenge sent in this connection's ServerHello (wire::kNonceSize bytes);
  // peer_qpn: the client's QP number as this QP addresses it.
  Conn(Kind kind, uint64_t serial, int slot, int worker_index, Worker* worker, ConnOwner* owner,
       rdma_cm_id* id, ibv_qp* qp, const uint8_t* server_nonce, uint32_t peer_qpn,
       std::unique_ptr<PrivateDomain> domain = nullptr);
  // Destroys what DestroyVerbs did not (only at shutdown, when no thread runs).
  ~Conn();
  Conn(const Conn&) = delete;
  Conn& operator=(const Conn&) = delete;

  // Owner: kSetup -> kEstablished (kOpen stays). False if the connection is already closing.
  // *counted: this call made the transition out of kSetup (the caller counts it).
  bool MarkEstablished(bool* counted);
  // Worker: kSetup/kEstablished -> kOpen after a valid OPEN (and source_lease.Opened()). False
  // if closing. *from_setup: the transition left kSetup (the caller counts the connection as
  // established).
  bool MarkOpen(bool* from_setup);
  // Any thread: starts the close (kSetup/kEstablished -> kClosing) and queues the Conn to its
  // worker. Returns false if another close came first (then this call does nothing).
  bool RequestClose(const std::string& reason);
  // True if the close started from kEstablished or kOpen (valid once state() >= kClosing).
  bool closed_established() const { return closed_established_.load(); }
  // Async-event thread: the SRQ will hand this QP no more receives; tells the worker.
  void NotifyLastWqe();
  // Worker: kClosing -> kDrained.
  void MarkDrained() { state_.store(State::kDrained); }
  // Owner, after kDrained (or on a Conn its worker never saw): rdma_disconnect (rdma_cm),
  // destroys the QP, then the id. `leak_qp`: the QP did not drain in time; keep it (and its QP
  // number) allocated forever rather than risk a late completion.
  void DestroyVerbs(bool leak_qp);

  State state() const { return state_.load(); }
  std::string close_reason() const;
  static const char* StateName(State s);

  const Kind kind;
  const uint64_t serial;  // unique per server run; carried in send work request ids
  const int slot;         // send-buffer slot, returned to the pool by the owner
  const int worker_index;
  const uint32_t qpn;
  // The QP's handle, for identity checks only (never dereferenced after kDrained): the struct
  // stays allocated until its async events are acknowledged, unlike its number.
  const ibv_qp* const qp_handle;
  const Clock::time_point created;
  uint8_t server_nonce[16];  // immutable after construction (wire::kNonceSize)
  const uint32_t peer_qpn;
  // This connection's share of its source address's caps (server/conn/source_limiter.h): set by
  // NewConn before the worker sees the Conn; marked opened by the worker in MarkOpen (the
  // successful OPEN: it then no longer counts against --max_pending_per_source) and closing
  // by the thread whose RequestClose wins (refusals then say so; Opened and Closing touch
  // separate fields, so they may run at once); released when the Conn is destroyed (after
  // the worker is done with it).
  SourceLimiter::Lease source_lease;
  rdma_cm_id* id() const { return id_; }
  ibv_qp* qp() const { return qp_; }
  // The connection's private rkey (docs/security.md, "Private rkeys"): a memory window bound on
  // its QP, or a registration of the region of its own. Created by the worker at OPEN (worker
  // thread, before kOpen); the Conn is its only owner. Deallocated by DestroyVerbs on the owner
  // thread once kDrained hands the Conn over (the QP is in ERR and serves no READ), just before
  // the QP is destroyed (a bound window holds a reference on its QP), or by ~Conn at shutdown.
  // A leaked QP's window is deallocated all the same.
  void SetWindow(ibv_mw* mw) { mw_ = mw; }
  void SetClientMr(ibv_mr* mr) { client_mr_ = mr; }
  ConnOwner* owner() const { return owner_; }
  // Registration mode: the connection's own protection domain (server/conn/private_domain.h), set
  // at construction and destroyed by DestroyVerbs just after the QP (or leaked with a leaked
  // QP); its receive accounting belongs to the worker. Null in window mode.
  PrivateDomain* domain() const { return domain_.get(); }

  // Worker-only state.
  struct WorkerState {
    int unacked = 0;  // requests received whose reply has not completed
    int in_pool = 0;  // requests handed to the write pool, reply not yet back (0 or 1)
    // PUT/DELETE requests waiting for this connection's request in the pool: a connection's
    // writes run one at a time, in the order it sent them (bounded by its request credits).
    std::deque<std::string> waiting_writes;
    uint32_t next_send = 0;  // reply slot ring (Worker::ReplySlots)
    // Replies, keepalives, binds and the marker posted and not yet known complete; sized at
    // adoption (Worker::SendQueueDepth).
    SendTracker sends;
    int bad_requests = 0;
    Clock::time_point last_heard{};  // last request or successful completion
    bool keepalive_in_flight = false;
    Clock::time_point keepalive_posted{};
    bool adopted = false;
    bool seen_established = false;
    Clock::time_point close_started{};
    bool error_state = false;  // QP moved to ERR by the worker
    bool last_wqe = false;     // IBV_EVENT_QP_LAST_WQE_REACHED seen
    bool marker_posted = false;
    bool marker_done = false;
    bool leak_qp = false;  // did not drain by the deadline: the owner must not destroy the QP
    // An UNAUTHENTICATED reply is posted: close once it has completed (or at the deadline).
    bool close_after_reply = false;
    std::string close_after_reply_reason;
    uint32_t granted_rkey = 0;  // the rkey OPEN gave it (Worker::Grant); PARAMS reports it
    // The log ring RING_GRANT gave it (RingDrainer's id; 0: none): revoked when it closes.
    uint64_t ring_id = 0;
  } w;

  // Owner-only: the manual-mode control channel (its closing means the client left), and
  // whether the Conn is still counted in connections_pending (set until established).
  std::unique_ptr<ExchangeChannel> control;
  bool owner_pending = true;

 private:
  std::atomic<State> state_{State::kSetup};
  std::atomic<bool> closed_established_{false};
  Worker* const worker_;
  ConnOwner* const owner_;
  rdma_cm_id* id_;
  ibv_qp* qp_;
  ibv_mw* mw_ = nullptr;
  ibv_mr* client_mr_ = nullptr;
  std::unique_ptr<PrivateDomain> domain_;
  void ReleaseGrant();
  mutable Mutex mu_;
  std::string close_reason_ GUARDED_BY(mu_);
};

}  // namespace rkv

#endif  // RKV_SERVER_CONN_H_
