// SPDX-License-Identifier: Apache-2.0
// SizeFor: the length of value `seq` of key `id`, one of `sizes`, a function of both, so that
// stress readers check a value's length too (their value generators are prefix-consistent: a
// value cut short equals the start of the whole one). Shared by tests/table_stress_test.cc and
// tests/clearing_test.cc. Thread safety: pure.
#ifndef RKV_TESTS_SIZED_GEN_H_
#define RKV_TESTS_SIZED_GEN_H_

#include <cstddef>
#include <cstdint>

namespace rkv::testing {

template <typename T, size_t N>
T SizeFor(int id, uint64_t seq, const T (&sizes)[N]) {
  uint64_t h = (uint64_t(id) + 1) * 0xD6E8FEB86659FD93ull ^ seq * 0x9E3779B97F4A7C15ull;
  h ^= h >> 29;
  h *= 0xBF58476D1CE4E5B9ull;
  h ^= h >> 32;
  return sizes[h % N];
}

}  // namespace rkv::testing

#endif  // RKV_TESTS_SIZED_GEN_H_
