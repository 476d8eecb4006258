// SPDX-License-Identifier: Apache-2.0
// Fault injection for the durability code's file system seam (server/durability/env.h).
//
// FaultFile: an in-memory WritableFile over a FaultState (what the "disk" holds), whose appends
// hit a configurable full disk (the part that fits is written, then ENOSPC), whose syncs and
// truncations fail on demand, and whose sync can be slowed down (log_writer_test.cc).
// FaultEnv: wraps a real Env (normally Env::Posix() on a temporary directory) and makes Append
// (a full disk: the part that fits is written, then ENOSPC), Sync, Truncate, RenameFile, SyncDir
// and NewWritableFile fail on demand with the errno text the real call would give, naming the
// path, and counts the calls.
// Thread safety: FaultFile and FaultEnv lock their state; set faults from any thread.
// Ownership: a FaultFile does not own its FaultState; a FaultEnv does not own the wrapped Env and
// must outlive the files it hands out.
#ifndef RKV_TESTS_FAULT_ENV_H_
#define RKV_TESTS_FAULT_ENV_H_

#include <errno.h>
#include <stdint.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstring>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include "server/durability/env.h"

namespace rkv::wal {

struct FaultState {
  std::mutex mu;
  std::string data;         // what the "disk" holds
  size_t space = SIZE_MAX;  // bytes the disk can take in total
  bool fail_sync = false;
  int sync_delay_us = 0;                // a disk's flush time
  std::atomic<int> append_delay_us{0};  // a write(2) blocked this long (a stalling disk)
  bool fail_truncate = false;
  int appends = 0, syncs = 0;
};

class FaultFile : public WritableFile {
 public:
  explicit FaultFile(FaultState* st) : st_(st) {}
  Status Append(std::string_view d) override {
    if (int us = st_->append_delay_us.load())
      std::this_thread::sleep_for(std::chrono::microseconds(us));
    std::lock_guard<std::mutex> l(st_->mu);
    ++st_->appends;
    size_t room = st_->space > st_->data.size() ? st_->space - st_->data.size() : 0;
    if (d.size() > room) {  // a full disk takes what fits, then ENOSPC
      st_->data.append(d.substr(0, room));
      return Status(Code::kIoError, "write(test.log): No space left on device");
    }
    st_->data.append(d);
    return Status::Ok();
  }
  Status Sync() override {
    if (st_->sync_delay_us)
      std::this_thread::sleep_for(std::chrono::microseconds(st_->sync_delay_us));
    std::lock_guard<std::mutex> l(st_->mu);
    ++st_->syncs;
    if (st_->fail_sync) return Status(Code::kIoError, "fdatasync(test.log): Input/output error");
    return Status::Ok();
  }
  Status Truncate(uint64_t size) override {
    std::lock_guard<std::mutex> l(st_->mu);
    if (st_->fail_truncate) return Status(Code::kIoError, "ftruncate(test.log): I/O error");
    st_->data.resize(size);
    return Status::Ok();
  }

 private:
  FaultState* st_;
};

class FaultEnv : public Env {
 public:
  explicit FaultEnv(Env* base) : base_(base) {}

  // Bytes that all further Appends together may still write (SIZE_MAX: unlimited).
  void SetSpace(size_t bytes) {
    std::lock_guard<std::mutex> l(mu_);
    space_ = bytes;
  }
  // Make every Sync (fdatasync) fail with `err` (0: succeed again). Likewise below.
  void FailSync(int err) { Set(&sync_err_, err); }
  void FailTruncate(int err) { Set(&truncate_err_, err); }
  void FailRename(int err) { Set(&rename_err_, err); }
  void FailSyncDir(int err) { Set(&sync_dir_err_, err); }
  void FailNewWritableFile(int err) { Set(&new_file_err_, err); }
  int appends() const { return Get(&appends_); }
  int syncs() const { return Get(&syncs_); }
  int renames() const { return Get(&renames_); }
  int sync_dirs() const { return Get(&sync_dirs_); }

  Status NewAppendableFile(const std::string& path, std::unique_ptr<WritableFile>* out,
                           uint64_t* size) override {
    std::unique_ptr<WritableFile> f;
    Status s = base_->NewAppendableFile(path, &f, size);
    if (s.ok()) out->reset(new File(this, path, std::move(f)));
    return s;
  }
  Status NewWritableFile(const std::string& path, std::unique_ptr<WritableFile>* out) override {
    if (int err = Get(&new_file_err_)) return Error("open", path, err);
    std::unique_ptr<WritableFile> f;
    Status s = base_->NewWritableFile(path, &f);
    if (s.ok()) out->reset(new File(this, path, std::move(f)));
    return s;
  }
  Status NewSequentialFile(const std::string& path, std::unique_ptr<SequentialFile>* out) override {
    return base_->NewSequentialFile(path, out);
  }
  Status ReadFile(const std::string& path, uint64_t max_bytes, std::string* out) override {
    return base_->ReadFile(path, max_bytes, out);
  }
  Status GetChildren(const std::string& dir, std::vector<std::string>* names) override {
    return base_->GetChildren(dir, names);
  }
  Status RenameFile(const std::string& from, const std::string& to) override {
    Bump(&renames_);
    if (int err = Get(&rename_err_)) return Error("rename", from + " -> " + to, err);
    return base_->RenameFile(from, to);
  }
  Status RemoveFile(const std::string& path) override { return base_->RemoveFile(path); }
  Status SyncDir(const std::string& dir) override {
    Bump(&sync_dirs_);
    if (int err = Get(&sync_dir_err_)) return Error("fsync", dir, err);
    return base_->SyncDir(dir);
  }
  Status CreateDirIfMissing(const std::string& dir) override {
    return base_->CreateDirIfMissing(dir);
  }
  Status TruncateFile(const std::string& path, uint64_t size) override {
    if (int err = Get(&truncate_err_)) return Error("ftruncate", path, err);
    return base_->TruncateFile(path, size);
  }

 private:
  class File : public WritableFile {
   public:
    File(FaultEnv* env, std::string path, std::unique_ptr<WritableFile> base)
        : env_(env), path_(std::move(path)), base_(std::move(base)) {}
    Status Append(std::string_view d) override {
      size_t room;
      {
        std::lock_guard<std::mutex> l(env_->mu_);
        ++env_->appends_;
        room = std::min(env_->space_, d.size());
        if (env_->space_ != SIZE_MAX) env_->space_ -= room;
      }
      Status s = base_->Append(d.substr(0, room));  // a full disk takes what fits
      if (s.ok() && room < d.size()) return Error("write", path_, ENOSPC);
      return s;
    }
    Status Sync() override {
      env_->Bump(&env_->syncs_);
      if (int err = env_->Get(&env_->sync_err_)) return Error("fdatasync", path_, err);
      return base_->Sync();
    }
    Status Truncate(uint64_t size) override {
      if (int err = env_->Get(&env_->truncate_err_)) return Error("ftruncate", path_, err);
      return base_->Truncate(size);
    }

   private:
    FaultEnv* const env_;
    const std::string path_;
    const std::unique_ptr<WritableFile> base_;
  };

  static Status Error(const char* call, const std::string& path, int err) {
    return Status(Code::kIoError, std::string(call) + "(" + path + "): " + std::strerror(err));
  }
  void Set(int* field, int value) {
    std::lock_guard<std::mutex> l(mu_);
    *field = value;
  }
  int Get(const int* field) const {
    std::lock_guard<std::mutex> l(mu_);
    return *field;
  }
  void Bump(int* field) {
    std::lock_guard<std::mutex> l(mu_);
    ++*field;
  }

  Env* const base_;
  mutable std::mutex mu_;
  size_t space_ = SIZE_MAX;
  int sync_err_ = 0, truncate_err_ = 0, rename_err_ = 0, sync_dir_err_ = 0, new_file_err_ = 0;
  int appends_ = 0, syncs_ = 0, renames_ = 0, sync_dirs_ = 0;
};

}  // namespace rkv::wal

#endif  // RKV_TESTS_FAULT_ENV_H_
