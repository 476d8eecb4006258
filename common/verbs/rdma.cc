// SPDX-License-Identifier: Apache-2.0
#include "common/verbs/rdma.h"

#include <netdb.h>
#include <poll.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdint>
#include <cstring>
#include <memory>
#include <string_view>

#include "common/printable.h"

namespace rkv {

void MoveQpToError(ibv_qp* qp) {
  ibv_qp_attr attr{};
  attr.qp_state = IBV_QPS_ERR;
  ibv_modify_qp(qp, &attr, IBV_QP_STATE);
}

QpOwner& QpOwner::operator=(QpOwner&& o) noexcept {
  if (this != &o) {
    Reset();
    id_ = o.id_;
    qp_ = o.qp_;
    cq_ = o.cq_;
    o.id_ = nullptr;
    o.qp_ = nullptr;
  }
  return *this;
}

void QpOwner::Reset() {
  if (qp_ == nullptr) {
    id_ = nullptr;
    return;
  }
  MoveQpToError(qp_);
  if (cq_ != nullptr) {
    ibv_wc wc[16];
    auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(200);
    while (std::chrono::steady_clock::now() < deadline) {
      int n = ibv_poll_cq(cq_, 16, wc);
      if (n <= 0) break;
    }
  }
  if (id_ != nullptr)
    rdma_destroy_qp(id_);
  else
    ibv_destroy_qp(qp_);
  id_ = nullptr;
  qp_ = nullptr;
}

Status ResolveRoute(rdma_event_channel* channel, rdma_cm_id* id, const std::string& host,
                    uint16_t port, int timeout_ms, uint8_t tos,
                    const std::function<bool()>* give_up, const std::string& source) {
  addrinfo hints{}, *res = nullptr, *src = nullptr;
  hints.ai_family = AF_INET;
  hints.ai_socktype = SOCK_STREAM;
  int gai = getaddrinfo(host.c_str(), std::to_string(port).c_str(), &hints, &res);
  if (gai != 0)
    return Status(Code::kInvalidArgument,
                  "cannot resolve '" + host + "': " + std::string(gai_strerror(gai)));
  if (!source.empty()) {
    gai = getaddrinfo(source.c_str(), nullptr, &hints, &src);
    if (gai != 0) {
      freeaddrinfo(res);
      return Status(
          gai == EAI_AGAIN ? Code::kUnavailable : Code::kInvalidArgument,
          "cannot resolve the local address '" + source + "': " + std::string(gai_strerror(gai)));
    }
  }
  int rc = rdma_resolve_addr(id, src != nullptr ? src->ai_addr : nullptr, res->ai_addr, timeout_ms);
  int err = errno;
  freeaddrinfo(res);
  if (src != nullptr) freeaddrinfo(src);
  if (rc != 0)
    return ErrnoStatus(
        "rdma_resolve_addr(" + host + (source.empty() ? "" : " from " + source) + ")", err);
  rdma_cm_event* ev = nullptr;
  Status s = WaitCmEvent(channel, RDMA_CM_EVENT_ADDR_RESOLVED, timeout_ms, &ev, give_up);
  if (!s.ok()) return Status(s.code(), "resolving " + host + ": " + s.message());
  rdma_ack_cm_event(ev);
  if (tos != 0 && rdma_set_option(id, RDMA_OPTION_ID, RDMA_OPTION_ID_TOS, &tos, sizeof tos) != 0)
    return ErrnoStatus("rdma_set_option(TOS)", errno);
  if (rdma_resolve_route(id, timeout_ms) != 0) return ErrnoStatus("rdma_resolve_route", errno);
  s = WaitCmEvent(channel, RDMA_CM_EVENT_ROUTE_RESOLVED, timeout_ms, &ev, give_up);
  if (!s.ok()) return s;
  rdma_ack_cm_event(ev);
  return Status::Ok();
}

Status WaitCmEvent(rdma_event_channel* channel, rdma_cm_event_type expected, int timeout_ms,
                   rdma_cm_event** event, const std::function<bool()>* give_up) {
  pollfd pfd{channel->fd, POLLIN, 0};
  int r = 0;
  if (give_up == nullptr) {
    r = poll(&pfd, 1, timeout_ms);
  } else {
    // A negative timeout waits for ever, as poll's does.
    const auto deadline = std::chrono::steady_clock::now() +
                          std::chrono::milliseconds(timeout_ms < 0 ? INT32_MAX : timeout_ms);
    for (;;) {
      const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
                            deadline - std::chrono::steady_clock::now())
                            .count();
      r = poll(&pfd, 1, int(std::max<int64_t>(0, std::min<int64_t>(left, 50))));
      if (r != 0 || left <= 0) break;
      if ((*give_up)())
        return Status(Code::kConnectionLost, std::string("gave up waiting for ") +
                                                 rdma_event_str(expected) +
                                                 " (the caller no longer needs the connection)");
    }
  }
  if (r < 0) return ErrnoStatus("poll(rdma_cm channel)", errno);
  if (r == 0)
    return Status(Code::kTimeout, std::string("no rdma_cm event within ") +
                                      std::to_string(timeout_ms) + " ms waiting for " +
                                      rdma_event_str(expected));
  if (rdma_get_cm_event(channel, event) != 0) return ErrnoStatus("rdma_get_cm_event", errno);
  if ((*event)->event != expected) {
    std::string msg = std::string("expected ") + rdma_event_str(expected) + ", got " +
                      rdma_event_str((*event)->event);
    if ((*event)->event == RDMA_CM_EVENT_REJECTED) {
      msg += " (status " + std::to_string((*event)->status) + ")";
      if ((*event)->param.conn.private_data_len > 0 && (*event)->param.conn.private_data) {
        const char* p = static_cast<const char*>((*event)->param.conn.private_data);
        // The peer's bytes, escaped: they end up in messages and logs.
        msg += ": " +
               Printable(std::string_view(p, strnlen(p, (*event)->param.conn.private_data_len)));
      }
    }
    // A server's per-address limit (its reject text starts "BUSY: "): try again later.
    const bool busy =
        (*event)->event == RDMA_CM_EVENT_REJECTED && msg.find("): BUSY: ") != std::string::npos;
    Code code = busy ? Code::kBusy
                : (*event)->event == RDMA_CM_EVENT_REJECTED ||
                        (*event)->event == RDMA_CM_EVENT_UNREACHABLE ||
                        (*event)->event == RDMA_CM_EVENT_ADDR_ERROR ||
                        (*event)->event == RDMA_CM_EVENT_ROUTE_ERROR ||
                        (*event)->event == RDMA_CM_EVENT_CONNECT_ERROR
                    ? Code::kConnectionLost
                    : Code::kProtocolError;
    rdma_ack_cm_event(*event);
    *event = nullptr;
    return Status(code, msg);
  }
  return Status::Ok();
}

const char* MtuName(ibv_mtu mtu) {
  switch (mtu) {
    case IBV_MTU_256:
      return "256";
    case IBV_MTU_512:
      return "512";
    case IBV_MTU_1024:
      return "1024";
    case IBV_MTU_2048:
      return "2048";
    case IBV_MTU_4096:
      return "4096";
  }
  return "?";
}
uint32_t MtuBytes(ibv_mtu mtu) { return 128u << static_cast<int>(mtu); }

uint32_t ProbeMaxInline(ibv_context* ctx, ibv_pd* pd, uint32_t want, uint32_t max_send_wr,
                        uint32_t max_recv_wr) {
  std::unique_ptr<ibv_cq, CqDeleter> cq(
      ibv_create_cq(ctx, int(max_send_wr + max_recv_wr), nullptr, nullptr, 0));
  if (!cq) return 0;
  for (uint32_t size = want; size >= 16; size /= 2) {
    ibv_qp_init_attr qa{};
    qa.send_cq = cq.get();
    qa.recv_cq = cq.get();
    qa.qp_type = IBV_QPT_RC;
    qa.cap.max_send_wr = max_send_wr;
    qa.cap.max_recv_wr = max_recv_wr;
    qa.cap.max_send_sge = 1;
    qa.cap.max_recv_sge = 1;
    qa.cap.max_inline_data = size;
    ibv_qp* qp = ibv_create_qp(pd, &qa);
    if (qp == nullptr) continue;
    const uint32_t got = std::min(qa.cap.max_inline_data, size);  // the device may round up
    (void)ibv_destroy_qp(qp);
    return got;
  }
  return 0;
}

}  // namespace rkv
