// SPDX-License-Identifier: Apache-2.0
// Mutex and MutexLock with clang thread-safety annotations (checked with -Wthread-safety when
// building with clang; the attributes compile away under GCC).
// Thread safety: Mutex is a std::mutex; MutexLock holds it for its scope.
#ifndef RKV_COMMON_MUTEX_H_
#define RKV_COMMON_MUTEX_H_

#include <mutex>

#if defined(__clang__)
#define RKV_TSA(x) __attribute__((x))
#else
#define RKV_TSA(x)
#endif
#define CAPABILITY(x) RKV_TSA(capability(x))
#define SCOPED_CAPABILITY RKV_TSA(scoped_lockable)
#define GUARDED_BY(x) RKV_TSA(guarded_by(x))
#define ACQUIRE(...) RKV_TSA(acquire_capability(__VA_ARGS__))
#define RELEASE(...) RKV_TSA(release_capability(__VA_ARGS__))
#define EXCLUDES(...) RKV_TSA(locks_excluded(__VA_ARGS__))
#define REQUIRES(...) RKV_TSA(requires_capability(__VA_ARGS__))

namespace rkv {

class CAPABILITY("mutex") Mutex {
 public:
  void Lock() ACQUIRE() { mu_.lock(); }
  void Unlock() RELEASE() { mu_.unlock(); }

 private:
  std::mutex mu_;
};

class SCOPED_CAPABILITY MutexLock {
 public:
  explicit MutexLock(Mutex* mu) ACQUIRE(mu) : mu_(mu) { mu_->Lock(); }
  ~MutexLock() RELEASE() { mu_->Unlock(); }
  MutexLock(const MutexLock&) = delete;
  MutexLock& operator=(const MutexLock&) = delete;

 private:
  Mutex* const mu_;
};

}  // namespace rkv

#endif  // RKV_COMMON_MUTEX_H_
