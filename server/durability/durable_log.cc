// SPDX-License-Identifier: Apache-2.0
#include "server/durability/durable_log.h"

#include <glog/logging.h>

#include "server/durability/data_dir.h"

namespace rkv::wal {

const char* FsyncModeName(FsyncMode mode) {
  switch (mode) {
    case FsyncMode::kAlways:
      return "always";
    case FsyncMode::kEverySec:
      return "everysec";
    case FsyncMode::kNo:
      return "no";
  }
  return "?";
}

bool ParseFsyncMode(std::string_view name, FsyncMode* mode) {
  if (name == "always") {
    *mode = FsyncMode::kAlways;
  } else if (name == "everysec") {
    *mode = FsyncMode::kEverySec;
  } else if (name == "no") {
    *mode = FsyncMode::kNo;
  } else {
    return false;
  }
  return true;
}

DurableLog::DurableLog(Env* env, std::string dir, FsyncMode mode,
                       std::chrono::milliseconds commit_timeout)
    : env_(env), dir_(std::move(dir)), mode_(mode), commit_timeout_(commit_timeout) {}

Status DurableLog::Open(Env* env, const std::string& dir, FsyncMode mode, uint64_t generation,
                        uint64_t next_sequence, std::chrono::milliseconds commit_timeout,
                        std::unique_ptr<DurableLog>* out) {
  std::unique_ptr<DurableLog> log(new DurableLog(env, dir, mode, commit_timeout));
  std::shared_ptr<LogWriter> w;
  Status s = log->NewFile(generation, &w);
  if (!s.ok()) return s;
  {
    MutexLock l(&log->mu_);
    log->writer_ = std::move(w);
    log->generation_ = generation;
    log->next_sequence_ = next_sequence;
  }
  if (mode == FsyncMode::kEverySec)
    log->sync_thread_ = std::thread([p = log.get()] { p->SyncLoop(); });
  *out = std::move(log);
  return Status::Ok();
}

DurableLog::~DurableLog() {
  {
    std::lock_guard<std::mutex> l(stop_mu_);
    stop_ = true;
  }
  stop_cv_.notify_all();
  if (sync_thread_.joinable()) sync_thread_.join();
  std::shared_ptr<LogWriter> w, prev;
  {
    MutexLock l(&mu_);
    w = writer_;
    prev = previous_;
  }
  for (const auto& f : {prev, w}) {  // a clean shutdown leaves nothing unsynced
    if (!f) continue;
    Status s = f->SyncWritten();
    if (!s.ok()) LOG(ERROR) << "write-ahead log: final sync: " << s.message();
  }
}

Status DurableLog::NewFile(uint64_t g, std::shared_ptr<LogWriter>* out) {
  const std::string path = dir_ + "/" + LogFileName(g);
  std::unique_ptr<WritableFile> f;
  Status s = env_->NewWritableFile(path, &f);
  if (!s.ok()) return s;
  std::string header;
  EncodeFileHeader(g, &header);
  s = f->Append(header);
  if (s.ok()) s = f->Sync();
  if (s.ok()) s = env_->SyncDir(dir_);
  if (!s.ok()) {
    f.reset();
    (void)env_->RemoveFile(path);
    return s;
  }
  *out = std::make_shared<LogWriter>(std::move(f), header.size(), mode_);
  return Status::Ok();
}

Status DurableLog::Append(RecordType type, std::string_view key, std::string_view value) {
  LogRecord rec;
  rec.type = type;
  rec.key = key;
  rec.value = value;
  uint64_t ticket;
  std::shared_ptr<LogWriter> w;
  {
    MutexLock l(&mu_);
    if (!broken_.ok()) return broken_;
    rec.sequence = next_sequence_++;
    writer_->Add(rec, &ticket);
    w = writer_;
  }
  Status s = w->Commit(ticket, commit_timeout_);
  if (s.ok()) {
    records_.fetch_add(1, std::memory_order_relaxed);
    return s;
  }
  failures_.fetch_add(1, std::memory_order_relaxed);
  if (Status st = w->sticky(); !st.ok()) {  // the file's tail is unknown: stop for good
    MutexLock l(&mu_);
    if (broken_.ok()) {
      broken_ =
          Status(Code::kIoError, st.message() + "; writes are refused until kvserver restarts");
      LOG(ERROR) << broken_.message();
    }
    return s;
  }
  if (s.code() == Code::kTimeout) {
    // The record may still reach the file after we give up on it: from now on the file could
    // hold a write memory does not, so nothing more is accepted (see the header).
    MutexLock l(&mu_);
    if (broken_.ok()) {
      broken_ = Status(Code::kIoError, "write-ahead log stalled (a commit took longer than " +
                                           std::to_string(commit_timeout_.count()) +
                                           " ms); writes are refused until kvserver restarts");
      LOG(ERROR) << broken_.message();
    }
    return Status(Code::kTimeout, s.message() + "; outcome unknown");
  }
  LOG_EVERY_N(WARNING, 100) << "write-ahead log: " << s.message() << " (the write was refused)";
  return s;
}

bool DurableLog::WriteInline() const {
  if (mode_ == FsyncMode::kAlways) return false;  // every record waits for a sync
  MutexLock l(&mu_);  // held for two loads: the writer cannot change under us
  // The previous file too: its final sync after a rotation may be running.
  if (!broken_.ok() || !writer_->Quick(kInlineWrite) ||
      (previous_ && !previous_->Quick(kInlineWrite)))
    return false;
  inline_ok_.fetch_add(1, std::memory_order_relaxed);
  return true;
}

Status DurableLog::LogPut(std::string_view key, std::string_view value) {
  return Append(RecordType::kPut, key, value);
}

Status DurableLog::LogDelete(std::string_view key) { return Append(RecordType::kDelete, key, {}); }

Status DurableLog::Rotate(uint64_t* covered, uint64_t* new_generation) {
  MutexLock rl(&rotate_mu_);
  uint64_t g;
  {
    MutexLock l(&mu_);
    g = generation_ + 1;
  }
  std::shared_ptr<LogWriter> next, old;
  Status s = NewFile(g, &next);
  if (!s.ok()) return s;
  {
    MutexLock l(&mu_);
    if (previous_) {
      old_syncs_ += previous_->syncs();
      old_batches_ += previous_->batches();
    }
    next->InheritHistory(*writer_);
    old = writer_;
    previous_ = std::move(writer_);
    writer_ = std::move(next);
    generation_ = g;
    *covered = next_sequence_ - 1;
  }
  *new_generation = g;
  // What the old file has written but not synced (kEverySec, kNo) is synced now, so the old
  // files are complete on disk even if the snapshot that follows fails; records of it still
  // being committed are synced by the sync thread, which syncs the previous file too.
  s = old->SyncWritten();
  MutexLock l(&mu_);
  if (!s.ok() && mode_ != FsyncMode::kNo && broken_.ok()) {
    broken_ =
        Status(Code::kIoError, "write-ahead log: sync of a finished log file failed (" +
                                   s.message() + "); writes are refused until kvserver restarts");
    LOG(ERROR) << broken_.message();
  }
  return s;
}

void DurableLog::SyncLoop() {
  std::unique_lock<std::mutex> l(stop_mu_);
  while (!stop_cv_.wait_for(l, std::chrono::seconds(1), [this] { return stop_; })) {
    l.unlock();
    std::shared_ptr<LogWriter> w, prev;
    {
      MutexLock ml(&mu_);
      w = writer_;
      prev = previous_;
    }
    Status s = prev ? prev->SyncWritten() : Status::Ok();
    if (s.ok()) s = w->SyncWritten();
    if (!s.ok()) {
      MutexLock ml(&mu_);
      if (broken_.ok()) {
        broken_ = Status(Code::kIoError, "write-ahead log: periodic sync failed (" + s.message() +
                                             "); writes are refused until kvserver restarts");
        LOG(ERROR) << broken_.message();
      }
    }
    l.lock();
  }
}

uint64_t DurableLog::current_generation() const {
  MutexLock l(&mu_);
  return generation_;
}
uint64_t DurableLog::current_file_bytes() const {
  std::shared_ptr<LogWriter> w;
  {
    MutexLock l(&mu_);
    w = writer_;
  }
  return w->written();
}
uint64_t DurableLog::last_sequence() const {
  MutexLock l(&mu_);
  return next_sequence_ - 1;
}
uint64_t DurableLog::syncs() const {
  MutexLock l(&mu_);
  return old_syncs_ + writer_->syncs() + (previous_ ? previous_->syncs() : 0);
}
uint64_t DurableLog::batches() const {
  MutexLock l(&mu_);
  return old_batches_ + writer_->batches() + (previous_ ? previous_->batches() : 0);
}
Status DurableLog::broken() const {
  MutexLock l(&mu_);
  return broken_;
}

}  // namespace rkv::wal
