// SPDX-License-Identifier: Apache-2.0
#include "client/failover_watch.h"

namespace rkv {

FailoverWatch::FailoverWatch(cluster::MapWatcher* watcher, ClientImpl* c, uint32_t slot,
                             uint32_t server, uint64_t epoch, int after_ms)
    : watcher_(watcher),
      c_(c),
      slot_(slot),
      server_(server),
      after_(after_ms),
      seen_epoch_(epoch),
      hook_([this] { return Moved(); }) {
  c_->SetAbandon(&hook_);
}

bool FailoverWatch::Moved() {
  const auto now_time = std::chrono::steady_clock::now();
  if (!started_) {  // the first look: the wait is ~1024 polls old (no clock read per operation)
    started_ = true;
    since_ = now_time;
  }
  if (now_time - since_ < after_) return false;
  if (!watcher_->watching() && now_time >= next_refresh_) {
    (void)watcher_->Refresh();  // an etcd error: asked again next time
    // From its end: a slow etcd cannot make every look a read.
    next_refresh_ =
        std::chrono::steady_clock::now() + std::chrono::milliseconds(kUnwatchedRefreshMs);
  }
  const uint64_t e = watcher_->epoch();
  if (e == seen_epoch_) return false;  // nothing new since the last look
  seen_epoch_ = e;
  const std::shared_ptr<const cluster::SlotMap> now = watcher_->current();
  if (!now || slot_ >= now->num_slots()) return false;
  const uint16_t o = now->OwnerIndex(slot_);
  abandoned_ = o == cluster::kUnassigned || now->servers()[o].id != server_;
  return abandoned_;
}

}  // namespace rkv
