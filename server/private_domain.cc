// SPDX-License-Identifier: Apache-2.0
#include "server/private_domain.h"

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

Status PrivateDomain::PostMany(ibv_qp* qp, const uint32_t* index, int n) {
  constexpr int kChain = 32;
  if (n <= 0) return Status::Ok();
  if (n > kChain) return Status(Code::kInvalidArgument, "more than 32 receive buffers at once");
  ibv_sge sge[kChain];
  ibv_recv_wr wr[kChain];
  for (int i = 0; i < n; ++i) {
    size_t size = 0;
    const uint8_t* buf = Buffer(index[i], &size);
    if (buf == nullptr)
      return Status(Code::kProtocolError, "no receive buffer " + std::to_string(index[i]) + " of " +
                                              std::to_string(count_) + " to post");
    sge[i] = {reinterpret_cast<uint64_t>(buf), uint32_t(size),
              index[i] == uint32_t(count_) ? setup_mr_->lkey : recv_mr_->lkey};
    wr[i] = ibv_recv_wr{};
    wr[i].wr_id = (uint64_t{index[i]} << 1) | 1;
    wr[i].sg_list = &sge[i];
    wr[i].num_sge = 1;
    wr[i].next = i + 1 < n ? &wr[i + 1] : nullptr;
  }
  ibv_recv_wr* bad = nullptr;
  if (int rc = ibv_post_recv(qp, wr, &bad); rc != 0) {
    posted_ += bad != nullptr ? int(bad - wr) : 0;  // those before `bad` were posted
    return ErrnoStatus("ibv_post_recv", rc);
  }
  posted_ += n;
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

Status PrivateDomain::RepostMany(ibv_qp* qp, const uint32_t* index, int n) {
  // The setup buffer is done with once the connection is open: left out.
  if (n > 32) return Status(Code::kInvalidArgument, "more than 32 receive buffers at once");
  uint32_t keep[32];
  int k = 0;
  for (int i = 0; i < n && k < 32; ++i)
    if (!(index[i] == uint32_t(count_) && opened_)) keep[k++] = index[i];
  return PostMany(qp, keep, k);
}

}  // namespace rkv
