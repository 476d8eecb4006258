// SPDX-License-Identifier: Apache-2.0
// Log ring records: a primary's replicated write as it is placed, by one RDMA WRITE, in a ring a
// backup registered for it (docs/replication-rings.md). The backup's drainer reads the ring
// while the NIC may still be writing it, so a record proves itself complete: its magic, its
// index (its number in the ring: a former lap's bytes never pass), its length and its checksum
// must all agree.
// Ring layout: `kRingControlBytes` of control block (RingControl: what the drainer consumed,
// read by the writer with an RDMA READ), then the data area. A record starts 8-byte aligned;
// one that does not fit before the ring's end goes at the data area's start, after a wrap
// record where the tail has room for one (kRingHeaderBytes), else after an implicit wrap.
// Writer and reader make the same decision from the same offset (RingLayout), and both count
// the bytes skipped at a wrap as used, so `written - consumed` is the bytes in use.
// Record encoding (little-endian, fixed width; x86 and ARM):
//   magic u32 "RKRR" | length u32 (the record's bytes, a multiple of 8) | index u64 |
//   checksum u64 (XXH3-64 of the record's `length` bytes with this field read as zero) |
//   order u64 (the writer's posting order, across all its rings to this backup: a record posted
//   after another's WRITE completed has a greater order; the drainer applies a writer's ring
//   heads smallest order first) |
//   wire::ReplicateHeader (32 bytes; kind 0: a wrap record, no key, no value) |
//   key_size u32 | value_size u32 | key | value | zero padding to a multiple of 8
// Thread safety: pure functions and a value type.
#ifndef RKV_COMMON_CLUSTER_RING_RECORD_H_
#define RKV_COMMON_CLUSTER_RING_RECORD_H_

#include <cstddef>
#include <cstdint>
#include <string_view>

#include "common/wire.h"
#include "rkv/status.h"

namespace rkv::cluster {

inline constexpr uint32_t kRingRecordMagic = 0x52524b52;  // "RKRR" little-endian
inline constexpr size_t kRingHeaderBytes = 72;            // a record without key and value
inline constexpr size_t kRingControlBytes = 64;
inline constexpr uint8_t kRingWrapKind = 0;

// The control block at the ring's start, written by the backup only (8-byte aligned u64
// stores: an RDMA READ sees each field whole).
struct RingControl {
  uint64_t consumed;        // bytes consumed since the ring was granted (wraps' skips included)
  uint64_t consumed_index;  // the index of the last record consumed (0: none)
  // The newest map epoch the backup applied completely (every word): its writer writes a
  // record of epoch e to the ring only when e <= this (docs/replication-rings.md, rule 1).
  uint64_t applied_epoch;
  uint64_t reserved[5];
};
static_assert(sizeof(RingControl) == kRingControlBytes);

// The bytes a record of these sizes takes (a multiple of 8).
inline constexpr size_t RingRecordBytes(size_t key_size, size_t value_size) {
  return (kRingHeaderBytes + key_size + value_size + 7) & ~size_t(7);
}

// Writes the record of write `h` (kind PUT or DELETE) with its key and value, as record number
// `index`, at out[0 .. RingRecordBytes(key.size(), value.size())).
void EncodeRingRecord(uint64_t index, uint64_t order, const wire::ReplicateHeader& h,
                      std::string_view key, std::string_view value, uint8_t* out);
// Writes a wrap record numbered `index` at out[0 .. kRingHeaderBytes).
void EncodeRingWrap(uint64_t index, uint8_t* out);

struct RingRecordView {
  uint64_t index = 0;
  uint64_t order = 0;
  size_t length = 0;  // the bytes it takes in the ring
  bool wrap = false;
  wire::ReplicateHeader header{};
  std::string_view key, value;  // into the bytes decoded
};

// Decodes the record numbered `index` at in[0..]; `in` runs to the ring's end (a private copy:
// the caller must not decode bytes the NIC may still write). kNotFound: nothing there yet
// (zero bytes); kProtocolError: not complete (still being written, or garbage: the magic,
// length or checksum fails); kBadRequest: complete (its checksum holds) but malformed (another
// index, sizes that do not add up, a wrap record with a key, non-zero padding): a writer that
// is out of step or broken.
[[nodiscard]] Status DecodeRingRecord(std::string_view in, uint64_t index, RingRecordView* out);
// The length field of the bytes at `in` (0 when fewer than 8 bytes): how much to copy before
// decoding. Not checked: DecodeRingRecord checks it.
size_t PeekRingLength(std::string_view in);

// Where records go in a ring of `size` bytes (a multiple of 8, > kRingControlBytes).
class RingLayout {
 public:
  explicit RingLayout(size_t size) : size_(size) {}
  size_t size() const { return size_; }
  size_t capacity() const { return size_ - kRingControlBytes; }
  // The largest record a ring takes: an eighth of its data area (bigger writes go two-sided).
  size_t max_record() const { return (capacity() / 8) & ~size_t(7); }
  // A record of `bytes` when the next offset is `at`: true if it must go at the data area's
  // start instead; then *wrap_record says whether a wrap record is placed at `at` first, and
  // *skipped is the bytes from `at` to the ring's end (counted as used).
  bool MustWrap(size_t at, size_t bytes, bool* wrap_record, size_t* skipped) const;
  // The reader's view: at offset `at`, is there no room for even a header (an implicit wrap)?
  bool ImplicitWrap(size_t at) const { return size_ - at < kRingHeaderBytes; }

 private:
  size_t size_;
};

}  // namespace rkv::cluster

#endif  // RKV_COMMON_CLUSTER_RING_RECORD_H_
