// SPDX-License-Identifier: Apache-2.0
#include "server/durability/snapshot_writer.h"

#include "server/durability/data_dir.h"
#include "server/durability/log_record.h"

namespace rkv::wal {

SnapshotWriter::SnapshotWriter(Env* env, std::string dir, uint64_t covered_sequence)
    : env_(env),
      dir_(std::move(dir)),
      covered_(covered_sequence),
      path_(JoinPath(dir_, SnapshotFileName(covered_sequence))),
      temp_path_(TempFileName(path_)) {}

Status SnapshotWriter::Create(Env* env, const std::string& dir, uint64_t covered_sequence,
                              std::unique_ptr<SnapshotWriter>* out) {
  std::unique_ptr<SnapshotWriter> w(new SnapshotWriter(env, dir, covered_sequence));
  // A crash during an earlier attempt at the same sequence leaves its temporary file behind.
  Status s = env->RemoveFile(w->temp_path_);
  if (!s.ok() && s.code() != Code::kNotFound)
    return Status(s.code(), "snapshot " + w->path_ + ": " + s.message());
  s = env->NewWritableFile(w->temp_path_, &w->file_);
  if (!s.ok()) return Status(s.code(), "snapshot " + w->path_ + ": " + s.message());
  w->buffer_.reserve(kFlushBytes + kMaxRecordSize);
  EncodeSnapshotHeader(covered_sequence, &w->buffer_);
  w->bytes_ = w->buffer_.size();
  *out = std::move(w);
  return Status::Ok();
}

SnapshotWriter::~SnapshotWriter() {
  if (file_) {  // neither finished nor failed: drop the partial snapshot
    file_.reset();
    (void)env_->RemoveFile(temp_path_);  // best effort; Create and start-up remove stale ones
  }
}

Status SnapshotWriter::Fail(const Status& s) {
  dead_ = Status(s.code(), "snapshot " + path_ + ": " + s.message());
  if (file_) {
    file_.reset();
    (void)env_->RemoveFile(temp_path_);  // best effort, as in the destructor
  }
  buffer_.clear();
  buffer_.shrink_to_fit();
  return dead_;
}

Status SnapshotWriter::Flush() {
  if (buffer_.empty()) return Status::Ok();
  Status s = file_->Append(buffer_);
  buffer_.clear();
  return s;
}

Status SnapshotWriter::Add(std::string_view key, std::string_view value, uint64_t sequence) {
  if (!dead_.ok()) return dead_;
  if (finished_) return Status(Code::kInvalidArgument, "snapshot " + path_ + ": Add after Finish");
  if (key.empty() || key.size() > kMaxKeySize || value.size() > kMaxValueSize) {
    return Fail(
        Status(Code::kInvalidArgument,
               "entry " + std::to_string(entries_) + " has a " + std::to_string(key.size()) +
                   "-byte key and a " + std::to_string(value.size()) + "-byte value (limits 1.." +
                   std::to_string(kMaxKeySize) + ", " + std::to_string(kMaxValueSize) + ")"));
  }
  EncodeRecord({RecordType::kPut, sequence, key, value}, &buffer_);
  ++entries_;
  kv_bytes_ += key.size() + value.size();
  bytes_ += EncodedSize(key.size(), value.size());
  if (buffer_.size() >= kFlushBytes) {
    Status s = Flush();
    if (!s.ok()) return Fail(s);
  }
  return Status::Ok();
}

Status SnapshotWriter::Finish() {
  if (!dead_.ok()) return dead_;
  if (finished_) return Status(Code::kInvalidArgument, "snapshot " + path_ + ": Finish twice");
  const size_t before = buffer_.size();
  EncodeSnapshotEnd(covered_, entries_, kv_bytes_, &buffer_);
  bytes_ += buffer_.size() - before;
  Status s = Flush();
  if (s.ok()) s = file_->Sync();
  if (s.ok()) s = env_->RenameFile(temp_path_, path_);
  if (!s.ok()) return Fail(s);
  // Renamed: the temporary name is gone and the file is complete and synced.
  file_.reset();
  finished_ = true;
  s = env_->SyncDir(dir_);
  if (!s.ok()) {
    dead_ = Status(s.code(), "snapshot " + path_ +
                                 ": written, but its directory entry may not "
                                 "be durable: " +
                                 s.message());
    return dead_;
  }
  return Status::Ok();
}

}  // namespace rkv::wal
