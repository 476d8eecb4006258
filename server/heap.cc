#include "server/heap.h"

namespace rkv {

Heap::Heap(uint64_t begin, uint64_t end) : begin_(begin), end_(end), next_(begin) {}

int Heap::ClassOf(uint32_t bytes) {
  for (uint32_t s = kMinClassShift; s <= kMaxClassShift; ++s)
    if (bytes <= (1u << s)) return static_cast<int>(s - kMinClassShift);
  return -1;
}

bool Heap::Allocate(uint32_t bytes, uint64_t* offset, uint32_t* size) {
  int c = ClassOf(bytes);
  if (c < 0) return false;
  uint32_t sz = 1u << (c + kMinClassShift);
  MutexLock l(&mu_);
  if (!free_[c].empty()) {
    *offset = free_[c].back();
    free_[c].pop_back();
  } else {
    uint64_t start = (next_ + 255) & ~uint64_t{255};
    if (start + sz > end_) return false;
    *offset = start;
    next_ = start + sz;
  }
  *size = sz;
  in_use_ += sz;
  return true;
}

void Heap::Free(uint64_t offset, uint32_t size) {
  int c = ClassOf(size);
  if (c < 0) return;
  MutexLock l(&mu_);
  free_[c].push_back(offset);
  in_use_ -= size;
}

uint64_t Heap::bytes_in_use() const {
  MutexLock l(&mu_);
  return in_use_;
}

}  // namespace rkv
