// SPDX-License-Identifier: Apache-2.0
// ReplicaFastPath: a worker's replicated writes without a thread hand-off (docs/cluster.md,
// "The replicated write's fast path"). A client's PUT/DELETE to a slot this server is the
// primary of is begun on the worker that received it (RpcExecutor::BeginFast: the slot's
// lock and the write's number), its REPLICATE posted by that worker to every backup at once
// over links of the worker's own, and, once every backup answered OK, applied and answered by
// the same worker (RpcExecutor::EndFast), which slept in poll() on its CQ and the links'
// completion channels meanwhile. A write pays one wake-up on this server (the backups'
// replies) where the write pool paid three (the pool thread, its wait, the hand-back).
// Anything else goes the usual way: a write this path cannot begin (the slot's lock busy, a
// kept write, no free link to a backup) is left to the caller (the write pool), and one whose
// first attempt failed somewhere (a refusal, a broken link, no reply within kWaitMs) is ended
// by this object's helper thread (RpcExecutor::EndFast: retries, the kept-write rules, as
// Replicator::Write), which hands its reply to the worker (Worker::Reply) as the pool does.
// So no worker ever waits for another server: two servers that are each other's backups
// cannot block each other's workers.
// Links: up to kLinksPerBackup per backup, each carrying one write at a time, made by the
// helper thread (connect and OPEN block) when a write found none free, and given to the worker
// (AdoptLinks); a backup whose connect failed is not asked again for kBackoffMs. A link whose
// transport failed, or whose reply is overdue, is destroyed (a late reply dies with it).
// Bounds: kMaxInFlight writes in flight per worker; the helper's queue holds at most one task
// per write in flight plus one connect per link place.
// Thread safety: Try, Poll, AppendFds, Rearm and InFlight on the worker thread only; the helper
// thread touches only the tasks handed to it (and the ready links it makes, under mu_).
// Shutdown (destructor, after the worker thread ended): writes still in flight are ended by
// the helper as failed first attempts (bounded by the replicator's max_wait_ms); then it is
// joined. Ownership: borrows the executor and the reply function's worker (both outlive it).
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
#include "server/rpc_executor.h"

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
  using Clock = std::chrono::steady_clock;
  // Any thread: hands a reply to the connection's worker (Worker::Reply).
  using ReplyFn = std::function<void(std::shared_ptr<Conn>, std::string)>;
  struct Done {
    std::shared_ptr<Conn> conn;
    std::string reply;
  };

  // owner_slots: the cluster's slot count (a link's server must have that ownership table);
  // reply_cap: the largest reply (Worker::kSendSlotSize).
  ReplicaFastPath(RpcExecutor* exec, Options link_options, uint32_t owner_slots, size_t reply_cap,
                  ReplyFn reply);
  ~ReplicaFastPath();
  ReplicaFastPath(const ReplicaFastPath&) = delete;
  ReplicaFastPath& operator=(const ReplicaFastPath&) = delete;

  // True: the write (moved out of *request) is taken: its reply comes from Poll or through
  // ReplyFn. False: *request is untouched; execute it the usual way.
  bool Try(const std::shared_ptr<Conn>& c, std::string* request);
  // Takes the replies that arrived; writes every backup applied end here (their replies in
  // *done); the others go to the helper.
  void Poll(std::vector<Done>* done);
  // The completion channels of links with a write in flight, for the worker's poll().
  void AppendFds(std::vector<pollfd>* fds);
  // After poll(): takes the events of the channels AppendFds added from fds[from] on that are
  // readable, and asks for the next ones (then Poll).
  void Rearm(const std::vector<pollfd>& fds, size_t from);
  size_t in_flight() const { return flights_.size(); }
  uint64_t fast() const { return fast_.load(std::memory_order_relaxed); }
  uint64_t handed_on() const { return handed_on_.load(std::memory_order_relaxed); }

 private:
  struct Flight;
  struct Link {
    uint32_t backup = 0;
    std::unique_ptr<ClientImpl> client;
    Flight* flight = nullptr;  // the write it carries (null: free)
    size_t index = 0;          // which backup of that write
    uint64_t rid = 0;
  };
  struct Flight {
    std::shared_ptr<Conn> conn;
    RpcExecutor::FastOp op;
    Link* links[cluster::Replicator::kMaxBackups] = {};
    Status status[cluster::Replicator::kMaxBackups];
    bool maybe_sent[cluster::Replicator::kMaxBackups] = {};
    size_t waiting = 0;
    Clock::time_point posted;
  };
  struct Task {
    std::unique_ptr<Flight> flight;  // a write to end; else a connect:
    uint32_t backup = 0;
    std::string host;
    uint16_t port = 0;
  };

  Link* FreeLink(uint32_t backup);
  void AskForLink(const cluster::Replicator::Backup& b);
  void AdoptLinks();
  void DropLink(Link* l);
  void HandOn(std::unique_ptr<Flight> f);  // to the helper
  void Push(Task t);
  void HelperLoop();

  RpcExecutor* const exec_;
  const Options options_;
  const uint32_t owner_slots_;
  const size_t reply_cap_;
  const ReplyFn reply_;
  std::vector<Link*> polled_;  // the links of AppendFds's fds, in order (worker thread)
  // Worker thread only.
  std::map<uint32_t, std::vector<std::unique_ptr<Link>>> links_;
  std::map<uint32_t, int> connecting_;             // connects asked for and not yet back
  std::map<uint32_t, Clock::time_point> backoff_;  // no connect before
  std::vector<std::unique_ptr<Flight>> flights_;
  std::atomic<uint64_t> fast_{0}, handed_on_{0};
  // Shared with the helper.
  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<Task> tasks_;                    // guarded by mu_
  std::vector<std::unique_ptr<Link>> ready_;  // made links (client null: failed), guarded by mu_
  std::atomic<bool> has_ready_{false};
  bool stop_ = false;  // guarded by mu_
  std::thread helper_;
};

}  // namespace rkv

#endif  // RKV_SERVER_CONN_REPLICA_FAST_PATH_H_
