// SPDX-License-Identifier: Apache-2.0
#include "server/durability/log_writer.h"

namespace rkv::wal {
namespace {
// BasicLockable view of a Mutex for std::condition_variable_any (the analysis cannot follow the
// wait's unlock/relock; the caller holds the Mutex before and after).
class LockableMutex {
 public:
  explicit LockableMutex(Mutex* mu) : mu_(mu) {}
  void lock() RKV_TSA(no_thread_safety_analysis) { mu_->Lock(); }
  void unlock() RKV_TSA(no_thread_safety_analysis) { mu_->Unlock(); }

 private:
  Mutex* const mu_;
};
}  // namespace

LogWriter::LogWriter(std::unique_ptr<WritableFile> file, uint64_t size, FsyncMode mode)
    : file_(std::move(file)), mode_(mode), file_size_(size), synced_size_(size) {}

void LogWriter::Add(const LogRecord& record, uint64_t* ticket) {
  MutexLock l(&mu_);
  EncodeRecord(record, &pending_);
  *ticket = ++added_;
}

Status LogWriter::Commit(uint64_t ticket, std::chrono::milliseconds timeout) {
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  MutexLock l(&mu_);
  LockableMutex lockable(&mu_);
  for (;;) {
    if (ticket <= resolved_) {
      for (auto it = failed_.begin(); it != failed_.end(); ++it) {
        if (ticket < it->first || ticket > it->last) continue;
        Status why = it->why;
        if (--it->unread == 0) failed_.erase(it);
        return why;
      }
      if (ticket >= forgotten_first_ && ticket <= forgotten_last_)
        return Status(Code::kTimeout,
                      "write-ahead log: more than " + std::to_string(kMaxFailed) +
                          " failed batches were waiting to be read; this write's outcome is "
                          "unknown");
      return Status::Ok();
    }
    if (!sticky_.ok()) return sticky_;
    if (!leader_ && !pending_.empty()) {
      // Lead: write every pending record (this one's included) with one write and one sync.
      leader_ = true;
      // Counted from the moment the batch is taken until its repair is done, so that Quick is
      // false for all of it.
      writing_.fetch_add(1, std::memory_order_relaxed);
      std::string batch;
      batch.swap(pending_);
      const uint64_t first = pending_first_, last = added_, at = file_size_;
      pending_first_ = added_ + 1;
      mu_.Unlock();
      const auto started = std::chrono::steady_clock::now();
      Status s = file_->Append(batch);
      if (s.ok() && mode_ == FsyncMode::kAlways) s = file_->Sync();
      last_write_us_.store(std::chrono::duration_cast<std::chrono::microseconds>(
                               std::chrono::steady_clock::now() - started)
                               .count(),
                           std::memory_order_relaxed);
      Status repair;
      if (!s.ok()) repair = file_->Truncate(at);  // no half batch stays in front of later ones
      writing_.fetch_sub(1, std::memory_order_relaxed);
      mu_.Lock();
      leader_ = false;
      ++batches_;
      if (mode_ == FsyncMode::kAlways) ++syncs_;
      if (s.ok()) {
        file_size_ = at + batch.size();
        if (mode_ == FsyncMode::kAlways) {
          synced_size_ = file_size_;
          synced_ticket_ = last;
        }
      } else {
        failed_.push_back({first, last, last - first + 1, s});
        while (failed_.size() > kMaxFailed) {
          const Failed& f = failed_.front();
          if (forgotten_last_ == 0) forgotten_first_ = f.first;
          forgotten_last_ = f.last;
          failed_.pop_front();
        }
        if (!repair.ok())
          sticky_ =
              Status(Code::kIoError, "write-ahead log unusable: " + s.message() +
                                         "; cutting the torn batch failed: " + repair.message());
      }
      resolved_ = last;
      cv_.notify_all();
      continue;
    }
    if (cv_.wait_until(lockable, deadline) == std::cv_status::timeout && ticket > resolved_)
      return Status(Code::kTimeout, "write-ahead log write did not finish in " +
                                        std::to_string(timeout.count()) + " ms");
  }
}

Status LogWriter::SyncWritten() {
  uint64_t size, ticket;
  {
    MutexLock l(&mu_);
    LockableMutex lockable(&mu_);
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(30);
    while (syncing_) {
      if (cv_.wait_until(lockable, deadline) == std::cv_status::timeout && syncing_)
        return Status(Code::kTimeout, "write-ahead log: another sync did not finish in 30 s");
    }
    if (synced_size_ == file_size_) return Status::Ok();
    syncing_ = true;
    size = file_size_;
    ticket = resolved_;
  }
  writing_.fetch_add(1, std::memory_order_relaxed);
  Status s = file_->Sync();
  writing_.fetch_sub(1, std::memory_order_relaxed);
  MutexLock l(&mu_);
  syncing_ = false;
  ++syncs_;
  if (s.ok() && size > synced_size_) {
    synced_size_ = size;
    synced_ticket_ = std::max(synced_ticket_, ticket);
  }
  cv_.notify_all();
  return s;
}

Status LogWriter::sticky() const {
  MutexLock l(&mu_);
  return sticky_;
}

uint64_t LogWriter::written() const {
  MutexLock l(&mu_);
  return file_size_;
}
uint64_t LogWriter::synced() const {
  MutexLock l(&mu_);
  return synced_size_;
}
uint64_t LogWriter::batches() const {
  MutexLock l(&mu_);
  return batches_;
}
uint64_t LogWriter::syncs() const {
  MutexLock l(&mu_);
  return syncs_;
}

}  // namespace rkv::wal
