// SPDX-License-Identifier: Apache-2.0
// SecureRandom: unpredictable numbers from the kernel's CSPRNG (getrandom(2), flags 0), for
// everything a peer must not guess: PSNs, nonces, ids, temporary file names. Never a seeded
// userspace generator: an output of one of those (e.g. a PSN shown in a CHECK reply) lets an
// observer compute the rest, while getrandom outputs are independent of each other.
//
// Failure (ENOSYS under an old kernel or a seccomp filter, EFAULT) is a Status naming the call
// and the errno text, never a crash. EINTR and short reads are retried until the buffer is
// full. getrandom blocks only until the kernel's pool is first initialised (early boot).
// Thread safety: all functions are stateless and safe from any thread. No ownership.
#ifndef RKV_COMMON_SECURE_RANDOM_H_
#define RKV_COMMON_SECURE_RANDOM_H_

#include <sys/types.h>

#include <cstddef>
#include <cstdint>
#include <string>

#include "rkv/status.h"

namespace rkv {

class SecureRandom {
 public:
  // PSNs are 24-bit (InfiniBand BTH); 0 is avoided so that an unset field is never mistaken
  // for a chosen one.
  static constexpr uint32_t kPsnMask = 0xffffff;

  // Fills buf[0..len) with random bytes.
  [[nodiscard]] static Status Fill(void* buf, size_t len);
  [[nodiscard]] static Status U64(uint64_t* out);
  // Uniform over 1..0xffffff (rejection of 0, so no value is favoured).
  [[nodiscard]] static Status Psn(uint32_t* out);
  // 2*bytes lowercase hex digits (ids and unguessable file name parts).
  [[nodiscard]] static Status Hex(size_t bytes, std::string* out);

  // Test seam: Fill with another getrandom-like function (same contract as getrandom(2):
  // returns bytes written or -1 with errno set).
  using Source = ssize_t (*)(void* buf, size_t len, unsigned flags);
  [[nodiscard]] static Status FillFrom(Source source, void* buf, size_t len);
};

}  // namespace rkv

#endif  // RKV_COMMON_SECURE_RANDOM_H_
