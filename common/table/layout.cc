// SPDX-License-Identifier: Apache-2.0
#include "common/table/layout.h"

#include <xxhash.h>

#include <algorithm>

namespace rkv::layout {
namespace {
uint32_t FastRange(uint64_t h, uint32_t n) {
  return static_cast<uint32_t>((static_cast<unsigned __int128>(h) * n) >> 64);
}
template <typename T>
void Store(uint8_t* p, T v) {
  std::memcpy(p, &v, sizeof(T));
}
template <typename T>
T Load(const uint8_t* p) {
  T v;
  std::memcpy(&v, p, sizeof(T));
  return v;
}
uint64_t SlotChecksum(const uint8_t* slot, uint64_t seed) {
  return XXH3_64bits_withSeed(slot + 8, kSlotSize - 8, seed);
}
}  // namespace

KeyHash HashKey(std::string_view key, uint64_t seed, uint32_t num_buckets) {
  KeyHash k;
  k.hash = XXH3_64bits_withSeed(key.data(), key.size(), seed);
  // The two candidates are adjacent (the home bucket and the next), so one READ covers both.
  k.bucket[0] = FastRange(k.hash, num_buckets);
  k.bucket[1] = k.bucket[0] + 1;
  k.tag = KeyTag(k.hash);
  return k;
}

bool ComputeGeometry(uint64_t region_size, uint32_t buckets, double index_fraction, uint64_t seed,
                     Geometry* out) {
  constexpr uint64_t kAlign = 4096;
  if (buckets == 0) {
    // Index = buckets + overflow (1/8 of entry slots): about 1.125 KiB per bucket.
    double per_bucket = kBucketSize + (kSlotsPerBucket - 1) * kSlotSize / 8.0;
    uint64_t b = static_cast<uint64_t>(region_size * index_fraction / per_bucket);
    buckets = static_cast<uint32_t>(std::min<uint64_t>(b, 0x7fffffff));
  }
  if (buckets < 2 || buckets == 0xffffffffu) return false;
  Geometry g;
  g.region_size = region_size;
  g.num_buckets = buckets;
  g.overflow_offset = (g.index_bytes() + kAlign - 1) / kAlign * kAlign;
  g.overflow_slots =
      static_cast<uint32_t>(std::max<uint64_t>(1, uint64_t{buckets} * (kSlotsPerBucket - 1) / 8));
  g.heap_offset =
      (g.overflow_offset + uint64_t{g.overflow_slots} * kSlotSize + kAlign - 1) / kAlign * kAlign;
  g.seed = seed;
  if (g.heap_offset >= region_size || region_size > kMaxRegionSize) return false;
  *out = g;
  return true;
}

SlotState DecodeSlot(const uint8_t* slot, uint64_t seed, SlotView* out) {
  uint8_t kind = slot[16];
  if (kind == kEmpty) return SlotState::kEmpty;
  if (Load<uint64_t>(slot) != SlotChecksum(slot, seed)) return SlotState::kTorn;
  out->kind = kind;
  out->version = Load<uint64_t>(slot + 8);
  if (kind == kInline) {
    uint16_t ks = Load<uint16_t>(slot + 18);
    uint32_t vs = Load<uint32_t>(slot + 20);
    if (uint64_t{ks} + vs > kInlineCapacity) return SlotState::kTorn;
    const char* p = reinterpret_cast<const char*>(slot + kSlotHeaderSize);
    out->key = std::string_view(p, ks);
    out->value = std::string_view(p + ks, vs);
    return SlotState::kValid;
  }
  if (kind == kIndirect) {
    const uint8_t* p = slot + kSlotHeaderSize;
    out->key_hash = Load<uint64_t>(p);
    out->key_size = Load<uint32_t>(p + 8);
    out->value_size = Load<uint32_t>(p + 12);
    out->block_offset = Load<uint64_t>(p + 16);
    out->block_size = Load<uint32_t>(p + 24);
    if (out->block_size < BlockBytes(out->key_size, out->value_size)) return SlotState::kTorn;
    return SlotState::kValid;
  }
  return SlotState::kTorn;
}

void EncodeInlineSlot(uint8_t* slot, uint64_t seed, uint64_t version, std::string_view key,
                      std::string_view value) {
  std::memset(slot, 0, kSlotSize);
  Store<uint64_t>(slot + 8, version);
  slot[16] = kInline;
  slot[17] = KeyTag(XXH3_64bits_withSeed(key.data(), key.size(), seed));
  Store<uint16_t>(slot + 18, static_cast<uint16_t>(key.size()));
  Store<uint32_t>(slot + 20, static_cast<uint32_t>(value.size()));
  if (!key.empty()) std::memcpy(slot + kSlotHeaderSize, key.data(), key.size());
  if (!value.empty()) std::memcpy(slot + kSlotHeaderSize + key.size(), value.data(), value.size());
  Store<uint64_t>(slot, SlotChecksum(slot, seed));
}

void EncodeIndirectSlot(uint8_t* slot, uint64_t seed, uint64_t version, uint64_t key_hash,
                        uint32_t key_size, uint32_t value_size, uint64_t block_offset,
                        uint32_t block_size) {
  std::memset(slot, 0, kSlotSize);
  Store<uint64_t>(slot + 8, version);
  slot[16] = kIndirect;
  slot[17] = KeyTag(key_hash);
  Store<uint16_t>(slot + 18, static_cast<uint16_t>(key_size));
  uint8_t* p = slot + kSlotHeaderSize;
  Store<uint64_t>(p, key_hash);
  Store<uint32_t>(p + 8, key_size);
  Store<uint32_t>(p + 12, value_size);
  Store<uint64_t>(p + 16, block_offset);
  Store<uint32_t>(p + 24, block_size);
  Store<uint64_t>(slot, SlotChecksum(slot, seed));
}

namespace {
inline uint8_t MaskByte(uint64_t mask, size_t i) {
  return static_cast<uint8_t>(mask >> (8 * (i % 8)));
}
// XORs n bytes at p with the mask starting at mask byte `phase`.
void XorMask(uint8_t* p, size_t n, uint64_t mask, uint32_t phase) {
  if (mask == 0) return;
  size_t i = 0;
  for (; i < n && (phase + i) % 8 != 0; ++i) p[i] ^= MaskByte(mask, phase + i);
  for (; i + 8 <= n; i += 8) {  // whole words from mask byte 0
    uint64_t w;
    std::memcpy(&w, p + i, 8);
    w ^= mask;
    std::memcpy(p + i, &w, 8);
  }
  for (; i < n; ++i) p[i] ^= MaskByte(mask, phase + i);
}
}  // namespace

void FoundValue::AssignTo(std::string* out) const {
  out->assign(bytes);
  if (!out->empty()) XorMask(reinterpret_cast<uint8_t*>(&(*out)[0]), out->size(), mask, phase);
}

bool BlockView::KeyIs(std::string_view plain) const {
  if (plain.size() != key.size()) return false;
  for (size_t i = 0; i < key.size(); ++i)
    if (static_cast<uint8_t>(key[i]) != (static_cast<uint8_t>(plain[i]) ^ MaskByte(mask, i)))
      return false;
  return true;
}

void EncodeBlock(uint8_t* block, uint64_t seed, uint64_t version, std::string_view key,
                 std::string_view value, uint64_t mask) {
  Store<uint64_t>(block + 8, version);
  Store<uint32_t>(block + 16, static_cast<uint32_t>(key.size()));
  Store<uint32_t>(block + 20, static_cast<uint32_t>(value.size()));
  Store<uint64_t>(block + 24, mask);
  uint8_t* body = block + kBlockHeaderSize;
  std::memcpy(body, key.data(), key.size());
  if (!value.empty()) std::memcpy(body + key.size(), value.data(), value.size());
  XorMask(body, key.size() + value.size(), mask, 0);
  size_t n = BlockBytes(key.size(), value.size());
  Store<uint64_t>(block, XXH3_64bits_withSeed(block + 8, n - 8, seed));
}

namespace {
// Checks a block's checksum over the sizes it states (which must fit in `len`).
bool VerifyBlock(const uint8_t* block, size_t len, uint64_t seed, uint64_t* version,
                 BlockView* view) {
  if (len < kBlockHeaderSize) return false;
  uint64_t ks = Load<uint32_t>(block + 16), vs = Load<uint32_t>(block + 20);
  uint64_t n = kBlockHeaderSize + ks + vs;
  if (n > len) return false;
  if (Load<uint64_t>(block) != XXH3_64bits_withSeed(block + 8, n - 8, seed)) return false;
  *version = Load<uint64_t>(block + 8);
  view->mask = Load<uint64_t>(block + 24);
  const char* p = reinterpret_cast<const char*>(block + kBlockHeaderSize);
  view->key = std::string_view(p, ks);
  view->value = std::string_view(p + ks, vs);
  return true;
}
}  // namespace

bool DecodeBlock(const uint8_t* block, size_t len, uint64_t seed, uint64_t version,
                 uint32_t key_size, uint32_t value_size, BlockView* view) {
  uint64_t v;
  return VerifyBlock(block, std::min<size_t>(len, BlockBytes(key_size, value_size)), seed, &v,
                     view) &&
         v == version && view->key.size() == key_size && view->value.size() == value_size;
}

bool DecodeRefBlock(const uint8_t* block, size_t len, uint64_t seed, uint64_t version,
                    BlockView* view) {
  uint64_t v;
  return VerifyBlock(block, len, seed, &v, view) && v == version &&
         RoundBlock(BlockBytes(view->key.size(), view->value.size())) == len;
}

namespace {
constexpr uint64_t kOffsetMask = (uint64_t{1} << 40) - 1;
constexpr uint64_t kLengthMask = (uint64_t{1} << 14) - 1;
}  // namespace

uint64_t RefWord0(const Ref& r) {
  return (uint64_t{r.type} << 62) | (uint64_t{r.tag} << 54) |
         ((uint64_t{r.length} / kRefUnit & kLengthMask) << 40) |
         ((r.offset / kRefUnit) & kOffsetMask);
}

Ref DecodeRef(const uint8_t* p) {
  uint64_t w0 = __atomic_load_n(reinterpret_cast<const uint64_t*>(p), __ATOMIC_ACQUIRE);
  uint64_t w1 = __atomic_load_n(reinterpret_cast<const uint64_t*>(p + 8), __ATOMIC_ACQUIRE);
  Ref r;
  r.type = static_cast<uint8_t>(w0 >> 62);
  r.tag = static_cast<uint8_t>(w0 >> 54);
  r.length = static_cast<uint32_t>((w0 >> 40) & kLengthMask) * kRefUnit;
  r.offset = (w0 & kOffsetMask) * kRefUnit;
  r.version = w1;
  return r;
}

}  // namespace rkv::layout
