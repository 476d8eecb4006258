// SPDX-License-Identifier: Apache-2.0
// Little-endian fixed-width fields and the "XXH3-64 with its own field read as zero" checksum
// that every cluster etcd format uses (slot map, member record, request/result, migration
// record, drain record, migration progress; docs/cluster.md), and the checks a fixed-size
// record's header gets.
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

// The checks every fixed-size record starts with: exactly `size` bytes, magic u32 at 0, version
// u16 at 4, the checksum at `sum_at` (ChecksumWithFieldZeroed). Empty if they hold, else what
// failed (for the caller's error message).
inline std::string FixedRecordProblem(std::string_view in, size_t size, uint32_t magic,
                                      uint16_t version, size_t sum_at) {
  if (in.size() != size) return std::to_string(in.size()) + " bytes, not " + std::to_string(size);
  if (GetLE(in, 0, 4) != magic) return "bad magic";
  if (GetLE(in, 4, 2) != version) return "unknown version";
  if (ChecksumWithFieldZeroed(in, sum_at) != GetLE(in, sum_at, 8)) return "checksum mismatch";
  return std::string();
}

}  // namespace rkv::cluster

#endif  // RKV_COMMON_CLUSTER_LE_BYTES_H_
