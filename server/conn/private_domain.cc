// SPDX-License-Identifier: Apache-2.0
#include "server/conn/private_domain.h"

#include <glog/logging.h>
#include <sys/mman.h>

#include <cerrno>
#include <cstring>
#include <string>

namespace rkv {

PrivateDomain::Pages::~Pages() {
  if (data != nullptr) munmap(data, size);
}

Status PrivateDomain::Pages::Map(size_t bytes, const char* what) {
  void* p = mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (p == MAP_FAILED)
    return ErrnoStatus("mmap(" + std::to_string(bytes) + " bytes for " + what + ")", errno);
  data = static_cast<uint8_t*>(p);
  size = bytes;
  return Status::Ok();
}

Status PrivateDomain::Create(ibv_context* ctx, uint8_t* send_slots, size_t send_bytes,
                             int receive_buffers, std::unique_ptr<PrivateDomain>* out) {
  if (receive_buffers < 1 || send_slots == nullptr || send_bytes == 0)
    return Status(Code::kInvalidArgument, "private domain: no receive buffers or reply slots");
  std::unique_ptr<PrivateDomain> d(new PrivateDomain(receive_buffers));
  d->pd_.reset(ibv_alloc_pd(ctx));
  if (!d->pd_) return ErrnoStatus("ibv_alloc_pd(connection's own)", errno);
  Status s = d->setup_.Map(kSetupBufSize, "the setup receive buffer");
  if (!s.ok()) return s;
  d->setup_mr_.reset(
      ibv_reg_mr(d->pd_.get(), d->setup_.data, d->setup_.size, IBV_ACCESS_LOCAL_WRITE));
  if (!d->setup_mr_) return ErrnoStatus("ibv_reg_mr(connection's setup receive buffer)", errno);
  d->send_mr_.reset(ibv_reg_mr(d->pd_.get(), send_slots, send_bytes, 0));
  if (!d->send_mr_) return ErrnoStatus("ibv_reg_mr(connection's reply slots)", errno);
  *out = std::move(d);
  return Status::Ok();
}

PrivateDomain::~PrivateDomain() {
  // Registrations first, then the PD: explicit so that a failure is reported (the QP must be
  // gone; the Conn destroys it first).
  setup_mr_.reset();
  recv_mr_.reset();
  send_mr_.reset();
  if (ibv_pd* pd = pd_.release(); pd != nullptr) {
    if (int rc = ibv_dealloc_pd(pd); rc != 0)
      LOG(ERROR) << "ibv_dealloc_pd(connection's own) failed: " << std::strerror(rc);
  }
}

const uint8_t* PrivateDomain::Buffer(uint32_t index, size_t* size) const {
  if (index == uint32_t(count_)) {
    *size = setup_.size;
    return setup_.data;
  }
  if (index < uint32_t(count_) && recv_mr_ != nullptr) {
    *size = kBufSize;
    return recv_.data + size_t(index) * kBufSize;
  }
  *size = 0;
  return nullptr;
}

Status PrivateDomain::Post(ibv_qp* qp, uint32_t index) {
  size_t size = 0;
  const uint8_t* buf = Buffer(index, &size);
  if (buf == nullptr)
    return Status(Code::kProtocolError, "no receive buffer " + std::to_string(index) + " of " +
                                            std::to_string(count_) + " to post");
  ibv_sge sge{reinterpret_cast<uint64_t>(buf), uint32_t(size),
              index == uint32_t(count_) ? setup_mr_->lkey : recv_mr_->lkey};
  ibv_recv_wr wr{}, *bad = nullptr;
  wr.wr_id = (uint64_t{index} << 1) | 1;
  wr.sg_list = &sge;
  wr.num_sge = 1;
  if (int rc = ibv_post_recv(qp, &wr, &bad); rc != 0) return ErrnoStatus("ibv_post_recv", rc);
  ++posted_;
  return Status::Ok();
}

Status PrivateDomain::PostSetup(ibv_qp* qp) { return Post(qp, uint32_t(count_)); }

Status PrivateDomain::Open(ibv_qp* qp) {
  if (opened_) return Status::Ok();
  if (recv_.data == nullptr) {
    Status s = recv_.Map(size_t(count_) * kBufSize, "the connection's receive buffers");
    if (!s.ok()) return s;
  }
  recv_mr_.reset(ibv_reg_mr(pd_.get(), recv_.data, recv_.size, IBV_ACCESS_LOCAL_WRITE));
  if (!recv_mr_) return ErrnoStatus("ibv_reg_mr(connection's receive buffers)", errno);
  opened_ = true;
  for (int i = 0; i < count_; ++i) {
    Status s = Post(qp, uint32_t(i));
    if (!s.ok()) return s;  // the connection is closed; what was posted is flushed
  }
  return Status::Ok();
}

Status PrivateDomain::Repost(ibv_qp* qp, uint32_t index) {
  if (index == uint32_t(count_) && opened_) return Status::Ok();  // setup buffer: done
  return Post(qp, index);
}

}  // namespace rkv
