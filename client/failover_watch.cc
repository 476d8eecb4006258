// SPDX-License-Identifier: Apache-2.0
#include "client/failover_watch.h"

namespace rkv {

FailoverWatch::FailoverWatch(cluster::MapWatcher* watcher, ClientImpl* c, uint32_t slot,
                             uint32_t server, uint64_t epoch, int after_ms)
    : watcher_(watcher),
      c_(c),
      slot_(slot),
      server_(server),
      epoch_(epoch),
      since_(std::chrono::steady_clock::now()),
      after_(after_ms),
      hook_([this] { return Moved(); }) {
  c_->SetAbandon(&hook_);
}

bool FailoverWatch::Moved() {
  const auto now_time = std::chrono::steady_clock::now();
  if (now_time - since_ < after_) return false;
  if (!watcher_->watching() && now_time >= next_refresh_) {
    next_refresh_ = now_time + std::chrono::milliseconds(kUnwatchedRefreshMs);
    (void)watcher_->Refresh();  // an etcd error: asked again next time
  }
  if (watcher_->epoch() == epoch_) return false;
  const std::shared_ptr<const cluster::SlotMap> now = watcher_->current();
  if (!now || slot_ >= now->num_slots()) return false;
  const uint16_t o = now->OwnerIndex(slot_);
  abandoned_ = o == cluster::kUnassigned || now->servers()[o].id != server_;
  return abandoned_;
}

}  // namespace rkv
