// SPDX-License-Identifier: Apache-2.0
// Replicator: sending one write to a slot's backups (replicator.h): the first attempt to every
// backup at once (SendAll), then each backup that did not apply it asked again alone (Retry),
// and what each attempt tells the SuspectReporter.
#include <glog/logging.h>

#include <chrono>
#include <cstring>
#include <thread>

#include "common/wire.h"
#include "server/cluster/replicator.h"

namespace rkv::cluster {

namespace {
constexpr int kRetryMs = 50;
}  // namespace

void Replicator::TellSuspects(uint32_t slot, const Backup& b, const Status& s,
                              SteadyClock::time_point started) {
  SuspectReporter* sr = suspects_.load();
  if (sr == nullptr) return;
  // The transport's failures only, at a backup the map still wants (a wait given up because
  // the map dropped it says nothing); a backup that answers (even to refuse) is reachable. No
  // free link (kBusy) is this server's matter.
  if (s.code() == Code::kTimeout || s.code() == Code::kConnectionLost ||
      s.code() == Code::kIoError) {
    if (StillWanted(slot, b.id)) sr->Failed(b.id, b.host, b.port, started);
  } else if (s.code() != Code::kBusy) {
    sr->Reached(b.id);
  }
}

Status Replicator::SendAll(uint32_t slot, const Snapshot& snap, std::string* msg,
                           std::string_view value, SteadyClock::time_point deadline, bool* sent_any,
                           std::string* why) {
  wire::ReplicateHeader h;
  std::memcpy(&h, msg->data(), sizeof h);
  h.epoch = snap.epoch;  // the epoch the backups expect now
  std::memcpy(msg->data(), &h, sizeof h);
  // The first attempt goes to every backup at once (each REPLICATE posted before any reply is
  // awaited: the backups apply it in parallel); a backup that did not apply it is then asked
  // again alone (Retry).
  const size_t n = snap.backups.size();
  if (n > kMaxBackups) return Status(Code::kInvalidArgument, "more backups than a slot can have");
  Attempt first[kMaxBackups];
  Status first_status[kMaxBackups];
  bool first_maybe[kMaxBackups] = {};
  const auto first_started = SteadyClock::now();
  // Links are taken in backup-id order (a thread holds one per backup at once: two threads
  // taking the last links of two backups in opposite orders would wait on each other).
  size_t order[kMaxBackups];
  for (size_t i = 0; i < n; ++i) order[i] = i;
  // An insertion sort of at most kMaxBackups entries (std::sort's threshold trips GCC's
  // -Warray-bounds on so small an array).
  for (size_t i = 1; i < n; ++i)
    for (size_t j = i; j > 0 && snap.backups[order[j]].id < snap.backups[order[j - 1]].id; --j)
      std::swap(order[j], order[j - 1]);
  for (size_t k = 0; k < n; ++k) {
    const size_t i = order[k];
    first_status[i] = Begin(slot, h.epoch, snap.backups[i], *msg, value, deadline, &first[i]);
  }
  for (size_t i = 0; i < n; ++i) {
    if (first_status[i].ok()) first_status[i] = End(snap.backups[i], &first[i]);
    first_maybe[i] = first[i].maybe_sent;
  }
  return Retry(slot, snap, msg, value, deadline, first_status, first_maybe, first_started, sent_any,
               why);
}

Status Replicator::Retry(uint32_t slot, const Snapshot& snap, std::string* msg,
                         std::string_view value, SteadyClock::time_point deadline,
                         const Status* first_status, const bool* first_maybe,
                         SteadyClock::time_point first_started, bool* sent_any, std::string* why) {
  wire::ReplicateHeader h;
  std::memcpy(&h, msg->data(), sizeof h);
  const size_t n = snap.backups.size();
  // Every backup may hold the write once its first attempt may have reached it (and it did
  // not say "not applied"), whatever happens to the others' below.
  for (size_t i = 0; i < n; ++i)
    if (!NotApplied(first_status[i].code())) *sent_any = *sent_any || first_maybe[i];
  for (size_t i = 0; i < n; ++i) {
    const Backup& b = snap.backups[i];
    for (bool is_first = true;; is_first = false) {
      bool maybe_sent = false;
      const auto started = is_first ? first_started : SteadyClock::now();
      Status s;
      if (is_first) {
        s = first_status[i];
        maybe_sent = first_maybe[i];
      } else {
        s = SendOnce(slot, h.epoch, b, *msg, value, deadline, &maybe_sent);
      }
      // A backup that applied it, or an attempt whose fate is unknown, may hold it; a refusal
      // that says "not applied" holds nothing, but only if no earlier attempt is in doubt (one
      // that timed out may still be applied after it).
      if (!NotApplied(s.code())) *sent_any = *sent_any || maybe_sent;
      TellSuspects(slot, b, s, started);
      if (s.ok()) break;
      retries_.fetch_add(1, std::memory_order_relaxed);
      LOG_EVERY_N(WARNING, 100) << "replicating slot " << slot << " to server " << b.id << ": "
                                << s.ToString();
      if (Permanent(s.code())) {
        refused_by_[slot] = b.id;
        *why = "server " + std::to_string(b.id) + " refused the replicated write";
        return s;
      }
      // The map may have changed meanwhile: this server deposed (fail), or the backup dropped
      // (dead: it no longer needs the write). Looked at after a pause, and at once when the
      // deadline passed (a backup dropped while its wait ran out is no failure).
      Snapshot now = SnapshotOf(slot);
      if (Primary(slot, now) && Listed(now, b.id) && SteadyClock::now() < deadline) {
        std::this_thread::sleep_for(std::chrono::milliseconds(kRetryMs));
        now = SnapshotOf(slot);
      }
      if (!Primary(slot, now)) {
        *why = "this server is no longer its primary";
        return s;
      }
      if (!Listed(now, b.id)) break;
      if (SteadyClock::now() >= deadline) {
        *why = "server " + std::to_string(b.id) + " did not apply it in time";
        return s;
      }
      if (now.epoch != h.epoch) {  // the message names the epoch the backup now expects
        h.epoch = now.epoch;
        std::memcpy(msg->data(), &h, sizeof h);
      }
    }
  }
  return Status::Ok();
}

}  // namespace rkv::cluster
