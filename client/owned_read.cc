// SPDX-License-Identifier: Apache-2.0
// A cluster GET's round trip (docs/cluster.md, "Ownership words"; the argument in
// docs/design.md, "Reads while slots move"): the entry's READs and then, in the same chain
// (one doorbell, one RC QP: the server executes them in order), the READ of the slot's
// ownership word (one per slot of a MultiGet's batch). What the entry READs returned may be used
// only if the word says this server still owns the slot at an epoch no newer than the client's map;
// otherwise MOVED (the router re-reads the map and asks the owner it names). No allocation, no
// locks.
#include "client/client_impl.h"
#include "common/cluster/ownership_word.h"

namespace rkv {

Status ClientImpl::PostOwnedRound(const Connection::ReadOp* ops, int n) {
  const wire::OpenReply& h = conn_->hello();
  if (n + owner_count_ > Connection::kMaxReads)
    return Status(Code::kInvalidArgument, "too many READs for one round trip");
  Connection::ReadOp all[Connection::kMaxReads];
  for (int i = 0; i < n; ++i) all[i] = ops[i];
  for (int k = 0; k < owner_count_; ++k) {
    if (owner_slots_[k] >= h.owner_slots)
      return Status(Code::kProtocolError, "server has no ownership word for slot " +
                                              std::to_string(owner_slots_[k]) +
                                              " (not a member of this cluster?)");
    all[n + k] = {Connection::kOwnerArea + 8 * uint64_t(k),
                  h.owner_offset + uint64_t{owner_slots_[k]} * 8, 8};
  }
  const int total = n + owner_count_;
  counters_.reads_posted += total;
  for (int i = 0; i < total; ++i) counters_.bytes_read += all[i].length;
  ++counters_.round_trips;
  return conn_->PostReads(all, total);
}

Status ClientImpl::CheckOwnerWords() {
  for (int k = 0; k < owner_count_; ++k) {
    const uint64_t word = layout::LoadU64(conn_->buf() + Connection::kOwnerArea + 8 * k);
    if (cluster::Readable(word, owner_epoch_)) continue;
    return Status(Code::kMoved, "slot " + std::to_string(owner_slots_[k]) + " at " + Where() +
                                    " is " + cluster::SlotStateName(cluster::WordState(word)) +
                                    " at epoch " + std::to_string(cluster::WordEpoch(word)) +
                                    " (client map epoch " + std::to_string(owner_epoch_) + ")");
  }
  return Status::Ok();
}

}  // namespace rkv
