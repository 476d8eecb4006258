// SPDX-License-Identifier: Apache-2.0
// Replicator's fast path (replicator.h, "The fast path"): a write begun by the worker that
// received it, its first attempt posted by that worker on links of its own, its end here.
#include <chrono>

#include "server/cluster/replicator.h"

namespace rkv::cluster {

bool Replicator::BeginFast(uint32_t slot, bool put, std::string_view key, std::string_view value,
                           FastWrite* fw) {
  if (slot >= owners_->num_slots() || !slot_mu_[slot].try_lock()) return false;
  Snapshot snap = SnapshotOf(slot);
  // What Write would do first (a kept write resolved, a resync) is Write's: not here.
  if (!Primary(slot, snap) || snap.backups.empty() || snap.backups.size() > kMaxBackups ||
      pending_[slot] != nullptr) {
    slot_mu_[slot].unlock();
    return false;
  }
  uint64_t seq = owners_->Sequence(slot);
  seq = (seq == OwnershipTable::kSequenceUnset ? 0 : seq) + 1;
  fw->slot = slot;
  fw->put = put;
  fw->seq = seq;
  fw->key.assign(key);
  fw->value.assign(put ? value : std::string_view());
  fw->msg = Message(snap.epoch, seq, put, key, fw->value);
  fw->snap = std::move(snap);
  fw->started = SteadyClock::now();
  fw->deadline = fw->started + std::chrono::milliseconds(o_.max_wait_ms);
  fw->locked = true;
  return true;
}

Status Replicator::EndFast(FastWrite* fw, const Status* status, const bool* maybe_sent,
                           const std::function<Status()>& apply) {
  if (!fw->locked) return Status(Code::kInvalidArgument, "EndFast without a begun write");
  bool sent_any = false;
  std::string why;
  const size_t n = fw->snap.backups.size();
  for (size_t i = 0; i < n; ++i)
    if (!status[i].ok()) {
      fast_continued_.fetch_add(1, std::memory_order_relaxed);
      break;
    }
  // The first attempts went to fw->snap at its epoch; the retries (if any) re-read the map.
  Status r = Retry(fw->slot, fw->snap, &fw->msg, fw->value, fw->deadline, status, maybe_sent,
                   fw->started, &sent_any, &why);
  Status out = AfterSend(fw->slot, fw->put, fw->key, fw->value, apply, fw->seq, fw->msg, r,
                         sent_any, why, /*superseded=*/false);
  fast_writes_.fetch_add(1, std::memory_order_relaxed);
  fw->locked = false;
  slot_mu_[fw->slot].unlock();
  return out;
}

void Replicator::FailFast(FastWrite* fw, const Status* status, const bool* maybe_sent) {
  if (!fw->locked) return;
  bool sent_any = false;  // as Retry counts it
  for (size_t i = 0; i < fw->snap.backups.size(); ++i)
    if (!NotApplied(status[i].code())) sent_any = sent_any || maybe_sent[i];
  // The apply is never run: AfterSend with a failure only settles the number and the keeping.
  (void)AfterSend(
      fw->slot, fw->put, fw->key, fw->value, [] { return Status::Ok(); }, fw->seq, fw->msg,
      Status(Code::kUnavailable, "the server is stopping"), sent_any, "the server is stopping",
      /*superseded=*/false);
  fw->locked = false;
  slot_mu_[fw->slot].unlock();
}

bool Replicator::FastDropped(const FastWrite& fw, uint32_t backup, uint64_t* seen_epoch) const {
  return DroppedSince(fw.slot, backup, seen_epoch);
}

void Replicator::AbortFast(FastWrite* fw) {
  if (!fw->locked) return;
  fw->locked = false;
  slot_mu_[fw->slot].unlock();
}

}  // namespace rkv::cluster
