// SPDX-License-Identifier: Apache-2.0
#include "server/cluster/slot_reclaimer.h"

#include <glog/logging.h>

#include <algorithm>
#include <chrono>
#include <string>
#include <vector>

#include "common/cluster/ownership_word.h"
#include "server/cluster/slot_scan.h"

namespace rkv::cluster {

namespace {
constexpr int kBatchMs = 1000;  // released slots gathered this long before one scan
}

SlotReclaimer::SlotReclaimer(Table* table, OwnershipTable* owners)
    : table_(table), owners_(owners) {}

SlotReclaimer::~SlotReclaimer() {
  {
    std::lock_guard<std::mutex> l(mu_);
    stop_ = true;
  }
  cv_.notify_all();
  if (thread_.joinable()) thread_.join();
}

bool SlotReclaimer::Stopping() {
  std::lock_guard<std::mutex> l(mu_);
  return stop_;
}

void SlotReclaimer::Start() {
  thread_ = std::thread([this] { Loop(); });
}

void SlotReclaimer::Released(uint32_t slot, uint64_t word) {
  if (slot >= owners_->num_slots() || WordState(word) != SlotState::kNotOwned) return;
  {
    std::lock_guard<std::mutex> l(mu_);
    pending_[slot] = word;
  }
  cv_.notify_all();
}

void SlotReclaimer::Loop() {
  std::unique_lock<std::mutex> l(mu_);
  while (!stop_) {
    if (retry_.empty()) {
      cv_.wait(l, [this] { return stop_ || !pending_.empty() || !retry_.empty(); });
    } else {
      cv_.wait_until(l, retry_at_, [this] { return stop_ || !pending_.empty(); });
      if (!stop_ && std::chrono::steady_clock::now() >= retry_at_) {
        for (const auto& [slot, word] : retry_)
          pending_.emplace(slot, word);  // a newer report wins
        retry_.clear();
      }
    }
    if (stop_) break;
    if (pending_.empty()) continue;
    cv_.wait_for(l, std::chrono::milliseconds(kBatchMs), [this] { return stop_; });
    if (stop_) break;
    l.unlock();
    const size_t n = ReclaimNow();
    if (n > 0) LOG(INFO) << "cluster: reclaimed " << n << " entries of slots held no more";
    l.lock();
  }
}

size_t SlotReclaimer::ReclaimNow() {
  std::map<uint32_t, uint64_t> todo;
  {
    std::lock_guard<std::mutex> l(mu_);
    todo.swap(pending_);
  }
  if (todo.empty()) return 0;
  std::vector<bool> in_set(owners_->num_slots(), false);
  for (const auto& [slot, word] : todo) in_set[slot] = true;
  size_t deleted = 0;
  std::map<uint32_t, uint64_t> again;
  for (auto& [slot, list] : KeysBySlot(*table_, *owners_, in_set)) {
    const uint32_t v = slot;
    const uint64_t word = todo[slot];
    bool complete = false;
    size_t failed = 0;
    deleted += DeleteHeld(
        table_, list, [&] { return owners_->BeginReclaim(v, word); },
        [&] { owners_->EndReclaim(v); }, [this] { return Stopping(); }, &complete, &failed);
    if (complete && failed > 0) again[slot] = word;
  }
  reclaimed_.fetch_add(deleted);
  {
    std::lock_guard<std::mutex> l(mu_);
    if (again.empty()) {
      retry_ms_ = kRetryMs;
    } else {
      LOG_EVERY_N(WARNING, 10) << "cluster: " << again.size() << " slot(s) kept entries the "
                               << "table would not delete (a failing log?): tried again in "
                               << retry_ms_ / 1000 << " s";
      for (const auto& [slot, word] : again) retry_[slot] = word;
      retry_at_ = std::chrono::steady_clock::now() + std::chrono::milliseconds(retry_ms_);
      retry_ms_ = std::min(retry_ms_ * 2, kMaxRetryMs);
    }
  }
  return deleted;
}

}  // namespace rkv::cluster
