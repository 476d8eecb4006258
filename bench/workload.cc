// SPDX-License-Identifier: Apache-2.0
#include "bench/workload.h"

#include <xxhash.h>

#include <algorithm>
#include <cmath>
#include <cstring>

namespace rkv::bench {

uint64_t Fnv64(uint64_t v) {
  uint64_t h = 0xCBF29CE484222325ull;
  for (int i = 0; i < 8; ++i) {
    h ^= v & 0xff;
    h *= 1099511628211ull;
    v >>= 8;
  }
  return h;
}

std::string KeyOf(uint64_t n) { return "user" + std::to_string(Fnv64(n)); }

Zipfian::Zipfian(uint64_t n, double theta) : n_(n), theta_(theta) {
  for (uint64_t i = 1; i <= n; ++i) zetan_ += 1.0 / std::pow(double(i), theta);
  alpha_ = 1.0 / (1.0 - theta);
  double zeta2 = 1.0 + std::pow(0.5, theta);
  eta_ = (1 - std::pow(2.0 / double(n), 1 - theta)) / (1 - zeta2 / zetan_);
}

uint64_t Zipfian::Next(double u) const {
  double uz = u * zetan_;
  if (uz < 1.0) return 0;
  if (uz < 1.0 + std::pow(0.5, theta_)) return 1;
  return std::min<uint64_t>(n_ - 1, uint64_t(double(n_) * std::pow(eta_ * u - eta_ + 1, alpha_)));
}

std::string KeyName(uint64_t n, SizeRange size) {
  if (size.max == 0) return KeyOf(n);
  uint64_t h = Fnv64(n);
  uint32_t len = size.min + (size.fixed() ? 0 : uint32_t(Fnv64(h) % (size.max - size.min + 1)));
  std::string k;
  if (len >= 17) {
    static const char kHex[] = "0123456789abcdef";
    k = "u";
    for (int i = 15; i >= 0; --i) k += kHex[(h >> (4 * i)) & 15];
    k.resize(len, 'x');
    return k;
  }
  static const char kDigits[] = "0123456789abcdefghijklmnopqrstuvwxyz";
  k.assign(len, '0');
  k[0] = 'k';
  for (uint32_t i = len - 1; i >= 1 && n > 0; --i, n /= 36) k[i] = kDigits[n % 36];
  return k;
}

KeyChooser::KeyChooser(const Config& c)
    : dist_(c.distribution),
      zipf_(c.records, c.zipf_theta),
      hot_data_(c.hotspot_data_fraction),
      hot_opn_(c.hotspot_opn_fraction) {}

uint64_t KeyChooser::Next(std::mt19937_64& rng, uint64_t inserted) const {
  uint64_t n = std::max<uint64_t>(inserted, 1);
  std::uniform_real_distribution<double> uni(0, 1);
  switch (dist_) {
    case Distribution::kUniform:
      return rng() % n;
    case Distribution::kZipfian:
      return Fnv64(zipf_.Next(uni(rng))) % n;
    case Distribution::kLatest:
      return n - 1 - zipf_.Next(uni(rng)) % n;
    case Distribution::kHotspot: {
      uint64_t hot = std::max<uint64_t>(1, uint64_t(double(n) * hot_data_));
      if (uni(rng) < hot_opn_ || hot >= n) return rng() % hot;
      return hot + rng() % (n - hot);
    }
  }
  return 0;
}

namespace {
constexpr char kMarker[4] = {'k', 'v', 'B', '1'};

uint64_t ValueHash(std::string_view key, std::string_view value) {
  return XXH3_64bits_withSeed(value.data() + 8, value.size() - 8,
                              XXH3_64bits(key.data(), key.size()));
}
// The first n (< 16) bytes of the key's short-value pattern.
void ShortPattern(std::string_view key, size_t n, char* out) {
  const XXH128_hash_t h = XXH3_128bits_withSeed(key.data(), key.size(), 0x6b764231u + n);
  unsigned char b[16];
  for (int i = 0; i < 8; ++i) {
    b[i] = static_cast<unsigned char>(h.low64 >> (8 * i));
    b[8 + i] = static_cast<unsigned char>(h.high64 >> (8 * i));
  }
  std::memcpy(out, b, n);
}
}  // namespace

void FillValue(std::string_view key, uint64_t version, std::string* value) {
  const size_t n = value->size();
  if (n == 0) return;
  if (n < kFullValueHeader) {
    ShortPattern(key, n, value->data());
    return;
  }
  std::memcpy(value->data() + 8, kMarker, 4);
  for (int i = 0; i < 4; ++i) (*value)[12 + i] = static_cast<char>(version >> (8 * i));
  for (size_t i = 16; i < n; ++i) (*value)[i] = char('a' + (version + i) % 26);
  uint64_t h = ValueHash(key, *value);
  std::memcpy(value->data(), &h, 8);
}

ValueCheck CheckValue(std::string_view key, std::string_view value) {
  const size_t n = value.size();
  if (n == 0) return ValueCheck::kOk;
  if (n < kFullValueHeader) {
    char want[kFullValueHeader];
    ShortPattern(key, n, want);
    return std::memcmp(want, value.data(), n) == 0 ? ValueCheck::kOk : ValueCheck::kMismatch;
  }
  if (std::memcmp(value.data() + 8, kMarker, 4) != 0) return ValueCheck::kForeign;
  uint64_t h;
  std::memcpy(&h, value.data(), 8);
  return h == ValueHash(key, value) ? ValueCheck::kOk : ValueCheck::kWrong;
}

const char* ValueCheckText(ValueCheck c) {
  switch (c) {
    case ValueCheck::kOk:
      return "ok";
    case ValueCheck::kWrong:
      return "wrong or torn value (kvbench's marker, but not this key's checksum)";
    case ValueCheck::kForeign:
      return "value not written by kvbench (no kvbench marker)";
    case ValueCheck::kMismatch:
      return "short value that is not this key's kvbench value (written by something else, or "
             "another key's)";
  }
  return "?";
}

}  // namespace rkv::bench
