// SPDX-License-Identifier: Apache-2.0
#include "server/cluster/slot_reclaimer.h"

#include <glog/logging.h>

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
    cv_.wait(l, [this] { return stop_ || !pending_.empty(); });
    if (stop_) break;
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
  for (auto& [slot, list] : KeysBySlot(*table_, *owners_, in_set)) {
    const uint32_t v = slot;
    const uint64_t word = todo[slot];
    deleted += DeleteHeld(
        table_, list, [&] { return owners_->BeginReclaim(v, word); },
        [&] { owners_->EndReclaim(v); }, [this] { return Stopping(); });
  }
  reclaimed_.fetch_add(deleted);
  return deleted;
}

}  // namespace rkv::cluster
