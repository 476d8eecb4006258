// SPDX-License-Identifier: Apache-2.0
// The hash table's memory layout, shared by the server (writer) and clients (one-sided readers).
// See docs/design.md for the argument why a reader never returns a torn or wrong entry, and
// docs/wire-format.md ("Table") for the byte-level format.
//
// Region: [buckets: (num_buckets + 1) x 1024 B][overflow slots: overflow_slots x 128 B][value heap]
// A key's candidates are its home bucket h (< num_buckets) and h + 1: a GET reads both, 2 KiB,
// with ONE READ.
// Key hash: XXH3-64 of the key with the table's seed. The home bucket comes from the high bits
// (FastRange), the 8-bit key tag from the low byte (KeyTag), the insert tie-break from bit 8:
// independent bits, so keys of one bucket pair spread over all 256 tags.
// Bucket: slot 0 is the header (8 overflow refs of 16 bytes), slots 1..7 hold entries.
// Slot (128 B, little-endian):
//   0 u64 checksum   XXH3-64(bytes 8..127, seed)
//   8 u64 version    server-wide write sequence, never 0 in a used slot, never reused
//  16 u8  kind       0 empty, 1 inline (key and value in the slot), 2 indirect (value in heap)
//  17 u8  key tag    low byte of the key's hash (KeyTag)         } same bytes for both kinds:
//  18 u16 key_size                                               } a reader skips a slot whose
//                                                                  tag or size differ, unverified
//  20 u32 value_size (inline only)
//  24 .. 127         inline: key bytes then value bytes (up to 104 bytes together)
//                    indirect: u64 key_hash, u32 key_size, u32 value_size, u64 block_offset,
//                              u32 block_size, u32 reserved
// Heap block (8-byte aligned): u64 checksum XXH3-64(bytes 8..end), u64 version (= the entry's),
//   u32 key_size, u32 value_size, u64 mask, then key and value XORed with the mask (byte j of
//   the key+value area with mask byte j % 8). The mask is random per block (server-chosen, after
//   the client sent its bytes), so no client can make the bytes of its own key or value form a
//   valid block image that a reader following a stale pointer into that space would accept.
//   The server may move a live block (heap compaction); the copy keeps its bytes, so a block is
//   identified by its version wherever it is.
// Overflow ref (16 B in a bucket header), two little-endian u64 words, each written atomically:
//   word0: [63..62] type (0 unused, 1 overflow slot, 2 heap block), [61..54] key tag,
//          [53..40] length of the target in 8-byte units, [39..0] region offset of the target / 8
//   word1: the entry's full 64-bit version
//   An inline entry that found both buckets full lives in an overflow slot; a larger entry needs
//   no slot: its ref points straight at its heap block, so either is one READ away.
// Thread safety: all functions are pure; they read the bytes given.
#ifndef RKV_COMMON_TABLE_LAYOUT_H_
#define RKV_COMMON_TABLE_LAYOUT_H_

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <string>
#include <string_view>

namespace rkv::layout {

// The layout above, as a number: bumped with any change a one-sided reader would misread (and
// with it common/wire.h's kProtocolVersion, which a client and server check at OPEN). Printed
// by --version.
inline constexpr uint32_t kTableFormatVersion = 1;
inline constexpr uint32_t kSlotSize = 128;
inline constexpr uint32_t kSlotsPerBucket = 8;  // slot 0 is the header
inline constexpr uint32_t kBucketSize = kSlotSize * kSlotsPerBucket;
inline constexpr uint32_t kRefSize = 16;
inline constexpr uint32_t kRefsPerBucket = kSlotSize / kRefSize;        // 8
inline constexpr uint32_t kRefUnit = 8;                                 // ref lengths and offsets
inline constexpr uint32_t kMaxRefLength = ((1u << 14) - 1) * kRefUnit;  // 131064
inline constexpr uint64_t kMaxRegionSize = uint64_t{1} << 43;           // 2^40 units of 8 B
inline constexpr uint32_t kSlotHeaderSize = 24;
inline constexpr uint32_t kInlineCapacity = kSlotSize - kSlotHeaderSize;  // 104
inline constexpr uint32_t kBlockHeaderSize = 32;

enum SlotKind : uint8_t { kEmpty = 0, kInline = 1, kIndirect = 2 };

struct KeyHash {
  uint64_t hash;
  uint32_t bucket[2];
  uint8_t tag;  // KeyTag(hash): the slot filter and the refs' tag
};
KeyHash HashKey(std::string_view key, uint64_t seed, uint32_t num_buckets);

struct Geometry {
  uint64_t region_size = 0;
  uint32_t num_buckets = 0;
  uint64_t overflow_offset = 0;
  uint32_t overflow_slots = 0;
  uint64_t heap_offset = 0;
  uint64_t seed = 0;
  // Home buckets are 0..num_buckets-1; bucket num_buckets exists as the second candidate of
  // the last home bucket, so the index holds num_buckets + 1 buckets.
  uint64_t index_bytes() const { return (uint64_t{num_buckets} + 1) * kBucketSize; }
  uint64_t bucket_offset(uint32_t b) const { return uint64_t{b} * kBucketSize; }
  uint64_t overflow_slot_offset(uint32_t i) const {
    return overflow_offset + uint64_t{i} * kSlotSize;
  }
  uint64_t entry_capacity() const {
    return (uint64_t{num_buckets} + 1) * (kSlotsPerBucket - 1) + overflow_slots;
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
// The 8-bit tag stored at byte 17 of a slot and in a ref. The low byte of the hash: the bucket
// comes from the high bits, so the tags of the keys of one bucket pair are uniform over 256
// values. An update of a key in place rewrites its slot with the same tag and key size, so a
// reader that sees other bytes there is looking at a slot that does not hold the key (or is
// being inserted or deleted): it may skip the slot without computing its checksum. Only slots
// that pass this filter are verified.
inline uint8_t KeyTag(uint64_t key_hash) { return static_cast<uint8_t>(key_hash); }
// The bit of the hash that breaks an insert's tie between the two candidate buckets.
inline bool TieBit(uint64_t key_hash) { return (key_hash >> 8) & 1; }
inline bool FitsInline(size_t key_size, size_t value_size) {
  return key_size + value_size <= kInlineCapacity;
}

inline uint32_t BlockBytes(size_t key_size, size_t value_size) {
  return static_cast<uint32_t>(kBlockHeaderSize + key_size + value_size);
}
// A block's length rounded to the heap's (and the refs') 8-byte unit.
inline uint32_t RoundBlock(uint32_t bytes) { return (bytes + kRefUnit - 1) / kRefUnit * kRefUnit; }
// A value as found: bytes in the table's format. Inline values are plain (mask 0); a block's
// are XORed with its mask starting at mask byte `phase`.
struct FoundValue {
  std::string_view bytes;
  uint64_t mask = 0;
  uint32_t phase = 0;
  size_t size() const { return bytes.size(); }
  // Assigns the plain value (reuses out's capacity).
  void AssignTo(std::string* out) const;
};
// A verified block: its key and value as stored (masked).
struct BlockView {
  std::string_view key, value;  // masked bytes
  uint64_t mask = 0;
  bool KeyIs(std::string_view plain) const;
  FoundValue Value() const { return {value, mask, static_cast<uint32_t>(key.size() % 8)}; }
};
// Writes a block; `mask` must be unpredictable to clients (server/store/table.cc draws it from
// getrandom).
void EncodeBlock(uint8_t* block, uint64_t seed, uint64_t version, std::string_view key,
                 std::string_view value, uint64_t mask);
// Verifies a block an indirect slot points at: checksum, exactly the slot's version and sizes
// (at least BlockBytes(key_size, value_size) bytes at `block`). On success sets key and value.
bool DecodeBlock(const uint8_t* block, size_t len, uint64_t seed, uint64_t version,
                 uint32_t key_size, uint32_t value_size, BlockView* view);

inline uint64_t LoadU64(const uint8_t* p) {
  uint64_t v;
  std::memcpy(&v, p, 8);
  return v;
}

// Decoded overflow ref.
struct Ref {
  enum Type : uint8_t { kUnused = 0, kSlot = 1, kBlock = 2 };
  uint8_t type = kUnused;
  uint8_t tag = 0;       // KeyTag of the entry's key
  uint32_t length = 0;   // bytes to READ at `offset`: kSlotSize, or RoundBlock(block bytes)
  uint64_t offset = 0;   // region offset, a multiple of 8
  uint64_t version = 0;  // the entry's version
};
// word0 and word1 of a ref. Requires offset % 8 == 0, offset < kMaxRegionSize, length % 8 == 0
// and length <= kMaxRefLength.
uint64_t RefWord0(const Ref& r);
inline uint64_t RefWord1(const Ref& r) { return r.version; }
// Decodes the 16 bytes at `p` (each word loaded once; the pair may be torn, which readers
// detect through the version check).
Ref DecodeRef(const uint8_t* p);
// Verifies a heap block a ref points at: `len` bytes (the ref's length), checksum, sizes whose
// rounded length is exactly `len`, and its full version. On success sets key and value.
bool DecodeRefBlock(const uint8_t* block, size_t len, uint64_t seed, uint64_t version,
                    BlockView* view);

}  // namespace rkv::layout

#endif  // RKV_COMMON_TABLE_LAYOUT_H_
