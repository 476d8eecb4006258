// SPDX-License-Identifier: Apache-2.0
// Connection's pipelined requests (Client::Execute): many PUT/DELETE requests in flight on the
// one QP, up to the server's request credits. The bookkeeping (send ring, receive slots) is
// RpcWindow's; this file posts and decodes. No allocation beyond the caller's payload string.
#include <algorithm>
#include <cerrno>
#include <cstring>

#include "client/connection.h"
#include "client/wr_id.h"

namespace rkv {

using namespace wr_id;  // NOLINT(build/namespaces): this class's own ids

Status Connection::PostRpc(wire::Op op, std::string_view key, std::string_view value, uint64_t* rid,
                           bool* posted) {
  *posted = false;
  if (state_ != State::kConnected) return Status(Code::kConnectionLost, "connection is broken");
  const size_t len = sizeof(wire::RequestHeader) + key.size() + value.size();
  if (len > wire::kMaxRequestSize) return Status(Code::kTooLarge, "request too large");
  const uint64_t id = next_request_id_;
  RpcWindow::Slot slot;
  if (!window_.Reserve(uint32_t(len), id, &slot)) {
    if (window_.outstanding() > 0) return Status::Ok();  // take a reply first
    // Every reply is taken but some sends have not completed (their ACKs are late): their
    // bytes may still be read for a retransmission, so wait for those completions.
    Status s = Poll(0, false, false, options_.rpc_timeout_ms, false, /*want_pipe_sends=*/true);
    if (!s.ok()) return s;
    if (!window_.Reserve(uint32_t(len), id, &slot))
      return Broken(Status(Code::kIoError, "pipelined request of " + std::to_string(len) +
                                               " bytes does not fit an empty send ring"));
  }
  ++next_request_id_;
  uint8_t* at = buf_.get() + kPipeSendArea + slot.ring_offset;
  if (wire::EncodeRequest(op, id, key, value, at, kPipeSendSize - slot.ring_offset) != len)
    return Broken(Status(Code::kIoError, "pipelined request encoding disagrees on its size"));
  Status ps = PostRequest(buf_.get() + kPipeRecvArea + uint64_t(slot.recv_slot) * kPipeRecvSlot,
                          uint32_t(kPipeRecvSlot), kPipeRecv | (uint64_t(slot.recv_slot) << 8), at,
                          uint32_t(len), kPipeSend);
  if (!ps.ok()) return ps;
  *rid = id;
  *posted = true;
  return Status::Ok();
}

Status Connection::NextReply(uint64_t* rid, Code* server_status, std::string* payload) {
  if (state_ != State::kConnected) return Status(Code::kConnectionLost, "connection is broken");
  if (window_.outstanding() == 0)
    return Status(Code::kInvalidArgument, "no pipelined request is outstanding");
  const int slot = window_.NextRecvSlot();
  if (pipe_arrived_ <= uint64_t(window_.replies_taken())) {
    Status s = Poll(0, false, false, options_.rpc_timeout_ms, /*want_pipe=*/true);
    if (!s.ok()) return s;
  }
  const uint8_t* bytes = buf_.get() + kPipeRecvArea + uint64_t(slot) * kPipeRecvSlot;
  wire::Reply reply;
  Status s = wire::DecodeReply(bytes, std::min<uint64_t>(pipe_len_[slot], kPipeRecvSlot), &reply);
  if (!s.ok()) return Broken(s);
  if (!window_.ReplyTaken(reply.request_id))
    return Broken(Status(
        Code::kProtocolError,
        "reply for request " + std::to_string(reply.request_id) + ", which is not outstanding"));
  *rid = reply.request_id;
  *server_status = reply.status;
  if (payload) payload->assign(reply.payload);
  return Status::Ok();
}

bool Connection::PollReply() {
  if (state_ != State::kConnected) return false;
  if (pipe_arrived_ > uint64_t(window_.replies_taken())) return true;
  ibv_wc wc[16];
  const int n = ibv_poll_cq(cq_.get(), 16, wc);
  if (n < 0) {
    (void)Broken(Status(Code::kIoError, "ibv_poll_cq failed"));
    return false;
  }
  for (int k = 0; k < n; ++k) {
    if (wc[k].status != IBV_WC_SUCCESS) {
      (void)Broken(Status(Code::kConnectionLost, std::string("completion with error: ") +
                                                     ibv_wc_status_str(wc[k].status)));
      return false;
    }
    const uint64_t kind = wc[k].wr_id & 0xff;
    if (kind == kPipeSend) {
      window_.SendDone();
    } else if (kind == kPipeRecv) {  // receives complete in posting order
      pipe_len_[pipe_arrived_++ % kMaxPipeline] = wc[k].byte_len;
    } else if (kind == kRing && ring_chains_ > 0) {  // connection_ring.cc
      --ring_chains_;
    } else {  // only pipelined requests and ring chains run on such a connection
      (void)Broken(Status(Code::kProtocolError, "unexpected completion kind"));
      return false;
    }
  }
  return pipe_arrived_ > uint64_t(window_.replies_taken());
}

Status Connection::RearmEvents() {
  if (!comp_) return Status(Code::kInvalidArgument, "no completion channel");
  for (;;) {
    ibv_cq* cq = nullptr;
    void* ctx = nullptr;
    if (ibv_get_cq_event(comp_.get(), &cq, &ctx) != 0) {
      if (errno == EAGAIN) break;  // non-blocking (connection_open.cc)
      return ErrnoStatus("ibv_get_cq_event", errno);
    }
    ibv_ack_cq_events(cq, 1);
  }
  if (int rc = ibv_req_notify_cq(cq_.get(), 0); rc != 0)
    return ErrnoStatus("ibv_req_notify_cq", rc);
  cq_armed_ = true;
  return Status::Ok();
}

}  // namespace rkv
