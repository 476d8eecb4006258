// SPDX-License-Identifier: Apache-2.0
// CollidingKeys: keys whose XXH3-64 hashes are equal under a given seed, for tests of the paths
// that only collisions reach. XXH3 hashes a 17..32-byte input as avalanche(len * P1 +
// mix16B(bytes 0..15) + mix16B(bytes len-16..len-1)), and mix16B multiplies (lo ^ (secret0 +
// seed)) by (hi ^ (secret1 - seed)): a key whose first 8 bytes equal secret0 + seed makes the
// first product 0 whatever bytes 8..15 are. The hash seed is public (every client gets it), so
// an attacker can do the same; this is why rkv's lookups must be correct under collisions, not
// just improbable ones. Callers check that the hashes really are equal.
#ifndef RKV_TESTS_COLLIDING_KEYS_H_
#define RKV_TESTS_COLLIDING_KEYS_H_

#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

namespace rkv::testing {

// n distinct 32-byte keys with one XXH3-64 hash under `seed`; `tail` (up to 16 bytes) tells
// families apart.
inline std::vector<std::string> CollidingKeys(uint64_t seed, int n, const std::string& tail = "") {
  // The first 8 bytes of XXH3's default secret (XXH3_kSecret), little-endian.
  constexpr uint64_t kSecret0 = 0xbe4ba423396cfeb8ull;
  const uint64_t lo = kSecret0 + seed;
  std::vector<std::string> keys;
  for (int i = 0; i < n; ++i) {
    std::string k(32, '\0');
    std::memcpy(&k[0], &lo, 8);
    uint64_t hi = 0x636f6c6c69646531ull + uint64_t(i);  // any bytes 8..15
    std::memcpy(&k[8], &hi, 8);
    std::string t = (tail + std::string(16, '-')).substr(0, 16);
    std::memcpy(&k[16], t.data(), 16);
    keys.push_back(k);
  }
  return keys;
}

}  // namespace rkv::testing

#endif  // RKV_TESTS_COLLIDING_KEYS_H_
