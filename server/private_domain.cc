#include "server/private_domain.h"

#include <glog/logging.h>

#include <cerrno>
#include <string>

namespace rkv {

Status PrivateDomain::Create(ibv_context* ctx, uint8_t* send_slots, size_t send_bytes,
                             int receive_buffers, std::unique_ptr<PrivateDomain>* out) {
  if (receive_buffers < 1 || send_slots == nullptr || send_bytes == 0)
    return Status(Code::kInvalidArgument, "private domain: no receive buffers or reply slots");
  std::unique_ptr<PrivateDomain> d(new PrivateDomain(receive_buffers));
  d->pd_.reset(ibv_alloc_pd(ctx));
  if (!d->pd_) return ErrnoStatus("ibv_alloc_pd(connection's own)", errno);
  d->recv_.assign(size_t(receive_buffers) * kBufSize, 0);
  d->recv_mr_.reset(
      ibv_reg_mr(d->pd_.get(), d->recv_.data(), d->recv_.size(), IBV_ACCESS_LOCAL_WRITE));
  if (!d->recv_mr_) return ErrnoStatus("ibv_reg_mr(connection's receive buffers)", errno);
  d->send_mr_.reset(ibv_reg_mr(d->pd_.get(), send_slots, send_bytes, 0));
  if (!d->send_mr_) return ErrnoStatus("ibv_reg_mr(connection's reply slots)", errno);
  *out = std::move(d);
  return Status::Ok();
}

PrivateDomain::~PrivateDomain() {
  // Registrations first (the members' order does it), then the PD: explicit here so that a
  // failure is reported (the QP must be gone; the Conn destroys it first).
  recv_mr_.reset();
  send_mr_.reset();
  if (ibv_pd* pd = pd_.release(); pd != nullptr) {
    if (int rc = ibv_dealloc_pd(pd); rc != 0)
      LOG(ERROR) << "ibv_dealloc_pd(connection's own) failed: " << std::strerror(rc);
  }
}

Status PrivateDomain::Post(ibv_qp* qp, uint32_t index) {
  ibv_sge sge{reinterpret_cast<uint64_t>(recv_.data() + size_t(index) * kBufSize),
              uint32_t(kBufSize), recv_mr_->lkey};
  ibv_recv_wr wr{}, *bad = nullptr;
  wr.wr_id = (uint64_t{index} << 1) | 1;
  wr.sg_list = &sge;
  wr.num_sge = 1;
  if (int rc = ibv_post_recv(qp, &wr, &bad); rc != 0) return ErrnoStatus("ibv_post_recv", rc);
  ++posted_;
  return Status::Ok();
}

Status PrivateDomain::PostAll(ibv_qp* qp) {
  for (int i = 0; i < count_; ++i) {
    Status s = Post(qp, uint32_t(i));
    if (!s.ok()) return s;
  }
  return Status::Ok();
}

Status PrivateDomain::Repost(ibv_qp* qp, uint32_t index) {
  if (index >= uint32_t(count_))
    return Status(Code::kProtocolError, "receive completion for buffer " + std::to_string(index) +
                                            " of " + std::to_string(count_));
  return Post(qp, index);
}

}  // namespace rkv
