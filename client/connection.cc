// SPDX-License-Identifier: Apache-2.0
// Connection's datapath: READ chains, polling, and the single request/reply exchange (the
// opening of a connection is in connection_open.cc, pipelined requests in
// connection_pipeline.cc).
#include "client/connection.h"

#include <poll.h>
#include <time.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <thread>

#include "client/wr_id.h"

namespace rkv {
namespace {
using namespace wr_id;  // NOLINT(build/namespaces): this class's own ids

uint64_t NowNs() {
  timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);  // vDSO: no system call
  return uint64_t(ts.tv_sec) * 1000000000ull + ts.tv_nsec;
}
}  // namespace

Connection::~Connection() {
  if (id_ && state_ == State::kConnected) rdma_disconnect(id_.get());
}

Status Connection::Broken(Status s) {
  state_ = State::kBroken;
  return s;
}

Status Connection::PostReads(const ReadOp* ops, int n) {
  if (state_ != State::kConnected) return Status(Code::kConnectionLost, "connection is broken");
  ibv_sge sge[kMaxReads];
  ibv_send_wr wr[kMaxReads];
  if (n <= 0 || n > int(sizeof(wr) / sizeof(wr[0])))
    return Status(Code::kInvalidArgument, "bad READ batch size");
  for (int k = 0; k < n; ++k) {
    sge[k] = {reinterpret_cast<uint64_t>(buf_.get() + ops[k].local_offset), ops[k].length,
              mr_->lkey};
    wr[k] = {};
    wr[k].wr_id = kRead;
    wr[k].sg_list = &sge[k];
    wr[k].num_sge = 1;
    wr[k].opcode = IBV_WR_RDMA_READ;
    wr[k].wr.rdma.remote_addr = hello_.region_addr + ops[k].remote_offset;
    wr[k].wr.rdma.rkey = hello_.rkey;
    wr[k].next = k + 1 < n ? &wr[k + 1] : nullptr;
  }
  wr[n - 1].send_flags = IBV_SEND_SIGNALED;  // the chain's one completion (QpInitAttr)
  ibv_send_wr* bad = nullptr;
  int rc = ibv_post_send(qp_.qp(), wr, &bad);
  if (rc != 0) return Broken(ErrnoStatus("ibv_post_send(RDMA_READ)", rc));
  ++chains_posted_;
  return Status::Ok();
}

Status Connection::Poll(int want_reads, bool want_recv, bool want_send, int timeout_ms,
                        bool want_pipe, bool want_pipe_sends) {
  const uint64_t start = NowNs();
  uint64_t deadline = start + uint64_t(timeout_ms) * 1000000ull;
  ibv_wc wc[32];
  uint32_t spins = 0;
  bool long_wait = false;  // past kBusyPollMs: sleep between polls
  const uint64_t pipe_before = pipe_arrived_;
  auto pipe_waiting = [&] { return want_pipe && pipe_arrived_ == pipe_before; };
  while (want_reads > 0 || want_recv || want_send || pipe_waiting() ||
         (want_pipe_sends && window_.sends_pending())) {
    int n = ibv_poll_cq(cq_.get(), 32, wc);
    if (n < 0) return Broken(Status(Code::kIoError, "ibv_poll_cq failed"));
    for (int k = 0; k < n; ++k) {
      if (wc[k].status != IBV_WC_SUCCESS) {
        const uint64_t kind = wc[k].wr_id & 0xff;
        const char* what = kind == kRead                        ? "RDMA READ"
                           : kind == kSend || kind == kPipeSend ? "SEND"
                                                                : "RECV";
        return Broken(Status(Code::kConnectionLost, std::string(what) + " completed with error: " +
                                                        ibv_wc_status_str(wc[k].status) +
                                                        " (server gone or QP failed)"));
      }
      switch (wc[k].wr_id & 0xff) {
        case kRead:
          --want_reads;
          break;
        case kRecv:
          want_recv = false;
          break;
        case kSend:
          want_send = false;
          break;
        case kPipeSend:
          window_.SendDone();
          break;
        case kPipeRecv:  // receives complete in posting order: this is slot pipe_arrived_ % max
          pipe_len_[pipe_arrived_++ % kMaxPipeline] = wc[k].byte_len;
          break;
      }
    }
    // Options::reply_spin_us >= 0: an RPC's wait (a reply, or its SEND's completion; no READ)
    // sleeps past the spin, until a completion, an rdma_cm event or the deadline; its checks
    // below run on every wake-up, at least every kEventWaitMs.
    const bool asleep = n == 0 && comp_ && (want_recv || want_pipe || want_send) &&
                        want_reads == 0 && !want_pipe_sends &&
                        NowNs() - start >= uint64_t(options_.reply_spin_us) * 1000;
    if (asleep) {
      const uint64_t now = NowNs();
      const int left_ms = now >= deadline ? 0 : int((deadline - now + 999999) / 1000000);
      Status s = WaitForEvent(std::min(kEventWaitMs, left_ms));
      if (!s.ok()) return Broken(s);
    } else if (n == 0 && long_wait) {
      // A wait this long is not a round trip but a server stopped, cut off or overloaded:
      // polling on would take a core from the processes that are to end it (etcd, the
      // coordinator, the servers on this host).
      std::this_thread::sleep_for(std::chrono::microseconds(kLongWaitSleepUs));
    }
    if (n == 0 && ((++spins & 1023) == 0 || long_wait || asleep)) {
      // Waiting for an RPC's reply (never on the GET path): let a thread that has work run
      // first (a kvserver replicating to a backup on the same cores, an oversubscribed host).
      if (want_recv || want_pipe) std::this_thread::yield();
      long_wait = long_wait || NowNs() - start > uint64_t(kBusyPollMs) * 1000000ull;
      if (NowNs() > deadline)
        return Broken(Status(Code::kTimeout, "no completion within " + std::to_string(timeout_ms) +
                                                 " ms; connection considered lost"));
      // Waiting for a reply (never on the GET path): a server that closed or died is noticed
      // at once, not after rpc_timeout_ms.
      if ((want_recv || want_pipe) && PeerDisconnected())
        return Broken(Status(Code::kConnectionLost,
                             "server disconnected (rdma_cm DISCONNECTED) while a reply was "
                             "awaited; the request's outcome is unknown"));
      // Any wait (READs too: a cut-off server completes none): one pointer test, and while a
      // cluster router watches, one atomic load (client/failover_watch.h).
      if (abandon_ != nullptr && (*abandon_)())
        return Broken(Status(Code::kConnectionLost,
                             want_reads > 0 && !want_recv && !want_pipe
                                 ? "stopped waiting for READs: the cluster map gave the key's "
                                   "slot to another server (this one was failed over)"
                                 : "stopped waiting for the reply: the cluster map gave the "
                                   "key's slot to another server (this one was failed over); "
                                   "the request's outcome is unknown"));
    }
  }
  return Status::Ok();
}

Status Connection::WaitForEvent(int max_ms) {
  if (!cq_armed_) {
    if (int rc = ibv_req_notify_cq(cq_.get(), 0); rc != 0)
      return ErrnoStatus("ibv_req_notify_cq", rc);
    cq_armed_ = true;
    return Status::Ok();  // the caller polls once more before it sleeps
  }
  // The completion channel, and in rdma_cm mode the connection's event channel (a DISCONNECTED
  // wakes the wait at once; the caller's PeerDisconnected reads it).
  pollfd p[2] = {{comp_->fd, POLLIN, 0}, {channel_ ? channel_->fd : -1, POLLIN, 0}};
  const int r = poll(p, channel_ ? 2 : 1, max_ms);
  if (r < 0 && errno != EINTR) return ErrnoStatus("poll(completion channel)", errno);
  if (r <= 0) return Status::Ok();
  if (p[0].revents & (POLLERR | POLLHUP | POLLNVAL))
    return Status(Code::kIoError, "the completion channel failed (device error)");
  if (p[0].revents & POLLIN) {
    ibv_cq* cq = nullptr;
    void* ctx = nullptr;
    if (ibv_get_cq_event(comp_.get(), &cq, &ctx) != 0) {
      if (errno == EAGAIN) return Status::Ok();  // non-blocking: nothing there after all
      return ErrnoStatus("ibv_get_cq_event", errno);
    }
    ibv_ack_cq_events(cq, 1);
    cq_armed_ = false;
  }
  return Status::Ok();
}

bool Connection::PeerDisconnected() {
  if (!channel_) return false;  // manual mode: the exchange channel watches the peer
  pollfd pfd{channel_->fd, POLLIN, 0};
  if (::poll(&pfd, 1, 0) <= 0) return false;
  rdma_cm_event* ev = nullptr;
  if (rdma_get_cm_event(channel_.get(), &ev) != 0) return false;
  const bool gone = ev->event == RDMA_CM_EVENT_DISCONNECTED ||
                    ev->event == RDMA_CM_EVENT_DEVICE_REMOVAL ||
                    ev->event == RDMA_CM_EVENT_TIMEWAIT_EXIT;
  rdma_ack_cm_event(ev);
  return gone;
}

Status Connection::WaitReads() {
  const int chains = chains_posted_;
  chains_posted_ = 0;
  return Poll(chains, false, false, options_.rpc_timeout_ms);
}

Status Connection::Rpc(wire::Op op, std::string_view key, std::string_view value,
                       Code* server_status, std::string* payload) {
  if (state_ != State::kConnected) return Status(Code::kConnectionLost, "connection is broken");
  uint64_t rid = next_request_id_++;
  size_t len =
      wire::EncodeRequest(op, rid, key, value, buf_.get() + kSendArea, kRecvArea - kSendArea);
  if (len == 0) return Status(Code::kTooLarge, "request does not fit the send buffer");
  if (window_.outstanding() > 0 || ring_chains_ > 0)
    return Status(Code::kInvalidArgument, "pipelined requests or ring writes are outstanding");
  return Exchange(len, rid, server_status, payload);
}

Status Connection::SendRaw(const void* data, size_t len, Code* server_status,
                           std::string* payload) {
  if (state_ != State::kConnected) return Status(Code::kConnectionLost, "connection is broken");
  if (len > kRecvArea - kSendArea) return Status(Code::kTooLarge, "raw request too large");
  if (window_.outstanding() > 0)
    return Status(Code::kInvalidArgument, "pipelined requests are outstanding");
  std::memcpy(buf_.get() + kSendArea, data, len);
  return Exchange(len, 0, server_status, payload);
}

Status Connection::PostRequest(uint8_t* recv_at, uint32_t recv_len, uint64_t recv_id,
                               const uint8_t* send_at, uint32_t len, uint64_t send_id) {
  ibv_sge rsge{reinterpret_cast<uint64_t>(recv_at), recv_len, mr_->lkey};
  ibv_recv_wr rwr{}, *rbad = nullptr;
  rwr.wr_id = recv_id;
  rwr.sg_list = &rsge;
  rwr.num_sge = 1;
  if (int rc = ibv_post_recv(qp_.qp(), &rwr, &rbad); rc != 0)
    return Broken(ErrnoStatus("ibv_post_recv", rc));
  ibv_sge ssge{reinterpret_cast<uint64_t>(send_at), len, mr_->lkey};
  ibv_send_wr swr{}, *sbad = nullptr;
  swr.wr_id = send_id;
  swr.sg_list = &ssge;
  swr.num_sge = 1;
  swr.opcode = IBV_WR_SEND;
  swr.send_flags = IBV_SEND_SIGNALED;
  if (len <= max_inline_) swr.send_flags |= IBV_SEND_INLINE;
  if (int rc = ibv_post_send(qp_.qp(), &swr, &sbad); rc != 0)
    return Broken(ErrnoStatus("ibv_post_send(SEND)", rc));
  return Status::Ok();
}

Status Connection::Exchange(size_t len, uint64_t rid, Code* server_status, std::string* payload) {
  Status ps = PostRequest(buf_.get() + kRecvArea, uint32_t(kRecvAreaSize), kRecv,
                          buf_.get() + kSendArea, uint32_t(len), kSend);
  if (!ps.ok()) return ps;
  // The reply length is not in the completion we keep; decode from the header.
  Status s = Poll(0, true, true, options_.rpc_timeout_ms);
  if (!s.ok()) return s;
  wire::ReplyHeader rh;
  std::memcpy(&rh, buf_.get() + kRecvArea, sizeof(rh));
  wire::Reply reply;
  s = wire::DecodeReply(buf_.get() + kRecvArea,
                        sizeof(rh) + std::min<size_t>(rh.payload_size, wire::kMaxReplyPayload),
                        &reply);
  if (!s.ok()) return Broken(s);
  if (rid != 0 && reply.request_id != rid)
    return Broken(Status(Code::kProtocolError, "reply for request " +
                                                   std::to_string(reply.request_id) +
                                                   ", expected " + std::to_string(rid)));
  *server_status = reply.status;
  if (payload) payload->assign(reply.payload);
  return Status::Ok();
}

}  // namespace rkv
