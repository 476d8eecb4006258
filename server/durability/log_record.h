// SPDX-License-Identifier: Apache-2.0
// LogRecord: the record format of write-ahead logs and snapshots (docs/wire-format.md,
// "Write-ahead log" and "Snapshot").
//
// A log file is a 32-byte file header followed by records. Every integer is little-endian.
//   file header: "RKVWAL01" (8 bytes), u32 format version (1), u32 reserved (0), u64 generation,
//                u64 XXH3-64 of the first 24 bytes (seed kLogSeed)
//   record:      u32 body length, u64 XXH3-64 of the body (seed kLogSeed), then the body:
//                u8 type (1 PUT, 2 DELETE), 3 bytes reserved (0), u64 sequence (the data
//                directory's write counter), u32 key size, u32 value size, key, value (none for
//                DELETE)
// A snapshot file has the same shape: a 32-byte header ("RKVSNP01", version 1, reserved 0, u64
// covered sequence, XXH3-64 of the first 24 bytes with seed kSnapshotSeed), PUT records in the
// same encoding, and one END record (type 3, key empty, sequence = the covered sequence, value =
// u64 entry count and u64 total key+value bytes). END is legal only in snapshots: a log reader
// treats it as corruption.
// The length prefix lets a reader step over a record without parsing it; the checksum covers
// every byte after it, so a record half written by a crash is recognised (log_reader.h).
// Thread safety: pure functions.
// Invariants: EncodeRecord's output passes CheckRecord (for valid sizes); all formats are fixed
// width (sizes static_assert'ed in log_record.cc).
#ifndef RKV_SERVER_DURABILITY_LOG_RECORD_H_
#define RKV_SERVER_DURABILITY_LOG_RECORD_H_

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

namespace rkv::wal {

inline constexpr char kLogMagic[8] = {'R', 'K', 'V', 'W', 'A', 'L', '0', '1'};
inline constexpr uint32_t kLogFormatVersion = 1;
inline constexpr uint64_t kLogSeed = 0x726b762d77616c31ull;  // "rkv-wal1"
inline constexpr size_t kFileHeaderSize = 32;
inline constexpr size_t kRecordHeaderSize = 12;  // length + checksum
inline constexpr size_t kBodyFixedSize = 20;     // type, reserved, sequence, sizes
inline constexpr uint32_t kMaxKeySize = 1024;
inline constexpr uint32_t kMaxValueSize = 65536;
inline constexpr uint32_t kMaxBodySize = kBodyFixedSize + kMaxKeySize + kMaxValueSize;
inline constexpr size_t kMaxRecordSize = kRecordHeaderSize + kMaxBodySize;

inline constexpr char kSnapshotMagic[8] = {'R', 'K', 'V', 'S', 'N', 'P', '0', '1'};
inline constexpr uint32_t kSnapshotFormatVersion = 1;
inline constexpr uint64_t kSnapshotSeed = 0x726b762d736e7031ull;  // "rkv-snp1"
inline constexpr size_t kSnapshotEndValueSize = 16;               // u64 entries, u64 bytes

enum class RecordType : uint8_t {
  kPut = 1,
  kDelete = 2,
  kSnapshotEnd = 3,  // a snapshot's last record; corruption anywhere else
};

struct LogRecord {
  RecordType type = RecordType::kPut;
  uint64_t sequence = 0;
  std::string_view key;
  std::string_view value;  // empty for kDelete
};

// Appends the file header for `log_id` to *out.
void EncodeFileHeader(uint64_t log_id, std::string* out);
// Checks a file header; on success sets *log_id. `error` says what is wrong otherwise.
[[nodiscard]] bool DecodeFileHeader(std::string_view bytes, uint64_t* log_id, std::string* error);
// Snapshot header (32 bytes): the same layout with kSnapshotMagic and kSnapshotSeed.
void EncodeSnapshotHeader(uint64_t covered_sequence, std::string* out);
[[nodiscard]] bool DecodeSnapshotHeader(std::string_view bytes, uint64_t* covered_sequence,
                                        std::string* error);

// Appends one record to *out. Requires key <= kMaxKeySize, value <= kMaxValueSize.
void EncodeRecord(const LogRecord& record, std::string* out);
// Appends a snapshot's END record.
void EncodeSnapshotEnd(uint64_t covered_sequence, uint64_t entries, uint64_t bytes,
                       std::string* out);
// Reads an END record's value (kSnapshotEndValueSize bytes, which CheckRecord guarantees).
void DecodeSnapshotEndValue(std::string_view value, uint64_t* entries, uint64_t* bytes);

// The body length field of the record whose first kRecordHeaderSize bytes are at `p`.
uint32_t RecordBodySize(const char* p);

enum class RecordCheck { kOk, kBadChecksum, kBadFields };
// Checks one whole record (`bytes` = record header and body, bytes.size() == kRecordHeaderSize +
// RecordBodySize(bytes.data()), body size within [kBodyFixedSize, kMaxBodySize]: the caller has
// checked that). kOk: the checksum holds and the fields are possible for its type (PUT and DELETE:
// key 1..kMaxKeySize, value <= kMaxValueSize, none for DELETE; END: no key, a
// kSnapshotEndValueSize value; reserved bytes 0); *record then points into `bytes`. The caller
// decides which types are legal where.
[[nodiscard]] RecordCheck CheckRecord(std::string_view bytes, LogRecord* record);
// Bytes EncodeRecord appends for a record with these sizes.
inline size_t EncodedSize(size_t key_size, size_t value_size) {
  return kRecordHeaderSize + kBodyFixedSize + key_size + value_size;
}

}  // namespace rkv::wal

#endif  // RKV_SERVER_DURABILITY_LOG_RECORD_H_
