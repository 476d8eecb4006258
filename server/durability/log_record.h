// LogRecord: the write-ahead log's record format (docs/wire-format.md, "Write-ahead log").
//
// A log file is a 32-byte file header followed by records. Every integer is little-endian.
//   file header: "RKVWAL01" (8 bytes), u32 format version (1), u32 reserved (0), u64 log id,
//                u64 XXH3-64 of the first 24 bytes (seed kLogSeed)
//   record:      u32 body length, u64 XXH3-64 of the body (seed kLogSeed), then the body:
//                u8 type (1 PUT, 2 DELETE), 3 bytes reserved (0), u64 sequence (the write's
//                table version), u32 key size, u32 value size, key, value (none for DELETE)
// The length prefix lets a reader step over a record without parsing it; the checksum covers
// every byte after it, so a record half written by a crash is recognised (log_reader.h).
// Thread safety: pure functions.
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

enum class RecordType : uint8_t { kPut = 1, kDelete = 2 };

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
// Appends one record to *out. Requires key <= kMaxKeySize, value <= kMaxValueSize.
void EncodeRecord(const LogRecord& record, std::string* out);
// Bytes EncodeRecord appends for a record with these sizes.
inline size_t EncodedSize(size_t key_size, size_t value_size) {
  return kRecordHeaderSize + kBodyFixedSize + key_size + value_size;
}

}  // namespace rkv::wal

#endif  // RKV_SERVER_DURABILITY_LOG_RECORD_H_
