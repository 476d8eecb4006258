// SPDX-License-Identifier: Apache-2.0
#include "server/conn/async_events.h"

#include <fcntl.h>
#include <glog/logging.h>
#include <poll.h>

#include "common/verbs/rdma.h"
#include "server/conn/worker.h"

namespace rkv {

Status AsyncEvents::Start() {
  int flags = fcntl(ctx_->async_fd, F_GETFL);
  if (flags < 0 || fcntl(ctx_->async_fd, F_SETFL, flags | O_NONBLOCK) != 0)
    return ErrnoStatus("fcntl(async_fd, O_NONBLOCK)", errno);
  thread_ = std::thread([this] { Loop(); });
  return Status::Ok();
}

void AsyncEvents::Join() {
  if (thread_.joinable()) thread_.join();
}

void AsyncEvents::Loop() {
  while (!stop_->load()) {
    pollfd p{ctx_->async_fd, POLLIN, 0};
    int r = poll(&p, 1, 200);
    if (r <= 0) continue;
    ibv_async_event ev;
    while (ibv_get_async_event(ctx_, &ev) == 0) {
      Handle(ev);
      ibv_ack_async_event(&ev);
    }
  }
}

void AsyncEvents::Handle(const ibv_async_event& ev) {
  switch (ev.event_type) {
    case IBV_EVENT_QP_FATAL:
    case IBV_EVENT_QP_REQ_ERR:
    case IBV_EVENT_QP_ACCESS_ERR:
    case IBV_EVENT_PATH_MIG_ERR: {
      std::shared_ptr<Conn> c = registry_->Find(ev.element.qp->qp_num);
      if (!c || c->qp_handle != ev.element.qp) return;
      if (c->RequestClose(std::string("QP async event: ") + ibv_event_type_str(ev.event_type)))
        counters_->qp_async_errors.fetch_add(1, std::memory_order_relaxed);
      return;
    }
    case IBV_EVENT_QP_LAST_WQE_REACHED: {
      std::shared_ptr<Conn> c = registry_->Find(ev.element.qp->qp_num);
      if (c && c->qp_handle == ev.element.qp) c->NotifyLastWqe();
      return;
    }
    case IBV_EVENT_COMM_EST:
    case IBV_EVENT_SQ_DRAINED:
    case IBV_EVENT_PATH_MIG:
      VLOG(1) << "async event " << ibv_event_type_str(ev.event_type) << " on qp "
              << ev.element.qp->qp_num;
      return;
    case IBV_EVENT_SRQ_LIMIT_REACHED: {
      if (srq_ == nullptr) return;  // registration mode has no SRQ
      int n = srq_->OnLimit();
      counters_->srq_limit_events.fetch_add(1, std::memory_order_relaxed);
      LOG_EVERY_N(WARNING, 100) << "shared receive queue ran low; posted " << n
                                << " reserve buffers";
      return;
    }
    case IBV_EVENT_DEVICE_FATAL:
      LOG(ERROR) << "RDMA device fatal error: stopping";
      stop_->store(true);
      return;
    default:
      LOG(WARNING) << "async event " << ibv_event_type_str(ev.event_type);
      return;
  }
}

}  // namespace rkv
