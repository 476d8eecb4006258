// SPDX-License-Identifier: Apache-2.0
// SrqPool: the shared receive queue every client QP receives into, its registered buffers
// (each holds a maximum-size request), and a reserve that keeps it from running dry.
//
// `depth` buffers are posted at start; `reserve` more are kept back. The SRQ limit is armed at
// depth/8: when the posted count falls below it (requests arrive faster than workers hand
// buffers back), the device raises IBV_EVENT_SRQ_LIMIT_REACHED and the async-event thread calls
// OnLimit(), which posts the reserve at once. Workers hand every consumed buffer back with
// Return(): it is reposted while fewer than `depth` are posted, otherwise it goes back to the
// reserve (and the limit is armed again). So the SRQ holds between depth/8 and depth+reserve
// buffers; per-client request credits (docs/design.md) keep one client from taking them all.
// Receive work request ids are (index << 1) | 1; send ids are even (server/conn/worker.h).
// Thread safety: all methods may be called from any thread (posting is thread-safe in verbs;
// the reserve list is guarded by mu_).
// Ownership: owns the buffers, their MR and the SRQ; destroyed after every QP attached to it.
#ifndef RKV_SERVER_SRQ_POOL_H_
#define RKV_SERVER_SRQ_POOL_H_

#include <atomic>
#include <cstdint>
#include <memory>
#include <vector>

#include "common/mutex.h"
#include "common/verbs/rdma.h"
#include "common/wire.h"
#include "rkv/status.h"

namespace rkv {

class SrqPool {
 public:
  [[nodiscard]] static Status Create(ibv_pd* pd, int depth, int reserve,
                                     std::unique_ptr<SrqPool>* out);
  ~SrqPool();

  ibv_srq* srq() const { return srq_.get(); }
  static bool IsRecv(uint64_t wr_id) { return (wr_id & 1) != 0; }
  static uint32_t Index(uint64_t wr_id) { return uint32_t(wr_id >> 1); }
  const uint8_t* Buffer(uint32_t index) const { return buf_.data() + size_t(index) * kBufSize; }
  uint32_t buffers() const { return uint32_t(depth_ + reserve_count_); }

  // A receive completion (of any status) consumed buffer `index`.
  void Consumed() { posted_.fetch_sub(1, std::memory_order_relaxed); }
  // The buffer's bytes are no longer needed: repost it or keep it in reserve.
  void Return(uint32_t index);
  // Return() of n buffers at once: those the SRQ takes are posted with one ibv_post_srq_recv.
  void ReturnMany(const uint32_t* index, int n);
  // IBV_EVENT_SRQ_LIMIT_REACHED: post the reserve. Returns how many buffers were posted.
  int OnLimit();
  int posted() const { return posted_.load(std::memory_order_relaxed); }

  static constexpr size_t kBufSize = (wire::kMaxRequestSize + 4095) / 4096 * 4096;

 private:
  SrqPool(int depth, int reserve) : depth_(depth), reserve_count_(reserve) {}
  Status Post(uint32_t index) { return PostMany(&index, 1); }
  // Posts n buffers as one chain of work requests; on failure none after the failed one is posted
  // and *posted (if given) says how many were.
  Status PostMany(const uint32_t* index, int n, int* posted = nullptr);
  void Arm() REQUIRES(mu_);

  const int depth_;
  const int reserve_count_;
  std::vector<uint8_t> buf_;
  MrPtr mr_;
  SrqPtr srq_;  // declared after mr_: destroyed first
  std::atomic<int> posted_{0};
  Mutex mu_;
  std::vector<uint32_t> reserve_ GUARDED_BY(mu_);
  bool armed_ GUARDED_BY(mu_) = false;
};

}  // namespace rkv

#endif  // RKV_SERVER_SRQ_POOL_H_
