#include "server/durability/log_reader.h"

#include <xxhash.h>

#include <algorithm>
#include <cstring>

namespace rkv::wal {
namespace {
template <typename T>
T Get(const char* p) {
  T v;
  std::memcpy(&v, p, sizeof(T));
  return v;
}
}  // namespace

LogReader::Result LogReader::Bad(const std::string& why, uint64_t record_end) {
  const std::string_view rest = bytes_.substr(pos_);
  const bool all_zero = std::all_of(rest.begin(), rest.end(), [](char c) { return c == 0; });
  // A crash during an append leaves a prefix of what was being written: the torn record is the
  // last data in the file and shorter than a maximal record. More data after it is not a tear.
  const bool short_tail = remaining() < kRecordHeaderSize + kMaxBodySize;
  if ((record_end >= bytes_.size() && short_tail) || all_zero) {
    error_ = "torn record at offset " + std::to_string(offset()) + " (" + why + "); " +
             std::to_string(remaining()) + " bytes dropped";
    return Result::kTornTail;
  }
  error_ = "corrupt record at offset " + std::to_string(offset()) + ": " + why;
  return Result::kCorrupt;
}

LogReader::Result LogReader::Next(LogRecord* record) {
  if (pos_ == bytes_.size()) return Result::kEnd;
  const size_t left = bytes_.size() - pos_;
  if (left < kRecordHeaderSize) return Bad("partial record header", bytes_.size());
  const char* p = bytes_.data() + pos_;
  const uint32_t body = Get<uint32_t>(p);
  const uint64_t end = uint64_t(pos_) + kRecordHeaderSize + body;
  if (body < kBodyFixedSize || body > kMaxBodySize)
    return Bad("record length " + std::to_string(body) + " out of range", end);
  if (end > bytes_.size()) return Bad("record runs past the end of the file", end);
  const char* b = p + kRecordHeaderSize;
  if (Get<uint64_t>(p + 4) != XXH3_64bits_withSeed(b, body, kLogSeed))
    return Bad("checksum mismatch", end);
  const uint8_t type = static_cast<uint8_t>(b[0]);
  const uint32_t ks = Get<uint32_t>(b + 12), vs = Get<uint32_t>(b + 16);
  if ((type != uint8_t(RecordType::kPut) && type != uint8_t(RecordType::kDelete)) || ks == 0 ||
      ks > kMaxKeySize || vs > kMaxValueSize || kBodyFixedSize + uint64_t(ks) + vs != body ||
      (type == uint8_t(RecordType::kDelete) && vs != 0) || b[1] || b[2] || b[3]) {
    // A checksummed record with impossible fields was written that way: never a torn tail.
    error_ = "corrupt record at offset " + std::to_string(offset()) + ": invalid fields";
    return Result::kCorrupt;
  }
  record->type = static_cast<RecordType>(type);
  record->sequence = Get<uint64_t>(b + 4);
  record->key = std::string_view(b + kBodyFixedSize, ks);
  record->value = std::string_view(b + kBodyFixedSize + ks, vs);
  pos_ = size_t(end);
  return Result::kRecord;
}

}  // namespace rkv::wal
