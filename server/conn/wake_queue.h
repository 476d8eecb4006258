// SPDX-License-Identifier: Apache-2.0
// WakeQueue<T>: a queue that any thread pushes to and one consumer thread drains, with an
// eventfd the consumer polls alongside its other file descriptors so a push wakes it at once.
// Bound: the queue holds what producers push between two drains; every producer in kvserver
// pushes at most a fixed number of items per connection (adopt, close, last-WQE, drained), so
// its length is bounded by a small multiple of --max_connections.
// Thread safety: Push from any thread; fd() and TakeAll() from the consumer only.
// Ownership: owns the eventfd (closed in the destructor).
#ifndef RKV_SERVER_WAKE_QUEUE_H_
#define RKV_SERVER_WAKE_QUEUE_H_

#include <sys/eventfd.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstdint>
#include <vector>

#include "common/mutex.h"
#include "common/verbs/rdma.h"

namespace rkv {

template <typename T>
class WakeQueue {
 public:
  WakeQueue() : fd_(eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC)), err_(fd_ < 0 ? errno : 0) {}
  ~WakeQueue() {
    if (fd_ >= 0) close(fd_);
  }
  WakeQueue(const WakeQueue&) = delete;
  WakeQueue& operator=(const WakeQueue&) = delete;

  // OK, or the eventfd() failure.
  [[nodiscard]] Status status() const {
    return fd_ >= 0 ? Status::Ok() : ErrnoStatus("eventfd", err_);
  }
  int fd() const { return fd_; }

  void Push(T item) {
    {
      MutexLock l(&mu_);
      items_.push_back(std::move(item));
    }
    pending_.store(true, std::memory_order_release);
    uint64_t one = 1;
    ssize_t n = write(fd_, &one, sizeof one);  // only fails if the counter would overflow
    (void)n;
  }

  // True if something may have been pushed since the last TakeAll: a load, no system call (a
  // spinning consumer checks this instead of polling the eventfd).
  bool MaybeNonEmpty() const { return pending_.load(std::memory_order_acquire); }

  std::vector<T> TakeAll() {
    // Cleared before the take (an RMW with acquire: the take cannot move above it), so a Push
    // whose item this take misses sets it again.
    pending_.exchange(false, std::memory_order_acq_rel);
    uint64_t v;
    ssize_t n = read(fd_, &v, sizeof v);  // EAGAIN when nothing was pushed: fine
    (void)n;
    std::vector<T> out;
    MutexLock l(&mu_);
    out.swap(items_);
    return out;
  }

 private:
  const int fd_;
  const int err_;
  Mutex mu_;
  std::vector<T> items_ GUARDED_BY(mu_);
  std::atomic<bool> pending_{false};
};

}  // namespace rkv

#endif  // RKV_SERVER_WAKE_QUEUE_H_
