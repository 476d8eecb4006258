// SPDX-License-Identifier: Apache-2.0
// Fences between this CPU and a DMA device (the RDMA NIC) over memory both use, where the
// CPU's own fences are not enough (docs/replication-rings.md, rule 10); on AArch64 as
// rdma-core's util/udma_barrier.h defines them:
//  - DmaStoreFence: this thread's earlier stores reach memory, as the device's reads see it,
//    before its later stores (a backup zeroing consumed ring bytes before it stores the
//    control block that tells the writer's RDMA READ the room is free);
//  - DmaLoadFence: loads after it see what the device wrote before the data loads before it
//    showed (a record's bytes after its length).
// x86: stores and loads of write-back memory are ordered for DMA already; the C++ fence (a
// compiler barrier there) suffices (rdma-core uses lfence for loads, which only matters for
// weakly ordered memory types the rings do not use). AArch64: the outer-shareable domain (dmb oshst
// / dmb oshld): the inner-shareable barriers std::atomic_thread_fence emits do not order against a
// device. Thread safety: stateless.
#ifndef RKV_COMMON_VERBS_DMA_FENCE_H_
#define RKV_COMMON_VERBS_DMA_FENCE_H_

#include <atomic>

namespace rkv {

inline void DmaStoreFence() {
#if defined(__aarch64__)
  asm volatile("dmb oshst" ::: "memory");
#else
  std::atomic_thread_fence(std::memory_order_release);
#endif
}

inline void DmaLoadFence() {
#if defined(__aarch64__)
  asm volatile("dmb oshld" ::: "memory");
#else
  std::atomic_thread_fence(std::memory_order_acquire);
#endif
}

}  // namespace rkv

#endif  // RKV_COMMON_VERBS_DMA_FENCE_H_
