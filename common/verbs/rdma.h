// SPDX-License-Identifier: Apache-2.0
// RAII owners for verbs and rdma_cm objects, and error helpers.
//
// Each owner holds exactly one object and its destructor calls the matching destroy call.
// Classes that hold several declare them so that destruction runs QP, CQ, MR, PD, context
// (i.e. declare in the order channel, id, pd, cq, mr, qp). QpOwner moves its QP to the error
// state and drains its CQ before destroying it.
// Thread safety: owners are not synchronized; each has one owning thread at a time.
#ifndef RKV_COMMON_VERBS_RDMA_H_
#define RKV_COMMON_VERBS_RDMA_H_

#include <infiniband/verbs.h>
#include <rdma/rdma_cma.h>

#include <functional>
#include <memory>
#include <string>

#include "rkv/status.h"

namespace rkv {

// "CALL failed: strerror(err)" as an IO_ERROR status.
Status ErrnoStatus(const std::string& call, int err);

struct EventChannelDeleter {
  void operator()(rdma_event_channel* c) const { rdma_destroy_event_channel(c); }
};
struct CmIdDeleter {
  void operator()(rdma_cm_id* id) const { rdma_destroy_id(id); }
};
struct PdDeleter {
  void operator()(ibv_pd* pd) const { ibv_dealloc_pd(pd); }
};
struct CqDeleter {
  void operator()(ibv_cq* cq) const { ibv_destroy_cq(cq); }
};
struct CompChannelDeleter {
  void operator()(ibv_comp_channel* c) const { ibv_destroy_comp_channel(c); }
};
struct MrDeleter {
  void operator()(ibv_mr* mr) const { ibv_dereg_mr(mr); }
};
struct SrqDeleter {
  void operator()(ibv_srq* srq) const { ibv_destroy_srq(srq); }
};
using EventChannelPtr = std::unique_ptr<rdma_event_channel, EventChannelDeleter>;
using CmIdPtr = std::unique_ptr<rdma_cm_id, CmIdDeleter>;
using PdPtr = std::unique_ptr<ibv_pd, PdDeleter>;
using CqPtr = std::unique_ptr<ibv_cq, CqDeleter>;
using CompChannelPtr = std::unique_ptr<ibv_comp_channel, CompChannelDeleter>;
using MrPtr = std::unique_ptr<ibv_mr, MrDeleter>;
using SrqPtr = std::unique_ptr<ibv_srq, SrqDeleter>;

// Owns one QP: either created by rdma_create_qp on `id` (rdma_cm mode) or by ibv_create_qp
// (manual mode). Destruction: QP -> ERR, drain `cq` (when the owner polls it alone), then
// rdma_destroy_qp or ibv_destroy_qp.
class QpOwner {
 public:
  QpOwner() = default;
  QpOwner(rdma_cm_id* id, ibv_cq* drain_cq) : id_(id), qp_(id->qp), cq_(drain_cq) {}
  QpOwner(ibv_qp* qp, ibv_cq* drain_cq) : qp_(qp), cq_(drain_cq) {}
  QpOwner(QpOwner&& o) noexcept : id_(o.id_), qp_(o.qp_), cq_(o.cq_) {
    o.id_ = nullptr;
    o.qp_ = nullptr;
  }
  QpOwner& operator=(QpOwner&& o) noexcept;
  ~QpOwner() { Reset(); }
  void Reset();
  ibv_qp* qp() const { return qp_; }

 private:
  rdma_cm_id* id_ = nullptr;
  ibv_qp* qp_ = nullptr;
  ibv_cq* cq_ = nullptr;
};

struct ContextDeleter {
  void operator()(ibv_context* c) const { ibv_close_device(c); }
};
using ContextPtr = std::unique_ptr<ibv_context, ContextDeleter>;

// The largest inline payload (IBV_SEND_INLINE) up to `want` bytes that an RC QP on `pd` with
// these queue depths can be created with (a device's inline room may depend on the send queue's
// size): tries want, then halves, using a throwaway CQ and QP. 0 if the device inlines nothing
// (or the probe itself fails).
uint32_t ProbeMaxInline(ibv_context* ctx, ibv_pd* pd, uint32_t want, uint32_t max_send_wr,
                        uint32_t max_recv_wr);

// Moves a QP to the error state so that its outstanding work requests complete (flushed).
void MoveQpToError(ibv_qp* qp);

// Waits for the next event on `channel` of type `expected`, up to timeout_ms. On success the
// event is returned in *event and must be acked by the caller. With `give_up` (non-null) the
// wait asks it every 50 ms and ends kConnectionLost when it says true.
Status WaitCmEvent(rdma_event_channel* channel, rdma_cm_event_type expected, int timeout_ms,
                   rdma_cm_event** event, const std::function<bool()>* give_up = nullptr);

// Resolves host:port to an address, then a route, on `id` (events on `channel`), applying the
// type of service `tos` (GRH traffic class) when non-zero. Errors name the step and the host.
// `give_up`: as WaitCmEvent's. `source` (non-empty): the local IPv4 address (or a name that
// resolves to one) to connect from, instead of the route's choice.
[[nodiscard]] Status ResolveRoute(rdma_event_channel* channel, rdma_cm_id* id,
                                  const std::string& host, uint16_t port, int timeout_ms,
                                  uint8_t tos, const std::function<bool()>* give_up = nullptr,
                                  const std::string& source = {});

const char* MtuName(ibv_mtu mtu);
uint32_t MtuBytes(ibv_mtu mtu);

}  // namespace rkv

#endif  // RKV_COMMON_VERBS_RDMA_H_
