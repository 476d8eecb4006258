// SPDX-License-Identifier: Apache-2.0
#include "server/durability/snapshot_reader.h"

#include "server/durability/data_dir.h"
#include "server/durability/log_record.h"

namespace rkv::wal {

SnapshotReader::SnapshotReader(std::string path, std::unique_ptr<SequentialFile> file)
    : path_(std::move(path)), file_(std::move(file)) {}

Status SnapshotReader::Open(Env* env, const std::string& path,
                            std::unique_ptr<SnapshotReader>* out) {
  std::unique_ptr<SequentialFile> file;
  Status s = env->NewSequentialFile(path, &file);
  if (!s.ok()) return s;
  std::unique_ptr<SnapshotReader> r(new SnapshotReader(path, std::move(file)));
  if (!r->Fill(kFileHeaderSize)) return Status(Code::kIoError, r->error_);
  std::string why;
  if (!DecodeSnapshotHeader(std::string_view(r->buffer_).substr(0, kFileHeaderSize), &r->covered_,
                            &why)) {
    return Status(Code::kIoError, "corrupt snapshot " + path + " at offset 0: " + why);
  }
  const size_t slash = path.rfind('/');
  uint64_t named;
  if (ParseSnapshotFileName(slash == std::string::npos ? path : path.substr(slash + 1), &named) &&
      named != r->covered_) {
    return Status(Code::kIoError,
                  "corrupt snapshot " + path + " at offset 0: its header covers sequence " +
                      std::to_string(r->covered_) + ", its name says " + std::to_string(named));
  }
  r->pos_ = kFileHeaderSize;
  r->offset_ = kFileHeaderSize;
  *out = std::move(r);
  return Status::Ok();
}

bool SnapshotReader::Fill(size_t n) {
  while (available() < n && !eof_) {
    if (pos_ > 0) {  // drop what was consumed (the views into it are no longer valid)
      buffer_.erase(0, pos_);
      buffer_base_ += pos_;
      pos_ = 0;
    }
    Status s = file_->Read(kChunkBytes, &chunk_);
    if (!s.ok()) {
      error_ = "snapshot " + path_ + ": reading at offset " +
               std::to_string(buffer_base_ + buffer_.size()) + ": " + s.message();
      return false;
    }
    if (chunk_.empty()) eof_ = true;
    buffer_.append(chunk_);
  }
  return true;
}

SnapshotReader::Result SnapshotReader::Corrupt(uint64_t at, const std::string& why) {
  offset_ = at;
  error_ = "corrupt snapshot " + path_ + " at offset " + std::to_string(at) + ": " + why;
  done_ = true;
  result_ = Result::kCorrupt;
  return result_;
}

SnapshotReader::Result SnapshotReader::Next(std::string_view* key, std::string_view* value) {
  if (done_) return result_;
  if (!Fill(kRecordHeaderSize)) {
    done_ = true;
    offset_ = buffer_base_ + pos_;
    return result_ = Result::kCorrupt;
  }
  const uint64_t at = buffer_base_ + pos_;
  if (available() == 0) return Corrupt(at, "the file ends without an END record");
  if (available() < kRecordHeaderSize)
    return Corrupt(at, "the file ends inside a record header (truncated)");
  const uint32_t body = RecordBodySize(buffer_.data() + pos_);
  if (body < kBodyFixedSize || body > kMaxBodySize)
    return Corrupt(at, "record length " + std::to_string(body) + " out of range");
  const size_t size = kRecordHeaderSize + body;
  if (!Fill(size)) {
    done_ = true;
    offset_ = at;
    return result_ = Result::kCorrupt;
  }
  if (available() < size) return Corrupt(at, "the file ends inside a record (truncated)");
  const uint64_t record_at = buffer_base_ + pos_;  // == at; Fill may have moved the buffer
  LogRecord r;
  switch (CheckRecord(std::string_view(buffer_.data() + pos_, size), &r)) {
    case RecordCheck::kBadChecksum:
      return Corrupt(record_at, "checksum mismatch");
    case RecordCheck::kBadFields:
      return Corrupt(record_at, "invalid fields");
    case RecordCheck::kOk:
      break;
  }
  pos_ += size;
  offset_ = record_at;
  if (r.type == RecordType::kPut) {
    ++entries_;
    kv_bytes_ += r.key.size() + r.value.size();
    sequence_ = r.sequence;
    *key = r.key;
    *value = r.value;
    return Result::kEntry;
  }
  if (r.type != RecordType::kSnapshotEnd)
    return Corrupt(record_at, "a DELETE record (snapshots hold only PUT and END)");
  uint64_t n, bytes;
  DecodeSnapshotEndValue(r.value, &n, &bytes);
  if (r.sequence != covered_) {
    return Corrupt(record_at, "END record for sequence " + std::to_string(r.sequence) +
                                  ", the header says " + std::to_string(covered_));
  }
  if (n != entries_ || bytes != kv_bytes_) {
    return Corrupt(record_at, "END record counts " + std::to_string(n) + " entries of " +
                                  std::to_string(bytes) + " bytes, the file holds " +
                                  std::to_string(entries_) + " of " + std::to_string(kv_bytes_));
  }
  if (!Fill(1)) {
    done_ = true;
    return result_ = Result::kCorrupt;
  }
  if (available() > 0) return Corrupt(buffer_base_ + pos_, "data after the END record");
  done_ = true;
  return result_ = Result::kEnd;
}

}  // namespace rkv::wal
