// SPDX-License-Identifier: Apache-2.0
#include "server/durability/log_reader.h"

#include <algorithm>

namespace rkv::wal {

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
  const uint32_t body = RecordBodySize(p);
  const uint64_t end = uint64_t(pos_) + kRecordHeaderSize + body;
  if (body < kBodyFixedSize || body > kMaxBodySize)
    return Bad("record length " + std::to_string(body) + " out of range", end);
  if (end > bytes_.size()) return Bad("record runs past the end of the file", end);
  LogRecord r;
  switch (CheckRecord(std::string_view(p, kRecordHeaderSize + body), &r)) {
    case RecordCheck::kBadChecksum:
      return Bad("checksum mismatch", end);
    case RecordCheck::kBadFields:
      // A checksummed record with impossible fields was written that way: never a torn tail.
      error_ = "corrupt record at offset " + std::to_string(offset()) + ": invalid fields";
      return Result::kCorrupt;
    case RecordCheck::kOk:
      break;
  }
  if (r.type == RecordType::kSnapshotEnd) {  // legal only in a snapshot
    error_ = "corrupt record at offset " + std::to_string(offset()) +
             ": a snapshot END record in a write-ahead log";
    return Result::kCorrupt;
  }
  *record = r;
  pos_ = size_t(end);
  return Result::kRecord;
}

}  // namespace rkv::wal
