// SPDX-License-Identifier: Apache-2.0
#include "server/conn/srq_pool.h"

#include <glog/logging.h>

#include <algorithm>

namespace rkv {

Status SrqPool::Create(ibv_pd* pd, int depth, int reserve, std::unique_ptr<SrqPool>* out) {
  std::unique_ptr<SrqPool> p(new SrqPool(depth, reserve));
  p->buf_.assign(size_t(depth + reserve) * kBufSize, 0);
  p->mr_.reset(ibv_reg_mr(pd, p->buf_.data(), p->buf_.size(), IBV_ACCESS_LOCAL_WRITE));
  if (!p->mr_) return ErrnoStatus("ibv_reg_mr(receive buffers)", errno);
  ibv_srq_init_attr sa{};
  sa.attr.max_wr = uint32_t(depth + reserve);
  sa.attr.max_sge = 1;
  p->srq_.reset(ibv_create_srq(pd, &sa));
  if (!p->srq_)
    return ErrnoStatus("ibv_create_srq(" + std::to_string(depth + reserve) + ")", errno);
  for (int i = 0; i < depth; ++i) {
    Status s = p->Post(uint32_t(i));
    if (!s.ok()) return s;
  }
  {
    MutexLock l(&p->mu_);
    for (int i = depth + reserve - 1; i >= depth; --i) p->reserve_.push_back(uint32_t(i));
    p->Arm();
  }
  *out = std::move(p);
  return Status::Ok();
}

SrqPool::~SrqPool() = default;

Status SrqPool::PostMany(const uint32_t* index, int n, int* posted) {
  constexpr int kChain = 32;
  int done = 0;
  while (done < n) {
    const int k = std::min(kChain, n - done);
    ibv_sge sge[kChain];
    ibv_recv_wr wr[kChain];
    for (int i = 0; i < k; ++i) {
      const uint32_t b = index[done + i];
      sge[i] = {reinterpret_cast<uint64_t>(buf_.data() + size_t(b) * kBufSize), uint32_t(kBufSize),
                mr_->lkey};
      wr[i] = ibv_recv_wr{};
      wr[i].wr_id = (uint64_t{b} << 1) | 1;
      wr[i].sg_list = &sge[i];
      wr[i].num_sge = 1;
      wr[i].next = i + 1 < k ? &wr[i + 1] : nullptr;
    }
    ibv_recv_wr* bad = nullptr;
    posted_.fetch_add(k, std::memory_order_relaxed);
    int rc = ibv_post_srq_recv(srq_.get(), wr, &bad);
    if (rc != 0) {
      const int ok = bad != nullptr ? int(bad - wr) : 0;  // those before `bad` were posted
      posted_.fetch_sub(k - ok, std::memory_order_relaxed);
      if (posted != nullptr) *posted = done + ok;
      return ErrnoStatus("ibv_post_srq_recv", rc);
    }
    done += k;
  }
  if (posted != nullptr) *posted = done;
  return Status::Ok();
}

void SrqPool::Arm() {
  if (armed_ || reserve_.empty()) return;
  ibv_srq_attr a{};
  a.srq_limit = uint32_t(std::max(1, depth_ / 8));
  if (int rc = ibv_modify_srq(srq_.get(), &a, IBV_SRQ_LIMIT); rc != 0) {
    LOG_FIRST_N(WARNING, 1) << "ibv_modify_srq(IBV_SRQ_LIMIT) failed: " << std::strerror(rc)
                            << " (the SRQ reserve is posted only as buffers come back)";
    return;
  }
  armed_ = true;
}

void SrqPool::Return(uint32_t index) {
  if (posted_.load(std::memory_order_relaxed) < depth_) {
    Status s = Post(index);
    if (s.ok()) return;
    LOG_EVERY_N(ERROR, 100) << s.ToString();
  }
  MutexLock l(&mu_);
  reserve_.push_back(index);
  Arm();
}

void SrqPool::ReturnMany(const uint32_t* index, int n) {
  // Up to `depth` posted; the rest (and any that fail to post) go to the reserve.
  const int room = std::max(0, depth_ - posted_.load(std::memory_order_relaxed));
  const int k = std::min(room, n);
  int posted = 0;
  if (k > 0) {
    Status s = PostMany(index, k, &posted);
    if (!s.ok()) {
      LOG_EVERY_N(ERROR, 100) << s.ToString();
    }
  }
  if (posted == n) return;
  MutexLock l(&mu_);
  reserve_.insert(reserve_.end(), index + posted, index + n);
  Arm();
}

int SrqPool::OnLimit() {
  std::vector<uint32_t> take;
  {
    MutexLock l(&mu_);
    armed_ = false;
    take.swap(reserve_);
  }
  int n = 0;
  for (uint32_t index : take) {
    Status s = Post(index);
    if (!s.ok()) {
      LOG_EVERY_N(ERROR, 100) << s.ToString();
      MutexLock l(&mu_);
      reserve_.push_back(index);
      continue;
    }
    ++n;
  }
  return n;
}

}  // namespace rkv
