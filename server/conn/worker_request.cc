// SPDX-License-Identifier: Apache-2.0
// Worker: requests of open connections, their replies, and writes handed to the write pool.
#include <glog/logging.h>
#include <netinet/in.h>

#include <chrono>
#include <cstddef>
#include <cstring>

#include "common/wire.h"
#include "server/conn/worker.h"
#include "server/conn/worker_internal.h"

namespace rkv {

using namespace worker_internal;  // NOLINT(build/namespaces): this class's own helpers

void Worker::HandleRequest(const std::shared_ptr<Conn>& c, const uint8_t* msg, uint32_t len) {
  const ServerOptions& o = *env_.opt;
  Conn::WorkerState& w = c->w;
  const Clock::time_point received = Clock::now();
  w.last_heard = received;
  const int slots = CreditLimit(o);
  // Replies of the unsignalled trailing run are not counted: they may have reached the client
  // long ago, and their completions show only with the next signalled send (ReplySlots).
  if (w.unacked - w.sends.unsignalled_run() + w.in_pool + int(w.waiting_writes.size()) >= slots) {
    env_.counters->credit_drops.fetch_add(1, std::memory_order_relaxed);
    c->RequestClose("sent more than " + std::to_string(slots) +
                    " requests without waiting for replies (request credits: " +
                    std::to_string(o.credits) + ")");
    return;
  }
  if (c->state() != Conn::State::kOpen) {
    HandleUnopened(c, msg, len);
    return;
  }
  if (RefuseReplicate(c, msg, len)) return;
  if (HandleRingGrant(c, msg, len)) return;
  if (Offload(c, msg, len, received)) return;
  uint8_t* out = NextReplyBuffer(*c);
  bool malformed = false;
  size_t n = env_.exec->Execute(c->qp(), c->qpn, c->w.granted_rkey, msg, len, out, kSendSlotSize,
                                &malformed);
  if (malformed && ++w.bad_requests > o.max_bad_requests) {
    env_.counters->clients_dropped.fetch_add(1, std::memory_order_relaxed);
    c->RequestClose("more than " + std::to_string(o.max_bad_requests) + " malformed requests");
    return;
  }
  if (n == 0) {
    LOG(ERROR) << "reply does not fit a send slot";
    return;
  }
  (void)PostReplyBuffer(*c, out, n, &received);
}

void Worker::CountReply(const void* reply, size_t n, Clock::time_point received) {
  if (n < sizeof(wire::ReplyHeader)) return;
  wire::ReplyHeader h;
  std::memcpy(&h, reply, sizeof h);
  int64_t ns =
      std::chrono::duration_cast<std::chrono::nanoseconds>(Clock::now() - received).count();
  env_.counters->rpcs.Record(h.op, h.status, ns > 0 ? uint64_t(ns) : 0);
}

void Worker::PostReply(const std::shared_ptr<Conn>& c, wire::Op op, uint64_t request_id, Code code,
                       std::string_view payload) {
  uint8_t* out = NextReplyBuffer(*c);
  size_t n = wire::EncodeReply(op, request_id, code, payload, out, kSendSlotSize);
  // Only called while handling a request: last_heard is its receive time.
  if (n > 0) (void)PostReplyBuffer(*c, out, n, &c->w.last_heard);
}

bool Worker::RefuseReplicate(const std::shared_ptr<Conn>& c, const uint8_t* msg, uint32_t len) {
  if (!env_.replicate_sender || len < sizeof(wire::RequestHeader) ||
      msg[offsetof(wire::RequestHeader, op)] != uint8_t(wire::Op::kReplicate))
    return false;
  wire::Request req;
  wire::ReplicateHeader h;
  // Malformed: the executor answers it (BAD_REQUEST, counted as malformed).
  if (!wire::DecodeRequest(msg, len, &req).ok() || req.key.size() < sizeof h) return false;
  std::memcpy(&h, req.key.data(), sizeof h);
  uint32_t peer = 0;
  if (c->id() != nullptr) {
    const sockaddr* a = rdma_get_peer_addr(c->id());
    if (a != nullptr && a->sa_family == AF_INET)
      peer = reinterpret_cast<const sockaddr_in*>(a)->sin_addr.s_addr;
  }
  const Status s = env_.replicate_sender(h.sender_id, h.epoch, peer);
  if (s.ok()) return false;
  if (s.code() != Code::kUnavailable)  // "ask again" is not a refusal of the sender
    env_.counters->repl_refused_sender.fetch_add(1, std::memory_order_relaxed);
  PostReply(c, wire::Op::kReplicate, req.request_id, s.code(), s.message());
  return true;
}

bool Worker::Offload(const std::shared_ptr<Conn>& c, const uint8_t* msg, uint32_t len,
                     Clock::time_point received) {
  if (env_.writes == nullptr) return false;
  wire::Request req;
  if (!wire::DecodeRequest(msg, len, &req).ok()) return false;  // answered here: BAD_REQUEST
  if (req.op != wire::Op::kPut && req.op != wire::Op::kDelete && req.op != wire::Op::kMigratePut &&
      req.op != wire::Op::kMigrateDelete && req.op != wire::Op::kMigrateBegin &&
      req.op != wire::Op::kReplicate)
    return false;
  if (req.op == wire::Op::kReplicate) {
    // A memory-only backup applies a REPLICATE on this worker (it never waits for another
    // server or a disk); a durable one on its own pool (WorkerEnv::repl_writes), where it may
    // wait for the log while holding the slot's apply lock.
    if (env_.repl_writes == nullptr || env_.log == nullptr) return false;
  }
  // A memory-only server applies a migration's copy (MIGRATE_PUT/DELETE: a table write, no
  // disk, no other server) on this worker, unless this connection's MIGRATE_BEGIN (it purges, on
  // the pool) or earlier copies are still in the pool: one connection's writes apply in order. A
  // memory-only server without replicas (whose pool is there for MIGRATE_BEGIN's purge) applies
  // clients' PUTs and DELETEs here the same way.
  const bool copy = req.op == wire::Op::kMigratePut || req.op == wire::Op::kMigrateDelete;
  const bool client_write = req.op == wire::Op::kPut || req.op == wire::Op::kDelete;
  if ((copy || (client_write && env_.repl_writes == nullptr)) && env_.log == nullptr &&
      c->w.in_pool == 0 && c->w.waiting_writes.empty())
    return false;
  // No hand-over when the log will not make this thread wait for the disk (--fsync=no|everysec
  // and no write in progress or slow: WriteLog::WriteInline), unless this connection has writes
  // in the pool (its writes apply in order), or the write waits for backups.
  if (env_.log != nullptr && env_.repl_writes == nullptr && c->w.in_pool == 0 &&
      c->w.waiting_writes.empty() && env_.log->WriteInline()) {
    env_.counters->writes_inline.fetch_add(1, std::memory_order_relaxed);
    return false;
  }
  // One write of a connection in the pool at a time, in the order it sent them: a client cannot
  // take more than one pool thread per connection, and "PUT k=1; PUT k=2" ends as 2.
  if (env_.write_received != nullptr) {
    const uint32_t slots = uint32_t(CreditLimit(*env_.opt));
    const uint32_t at =
        (env_.write_ring_head[c->slot] + uint32_t(c->w.waiting_writes.size())) % slots;
    env_.write_received[size_t(c->slot) * (slots + 1) + at] = received;
  }
  c->w.waiting_writes.emplace_back(reinterpret_cast<const char*>(msg), len);
  SubmitNextWrite(c);
  return true;
}

void Worker::SubmitNextWrite(const std::shared_ptr<Conn>& c) {
  Conn::WorkerState& w = c->w;
  if (w.in_pool > 0 || w.waiting_writes.empty()) return;
  if (c->state() >= Conn::State::kClosing) {  // nobody will read the replies
    w.waiting_writes.clear();
    return;
  }
  WritePool::Job job;
  job.conn = c;
  job.worker = this;
  job.request = std::move(w.waiting_writes.front());
  w.waiting_writes.pop_front();
  Clock::time_point received = Clock::now();
  if (env_.write_received != nullptr) {
    const uint32_t slots = uint32_t(CreditLimit(*env_.opt));
    Clock::time_point* times = env_.write_received + size_t(c->slot) * (slots + 1);
    uint32_t& head = env_.write_ring_head[c->slot];
    received = times[head];
    head = (head + 1) % slots;
    times[slots] = received;  // the write in the pool
  }
  ++w.in_pool;
  // A client's replicated write first tries the fast path (server/conn/replica_fast_path.h),
  // unless the log may make this thread wait for the disk.
  if (fast_ && (env_.log == nullptr || env_.log->WriteInline()) && job.request.size() > 6 &&
      (uint8_t(job.request[6]) == uint8_t(wire::Op::kPut) ||
       uint8_t(job.request[6]) == uint8_t(wire::Op::kDelete)) &&
      fast_->Try(c, &job.request))
    return;
  // REPLICATE (op byte 6 of the validated header) has a pool of its own (WorkerEnv).
  WritePool* pool = env_.writes;
  if (env_.repl_writes != nullptr && job.request.size() > 6 &&
      uint8_t(job.request[6]) == uint8_t(wire::Op::kReplicate))
    pool = env_.repl_writes;
  if (!pool->Submit(&job)) {
    // The pool is stopping (shutdown) or full beyond the credit bound: answer here instead.
    --w.in_pool;
    const std::string& r = job.request;
    uint8_t* out = NextReplyBuffer(*c);
    bool malformed = false;
    size_t n = env_.exec->Execute(c->qp(), c->qpn, c->w.granted_rkey,
                                  reinterpret_cast<const uint8_t*>(r.data()), r.size(), out,
                                  kSendSlotSize, &malformed);
    if (n > 0) (void)PostReplyBuffer(*c, out, n, &received);
    SubmitNextWrite(c);
  }
}

void Worker::SendReply(const std::shared_ptr<Conn>& c, const std::string& reply) {
  Conn::WorkerState& w = c->w;
  if (c->state() >= Conn::State::kClosing || w.error_state || reply.empty()) return;
  uint8_t* out = NextReplyBuffer(*c);
  std::memcpy(out, reply.data(), reply.size());
  const Clock::time_point* received = nullptr;
  if (env_.write_received != nullptr) {
    const size_t slots = size_t(CreditLimit(*env_.opt));
    received = &env_.write_received[size_t(c->slot) * (slots + 1) + slots];
  }
  (void)PostReplyBuffer(*c, out, reply.size(), received);
}

}  // namespace rkv
