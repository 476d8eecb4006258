// SPDX-License-Identifier: Apache-2.0
// LogReader: walks the records of a write-ahead log held in memory (the file's bytes) and tells a
// crash's torn tail from corruption in the middle.
//
// Rules (docs/design.md, "Durability"):
// - A record is accepted when its length is in range, it lies inside the bytes, and its checksum,
//   type and sizes hold.
// - A bad record is a TORN TAIL, the normal trace of a crash during an append, when it is the
//   last thing in the file: fewer bytes than a maximal record remain and its declared end
//   reaches or passes the end of the bytes (or fewer than a record header remain), or
//   everything from it to the end is zero (space a crash left allocated but unwritten). Recovery
//   drops it (the caller truncates the file there) and says so with the offset and the bytes
//   dropped.
// - Any other bad record is CORRUPTION: a complete record with a bad checksum or impossible
//   fields followed by more data. So is a checksummed record with impossible fields anywhere,
//   and a snapshot's END record (type 3, legal only in snapshots: snapshot_reader.h). Recovery
//   stops there and the caller refuses to start unless the operator chose to keep what precedes
//   it (kvserver --recover=truncate).
// Thread safety: none (one reader per thread). Does not own the bytes: they must outlive it and
// the records it returns (whose key and value point into them).
#ifndef RKV_SERVER_DURABILITY_LOG_READER_H_
#define RKV_SERVER_DURABILITY_LOG_READER_H_

#include <cstdint>
#include <string>
#include <string_view>

#include "server/durability/log_record.h"

namespace rkv::wal {

class LogReader {
 public:
  // `bytes` is everything after the file header; `base` is its offset in the file (for messages).
  LogReader(std::string_view bytes, uint64_t base) : bytes_(bytes), base_(base) {}

  enum class Result {
    kRecord,    // *record is the next record
    kEnd,       // clean end: the bytes end exactly after the last record
    kTornTail,  // a torn last record: valid data ends at offset()
    kCorrupt,   // corruption at offset(): error() says what
  };
  [[nodiscard]] Result Next(LogRecord* record);

  // File offset of the next record (after kRecord), or where the valid data ends (otherwise).
  uint64_t offset() const { return base_ + pos_; }
  // Bytes after offset(): what a torn tail drops.
  uint64_t remaining() const { return bytes_.size() - pos_; }
  const std::string& error() const { return error_; }

 private:
  Result Bad(const std::string& why, uint64_t record_end);

  const std::string_view bytes_;
  const uint64_t base_;
  size_t pos_ = 0;
  std::string error_;
};

}  // namespace rkv::wal

#endif  // RKV_SERVER_DURABILITY_LOG_READER_H_
