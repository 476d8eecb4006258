// SPDX-License-Identifier: Apache-2.0
#include "server/durability/snapshotter.h"

#include <glog/logging.h>

#include <chrono>
#include <utility>
#include <vector>

#include "server/durability/data_dir.h"
#include "server/durability/snapshot_writer.h"

namespace rkv::wal {

Snapshotter::Snapshotter(Env* env, std::string dir, DurableLog* log, Table* table,
                         uint64_t auto_log_bytes)
    : env_(env), dir_(std::move(dir)), log_(log), table_(table), auto_log_bytes_(auto_log_bytes) {}

Snapshotter::~Snapshotter() { Stop(); }

void Snapshotter::Start() {
  thread_ = std::thread([this] { Loop(); });
}

void Snapshotter::Stop() {
  {
    std::lock_guard<std::mutex> l(mu_);
    stop_ = true;
  }
  cv_.notify_all();
  if (thread_.joinable()) thread_.join();
}

void Snapshotter::Request(std::string* message) {
  std::lock_guard<std::mutex> l(mu_);
  if (running_.load()) {
    *message = "a snapshot is already being taken";
  } else if (requested_) {
    *message = "a snapshot was already requested";
  } else {
    *message = "snapshot started";
  }
  requested_ = true;
  cv_.notify_all();
}

void Snapshotter::Loop() {
  std::unique_lock<std::mutex> l(mu_);
  while (!stop_) {
    cv_.wait_for(l, std::chrono::milliseconds(500), [this] { return stop_ || requested_; });
    if (stop_) break;
    bool due = requested_ || (auto_log_bytes_ > 0 && log_->current_file_bytes() > auto_log_bytes_ &&
                              log_->broken().ok());
    if (!due) continue;
    requested_ = false;
    running_ = true;
    l.unlock();
    Status s = TakeOne();
    if (!s.ok()) LOG(ERROR) << "snapshot failed (the logs are kept): " << s.message();
    l.lock();
    running_ = false;
    if (!s.ok() && !requested_ && !stop_) {
      // Do not retry a failing disk in a tight loop: the next check is in 10 s at the earliest.
      cv_.wait_for(l, std::chrono::seconds(10), [this] { return stop_ || requested_; });
    }
  }
}

Status Snapshotter::TakeOne() {
  const auto start = std::chrono::steady_clock::now();
  uint64_t covered, generation;
  Status s = log_->Rotate(&covered, &generation);
  if (!s.ok()) {
    failed_.fetch_add(1);
    return s;
  }
  std::unique_ptr<SnapshotWriter> w;
  s = SnapshotWriter::Create(env_, dir_, covered, &w);
  std::vector<std::pair<std::string, std::string>> entries;
  // num_buckets home buckets plus the last one's second candidate (layout.h).
  const uint32_t buckets = table_->geometry().num_buckets + 1;
  for (uint32_t b = 0; s.ok() && b < buckets; ++b) {
    entries.clear();
    table_->CollectBucket(b, &entries);
    for (const auto& [k, v] : entries) {
      s = w->Add(k, v);
      if (!s.ok()) break;
    }
  }
  if (s.ok()) s = w->Finish();
  if (!s.ok()) {
    failed_.fetch_add(1);
    return s;  // the writer's destructor removes its temporary file
  }
  const uint64_t ms = uint64_t(std::chrono::duration_cast<std::chrono::milliseconds>(
                                   std::chrono::steady_clock::now() - start)
                                   .count());
  last_entries_ = w->entries();
  last_bytes_ = w->bytes_written();
  last_ms_ = ms;
  LOG(INFO) << "snapshot " << SnapshotFileName(covered) << ": " << w->entries() << " entries, "
            << w->bytes_written() << " bytes in " << ms << " ms";
  RemoveObsolete(generation, covered);
  taken_.fetch_add(1);  // counted once the logs it covers are gone too
  return Status::Ok();
}

void Snapshotter::RemoveObsolete(uint64_t generation, uint64_t covered) {
  DataDirListing listing;
  Status s = ListDataDir(env_, dir_, &listing);
  if (!s.ok()) {
    LOG(WARNING) << "snapshot: listing " << dir_ << ": " << s.message();
    return;
  }
  for (const DataDirListing::File& f : listing.logs) {
    if (f.number >= generation) continue;
    s = env_->RemoveFile(dir_ + "/" + f.name);
    if (!s.ok()) LOG(WARNING) << "snapshot: " << s.message();
  }
  for (const DataDirListing::File& f : listing.snapshots) {
    if (f.number == covered) continue;  // every other one is older (or was left unreadable)
    s = env_->RemoveFile(dir_ + "/" + f.name);
    if (!s.ok()) LOG(WARNING) << "snapshot: " << s.message();
  }
  s = env_->SyncDir(dir_);
  if (!s.ok()) LOG(WARNING) << "snapshot: " << s.message();
}

}  // namespace rkv::wal
