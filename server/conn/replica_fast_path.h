// SPDX-License-Identifier: Apache-2.0
// ReplicaFastPath: a worker's replicated writes without a thread hand-off (docs/cluster.md,
// "The replicated write's fast path"). A client's PUT/DELETE to a slot this server is the
// primary of is begun on the worker that received it (RpcExecutor::BeginFast: the slot's
// lock and the write's number), its REPLICATE posted by that worker to every backup at once
// over links of the worker's own, and, once every backup answered OK, applied and answered by
// the same worker (RpcExecutor::EndFast), which slept in poll() on its CQ and the links'
// completion channels meanwhile. A write pays one wake-up on this server (the backups'
// replies) where the write pool paid three (the pool thread, its wait, the hand-back).
// Anything else goes the usual way: a write this path cannot begin (the slot's lock busy or
// awaited by a pool thread, a kept write, no idle link to a backup) is left to the caller (the
// write pool), and one whose first attempt failed somewhere (a refusal, a broken link, no
// reply within kWaitMs, a backup the applied map dropped meanwhile: Replicator::FastDropped,
// looked at each time the worker polls, about every 50 ms while it sleeps), or that a log
// turned slow would make the worker wait for, is ended by
// one of this object's helper threads (RpcExecutor::EndFast: retries, the kept-write rules, as
// Replicator::Write), which hands its reply to the worker (Worker::Reply) as the pool does.
// So the worker never waits for another server or for a retry: two servers that are each
// other's backups cannot block each other's workers.
// Links: up to kLinksPerBackup per backup, each carrying one write at a time, made by the
// connector thread (connect and OPEN block) when a write found none idle, and given to the
// worker (AdoptLinks); a backup whose connect failed is not asked again for kBackoffMs. A
// link whose transport failed, or whose reply is overdue, is dropped (a late reply dies with
// it), one idle for kIdleMs is closed (a backup that left the map), and one whose backup
// refused it a log ring for now is closed when free kRingRetryMs later (doubling while that
// backup keeps refusing; one such link per backup per second), so that the link made in its
// place asks again (rings come back after a headroom revocation); the connector destroys them
// (disconnects block).
// Bounds: kMaxInFlight writes per worker between BeginFast and their end, those handed to the
// helpers included; helper threads are started on demand, at most kMaxInFlight; the
// connector's queue holds at most one connect per backup and the links dropped.
// Thread safety: Try, Poll, Tick, AppendFds and Rearm on the worker thread only; a helper
// touches only the write handed to it, the connector only its tasks (links reach the worker
// under mu_).
// Shutdown (destructor, after the worker thread ended): writes in flight or waiting for a
// helper are failed (RpcExecutor::FailFast: number used, kept as outcome unknown, lock and
// gate released; their connections are torn down with the server), running helpers finish
// (bounded by the replicator's max_wait_ms), then every thread is joined.
// Ownership: borrows the executor, the log and the reply function's worker (all outlive it).
#ifndef RKV_SERVER_CONN_REPLICA_FAST_PATH_H_
#define RKV_SERVER_CONN_REPLICA_FAST_PATH_H_

#include <poll.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "rkv/client.h"
#include "server/conn/conn.h"
#include "server/conn/replica_ring_link.h"
#include "server/rpc_executor.h"
#include "server/write_log.h"

namespace rkv {

class ClientImpl;

class ReplicaFastPath {
 public:
  static constexpr size_t kLinksPerBackup = 4;
  static constexpr size_t kMaxInFlight = 16;
  // For the first replies; then the helper asks again (a reply this late is not a failure:
  // the helper's attempt counts as the first, a resend answered as such by a backup that had it).
  static constexpr int kWaitMs = 1000;
  static constexpr int kBackoffMs = 1000;
  static constexpr int kIdleMs = 10000;
  // A link whose backup refused it a ring for now (no headroom, a map being applied, its
  // writer's bound): closed once free after this long, so that its replacement asks again;
  // doubled for each such refusal from that backup in a row, up to kRingRetryMaxMs (a backup
  // that stays full is asked every few minutes), and one link per backup at a time.
  static constexpr int kRingRetryMs = 10000;
  static constexpr int kRingRetryMaxMs = 320000;
  using Clock = std::chrono::steady_clock;
  // Any thread: hands a reply to the connection's worker (Worker::Reply).
  using ReplyFn = std::function<void(std::shared_ptr<Conn>, std::string)>;
  struct Done {
    std::shared_ptr<Conn> conn;
    std::string reply;
  };

  // owner_slots: the cluster's slot count (a link's server must have that ownership table);
  // reply_cap: the largest reply (Worker::kSendSlotSize); log (may be null): a write is applied
  // on the worker only while log->WriteInline(). rings: each new link asks its backup for a
  // log ring, and writes go there when they may (server/conn/replica_ring_link.h).
  ReplicaFastPath(RpcExecutor* exec, Options link_options, uint32_t owner_slots, size_t reply_cap,
                  const WriteLog* log, ReplyFn reply, bool rings = false);
  ~ReplicaFastPath();
  ReplicaFastPath(const ReplicaFastPath&) = delete;
  ReplicaFastPath& operator=(const ReplicaFastPath&) = delete;

  // True: the write (moved out of *request) is taken: its reply comes from Poll or through
  // ReplyFn. False: *request is untouched; execute it the usual way.
  bool Try(const std::shared_ptr<Conn>& c, std::string* request);
  // Takes the replies that arrived; writes every backup applied end here (their replies in
  // *done); the others go to the helpers.
  void Poll(std::vector<Done>* done);
  // The completion channels of links with a write in flight, for the worker's poll().
  void AppendFds(std::vector<pollfd>* fds);
  // After poll(): takes the events of the channels AppendFds added from fds[from] on that are
  // readable, and asks for the next ones (then Poll). A channel in error fails its link.
  void Rearm(const std::vector<pollfd>& fds, size_t from);
  // Every worker tick: adopts links made, closes idle ones.
  void Tick();
  size_t in_flight() const { return flights_.size(); }

 private:
  struct Flight;
  struct Link {
    uint32_t backup = 0;
    std::unique_ptr<ClientImpl> client;
    Flight* flight = nullptr;  // the write it carries (null: free)
    uint64_t rid = 0;
    bool failed = false;  // its completion channel reported an error
    Clock::time_point last_used;
    std::unique_ptr<RingLink> ring;  // the backup's log ring for it (null: none)
    bool ring_flight = false;        // its write went to the ring (no reply comes)
    bool ring_refused = false;       // refused a ring for now (set by the connector)
    // Then: closed once free after this (its replacement asks again). Unset: never (it has
    // one, rings are off, or the backup takes none at all).
    Clock::time_point ring_retry{};
  };
  struct Flight {
    std::shared_ptr<Conn> conn;
    RpcExecutor::FastOp op;
    Link* links[cluster::Replicator::kMaxBackups] = {};
    Status status[cluster::Replicator::kMaxBackups];
    bool maybe_sent[cluster::Replicator::kMaxBackups] = {};
    size_t waiting = 0;
    Clock::time_point posted;
    uint64_t seen_epoch[cluster::Replicator::kMaxBackups] = {};  // the map last looked at
  };
  struct Connect {  // a connector task: a link to make (or, with `dead`, one to destroy)
    uint32_t backup = 0;
    uint32_t writer = 0;  // this server's id and applied epoch, for a ring's grant
    uint64_t epoch = 0;
    std::string host;
    uint16_t port = 0;
    std::unique_ptr<Link> dead;
  };

  Link* FreeLink(uint32_t backup);
  void AskForLink(const cluster::Replicator::Backup& b, const cluster::Replicator::Snapshot& snap);
  // Posts f's write on link i: to its ring when it may go there, else as a REPLICATE.
  Status PostOn(Flight* f, size_t i, bool* posted);
  void AdoptLinks();
  void DropLink(Link* l);                  // its destruction goes to the connector
  void HandOn(std::unique_ptr<Flight> f);  // to a helper (one is started if none is idle)
  void PushConnect(Connect c);
  void HelperLoop();
  void ConnectorLoop();

  RpcExecutor* const exec_;
  const Options options_;
  const uint32_t owner_slots_;
  const size_t reply_cap_;
  const WriteLog* const log_;
  const ReplyFn reply_;
  const bool rings_;
  std::vector<Link*> polled_;  // the links of AppendFds's fds, in order (worker thread)
  // Worker thread only.
  std::map<uint32_t, std::vector<std::unique_ptr<Link>>> links_;
  std::map<uint32_t, int> connecting_;             // connects asked for and not yet back
  std::map<uint32_t, Clock::time_point> backoff_;  // no connect before
  std::map<uint32_t, int> ring_retry_ms_;          // the next ring refusal's wait, per backup
  std::map<uint32_t, Clock::time_point> ring_next_drop_;  // no link closed for a ring before
  std::vector<std::unique_ptr<Flight>> flights_;
  std::atomic<size_t> handed_{0};  // handed to the helpers and not yet ended
  // Shared with the helpers and the connector.
  std::mutex mu_;
  std::condition_variable cv_;                // helpers: a write to end
  std::condition_variable ccv_;               // the connector: a task
  std::deque<std::unique_ptr<Flight>> ends_;  // guarded by mu_
  std::deque<Connect> connects_;              // guarded by mu_
  std::vector<std::unique_ptr<Link>> ready_;  // made links (client null: failed), guarded by mu_
  std::atomic<bool> has_ready_{false};
  bool stop_ = false;                 // guarded by mu_
  size_t idle_helpers_ = 0;           // guarded by mu_
  std::vector<std::thread> helpers_;  // guarded by mu_ (joined by the destructor)
  std::thread connector_;
};

}  // namespace rkv

#endif  // RKV_SERVER_CONN_REPLICA_FAST_PATH_H_
