// The hash table's memory layout, shared by the server (writer) and clients (one-sided readers).
// See docs/design.md for the argument why a reader never returns a torn or wrong entry.
//
// Region: [buckets: num_buckets x 1024 B][overflow slots: overflow_slots x 128 B][value heap]
// Bucket: slot 0 is the header (16 overflow refs of 8 bytes), slots 1..7 hold entries.
// A key has two candidate buckets; a GET reads both with two READs posted together.
// Slot (128 B, little-endian):
//   0 u64 checksum   XXH3-64(bytes 8..127, seed)
//   8 u64 version    server-wide write sequence, never 0 in a used slot
//  16 u8  kind       0 empty, 1 inline (key and value in the slot), 2 indirect (value in heap)
//  17 u8  reserved
//  18 u16 key_size   (inline only)
//  20 u32 value_size (inline only)
//  24 .. 127         inline: key bytes then value bytes (up to 104 bytes together)
//                    indirect: u64 key_hash, u32 key_size, u32 value_size, u64 block_offset,
//                              u32 block_size, u32 reserved
// Heap block: u64 checksum XXH3-64(bytes 8..end), u64 version (= the slot's), u32 key_size,
//   u32 value_size, key, value.
// Overflow ref (bucket header word): high 32 bits key fingerprint, low 32 bits overflow index+1
//   (0 = unused word).
// Thread safety: all functions are pure; they read the bytes given.
#ifndef RKV_COMMON_LAYOUT_H_
#define RKV_COMMON_LAYOUT_H_

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <string_view>

namespace rkv::layout {

inline constexpr uint32_t kSlotSize = 128;
inline constexpr uint32_t kSlotsPerBucket = 8;  // slot 0 is the header
inline constexpr uint32_t kBucketSize = kSlotSize * kSlotsPerBucket;
inline constexpr uint32_t kRefsPerBucket = kSlotSize / 8;
inline constexpr uint32_t kSlotHeaderSize = 24;
inline constexpr uint32_t kInlineCapacity = kSlotSize - kSlotHeaderSize;  // 104
inline constexpr uint32_t kBlockHeaderSize = 24;

enum SlotKind : uint8_t { kEmpty = 0, kInline = 1, kIndirect = 2 };

struct KeyHash {
  uint64_t hash;
  uint32_t bucket[2];
  uint32_t fingerprint;
};
KeyHash HashKey(std::string_view key, uint64_t seed, uint32_t num_buckets);

struct Geometry {
  uint64_t region_size = 0;
  uint32_t num_buckets = 0;
  uint64_t overflow_offset = 0;
  uint32_t overflow_slots = 0;
  uint64_t heap_offset = 0;
  uint64_t seed = 0;
  uint64_t bucket_offset(uint32_t b) const { return uint64_t{b} * kBucketSize; }
  uint64_t overflow_slot_offset(uint32_t i) const {
    return overflow_offset + uint64_t{i} * kSlotSize;
  }
  uint64_t entry_capacity() const {
    return uint64_t{num_buckets} * (kSlotsPerBucket - 1) + overflow_slots;
  }
};
// Lays out a region of `region_size` bytes. buckets == 0 picks the bucket count so that the
// index takes about `index_fraction` of the region. Returns false if the region is too small.
bool ComputeGeometry(uint64_t region_size, uint32_t buckets, double index_fraction, uint64_t seed,
                     Geometry* out);

// Decoded view of a slot. Pointers refer into the slot bytes.
struct SlotView {
  uint8_t kind = kEmpty;
  uint64_t version = 0;
  std::string_view key;    // inline only
  std::string_view value;  // inline only
  uint64_t key_hash = 0;   // indirect only
  uint32_t key_size = 0;
  uint32_t value_size = 0;
  uint64_t block_offset = 0;
  uint32_t block_size = 0;
};
enum class SlotState { kEmpty, kValid, kTorn };
// Verifies the checksum and decodes; kTorn when the bytes are inconsistent.
SlotState DecodeSlot(const uint8_t* slot, uint64_t seed, SlotView* out);

// Builds slot images (kSlotSize bytes). EncodeInline requires key+value <= kInlineCapacity.
void EncodeInlineSlot(uint8_t* slot, uint64_t seed, uint64_t version, std::string_view key,
                      std::string_view value);
void EncodeIndirectSlot(uint8_t* slot, uint64_t seed, uint64_t version, uint64_t key_hash,
                        uint32_t key_size, uint32_t value_size, uint64_t block_offset,
                        uint32_t block_size);
inline bool FitsInline(size_t key_size, size_t value_size) {
  return key_size + value_size <= kInlineCapacity;
}

inline uint32_t BlockBytes(size_t key_size, size_t value_size) {
  return static_cast<uint32_t>(kBlockHeaderSize + key_size + value_size);
}
void EncodeBlock(uint8_t* block, uint64_t seed, uint64_t version, std::string_view key,
                 std::string_view value);
// Verifies a block read for `slot` (checksum, version, sizes); on success sets key and value.
bool DecodeBlock(const uint8_t* block, size_t len, uint64_t seed, const SlotView& slot,
                 std::string_view* key, std::string_view* value);

inline uint64_t LoadU64(const uint8_t* p) {
  uint64_t v;
  std::memcpy(&v, p, 8);
  return v;
}
inline uint64_t MakeRef(uint32_t fingerprint, uint32_t overflow_index) {
  return (uint64_t{fingerprint} << 32) | (uint64_t{overflow_index} + 1);
}
inline uint32_t RefFingerprint(uint64_t ref) { return static_cast<uint32_t>(ref >> 32); }
inline uint32_t RefIndex(uint64_t ref) { return static_cast<uint32_t>(ref) - 1; }

}  // namespace rkv::layout

#endif  // RKV_COMMON_LAYOUT_H_
