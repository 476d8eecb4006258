// Heap: allocator for out-of-place value blocks inside the registered region.
//
// Power-of-two size classes from 256 B to 128 KiB, a free list per class, and a bump pointer.
// Freed blocks may be reused at once: readers detect reuse through the block's version and
// checksum (docs/design.md). Thread safety: all methods are safe to call concurrently (one
// internal mutex). Offsets are relative to the region base.
#ifndef RKV_SERVER_HEAP_H_
#define RKV_SERVER_HEAP_H_

#include <cstdint>
#include <vector>

#include "common/mutex.h"

namespace rkv {

class Heap {
 public:
  static constexpr uint32_t kMinClassShift = 8;   // 256 B
  static constexpr uint32_t kMaxClassShift = 17;  // 128 KiB
  Heap(uint64_t begin, uint64_t end);

  // Returns false when no block of at least `bytes` is left. *size is the block's real size.
  [[nodiscard]] bool Allocate(uint32_t bytes, uint64_t* offset, uint32_t* size);
  void Free(uint64_t offset, uint32_t size);
  // The real size of the block Allocate returns for `bytes` (0 if too large).
  static uint32_t BlockSizeFor(uint32_t bytes) {
    int c = ClassOf(bytes);
    return c < 0 ? 0 : 1u << (c + kMinClassShift);
  }
  uint64_t bytes_in_use() const;
  uint64_t capacity() const { return end_ - begin_; }

 private:
  static int ClassOf(uint32_t bytes);
  const uint64_t begin_, end_;
  mutable Mutex mu_;
  uint64_t next_ GUARDED_BY(mu_);
  uint64_t in_use_ GUARDED_BY(mu_) = 0;
  std::vector<uint64_t> free_[kMaxClassShift - kMinClassShift + 1] GUARDED_BY(mu_);
};

}  // namespace rkv

#endif  // RKV_SERVER_HEAP_H_
