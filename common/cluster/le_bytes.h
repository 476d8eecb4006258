// SPDX-License-Identifier: Apache-2.0
// Little-endian fixed-width fields and the "XXH3-64 with its own field read as zero" checksum
// that every cluster etcd format uses (slot map, member record, request/result, migration
// record; docs/cluster.md).
// Thread safety: pure functions. Callers check lengths before reading (`at + bytes` in range).
#ifndef RKV_COMMON_CLUSTER_LE_BYTES_H_
#define RKV_COMMON_CLUSTER_LE_BYTES_H_

#include <xxhash.h>

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

namespace rkv::cluster {

// Writes the low `bytes` bytes of v at out[at..] (out must be long enough).
inline void PutLE(std::string* out, size_t at, uint64_t v, int bytes) {
  for (int i = 0; i < bytes; ++i) (*out)[at + size_t(i)] = char((v >> (8 * i)) & 0xff);
}
// Appends the low `bytes` bytes of v.
inline void AppendLE(std::string* out, uint64_t v, int bytes) {
  for (int i = 0; i < bytes; ++i) out->push_back(char((v >> (8 * i)) & 0xff));
}
inline uint64_t GetLE(std::string_view in, size_t at, int bytes) {
  uint64_t v = 0;
  for (int i = bytes - 1; i >= 0; --i) v = (v << 8) | uint8_t(in[at + size_t(i)]);
  return v;
}
// XXH3-64 of `in` with its 8-byte checksum field at `at` read as zero.
inline uint64_t ChecksumWithFieldZeroed(std::string_view in, size_t at) {
  std::string copy(in);
  copy.replace(at, 8, 8, '\0');
  return XXH3_64bits(copy.data(), copy.size());
}

}  // namespace rkv::cluster

#endif  // RKV_COMMON_CLUSTER_LE_BYTES_H_
