// SPDX-License-Identifier: Apache-2.0
// Migrator::Copy: a record's copy of its slots to the target (docs/cluster.md, "Migration"):
// the target's liveness checked in etcd, an authenticated connection to it, rounds of scans
// that ship every key changed since the last round until few are left, then the slots'
// writes paused (MOVING), the admitted ones waited for, the last keys shipped and, for a move,
// the slots given up here (NOT_OWNED) a grace period before the commit.
#include <glog/logging.h>

#include <chrono>
#include <thread>

#include "client/client_impl.h"
#include "server/cluster/migrator.h"
#include "server/cluster/progress_reporter.h"
#include "server/cluster/slot_scan.h"

namespace rkv::cluster {

namespace {
using SteadyClock = std::chrono::steady_clock;
constexpr int kGraceMs = 20;        // read grace period between NOT_OWNED and the commit
constexpr int kPauseWaitMs = 5000;  // for writes admitted before the pause
constexpr size_t kDirtyRounds = 8;
constexpr size_t kFewDirty = 64;         // pause once a round leaves at most this many keys
constexpr size_t kMaxPausedKeys = 4096;  // ...and never with more than this many to ship
}  // namespace

bool Migrator::Copy(const MigrationRecord& rec, const std::string& host, uint16_t port,
                    std::string* why) {
  {
    bool live = false;
    EtcdKv t;
    Status r =
        etcd_->Get(Key(("servers/" + std::to_string(rec.to_id)).c_str()), &live, &t, nullptr);
    if (!r.ok() || !live) {
      *why = "target server " + std::to_string(rec.to_id) + " is not live" +
             (r.ok() ? std::string() : ": " + r.ToString());
      return false;
    }
    target_record_ = t.create_revision;
  }
  ClientImpl target(host, port, o_.client);
  Status s = target.Open();
  if (s.ok() && target.owner_slots() != owners_->num_slots())
    s = Status(Code::kProtocolError, "the target has no ownership table of this cluster");
  for (size_t i = 0; s.ok() && i < rec.slots.size(); i += 256) {
    std::string key;
    for (size_t j = i; j < rec.slots.size() && j < i + 256; ++j)
      for (int b = 0; b < 4; ++b) key.push_back(char((rec.slots[j] >> (8 * b)) & 0xff));
    std::string reply, nonce;  // the record's nonce: the target checks it against etcd
    for (int b = 0; b < 8; ++b) nonce.push_back(char((rec.nonce >> (8 * b)) & 0xff));
    s = target.Call(wire::Op::kMigrateBegin, key, nonce, &reply);
  }
  if (!s.ok()) {
    *why = "target " + host + ":" + std::to_string(port) + ": " + s.ToString();
    return false;
  }
  std::vector<bool> in_set(owners_->num_slots(), false);
  for (uint32_t slot : rec.slots) in_set[slot] = true;
  // A kept write (unknown outcome) blocks an ADD_REPLICA copy (checked after the pause): one
  // left in a slot nobody writes again would block it for good, so each is resolved first
  // (resent to the slot's backups and applied here, before the copy reads the table).
  if (rec.CopiesToBackup() && o_.settle_kept)
    for (uint32_t slot : rec.slots) {
      if (Stopping()) {
        *why = "stopping";
        return false;
      }
      if (!o_.settle_kept(slot)) {  // before any copy: the batch would fail after it anyway
        *why = "slot " + std::to_string(slot) +
               " holds a write of unknown outcome that could not be settled yet (its resend "
               "or revert did not reach every backup, a revert to several backups of a value "
               "this table has no room to replace, or the slot was busy)";
        return false;
      }
    }
  const auto start = SteadyClock::now();
  uint64_t bytes = 0, keys = 0, scanned = 0;
  // The coordinator cancels a batch only once these stop changing
  // (server/cluster/progress_watch.h).
  ProgressReporter progress(etcd_, Key("progress"), o_.lease, rec.nonce);
  MigrationProgress::Phase phase = MigrationProgress::kCopy;
  progress.Note(phase, keys, bytes);
  // The copies are pipelined: up to the target's request credits in flight on the connection
  // (the target applies one connection's writes in the order sent). flush() waits for every
  // answer: before the dirty set is taken, before the pause and before the commit, all that
  // was sent is applied at the target. A refusal or a failed connection fails the copy.
  int in_flight = 0;
  auto take = [&]() {
    uint64_t rid = 0;
    std::string reply;
    Status t = target.TakeCall(&rid, &reply);
    --in_flight;
    if (!t.ok() && s.ok()) s = t;
    return s.ok();
  };
  auto flush = [&]() {
    while (in_flight > 0)
      if (!take()) return false;
    return s.ok();
  };
  auto send = [&](const std::string& k, const std::string* v) {
    for (;;) {
      uint64_t rid = 0;
      bool posted = false;
      s = target.PostCall(v ? wire::Op::kMigratePut : wire::Op::kMigrateDelete, k,
                          v ? std::string_view(*v) : std::string_view(), &rid, &posted);
      if (!s.ok()) return false;
      if (posted) break;
      if (in_flight == 0) {  // cannot happen: an idle window takes a request
        s = Status(Code::kIoError, "a copy was not posted with nothing in flight");
        return false;
      }
      if (!take()) return false;
    }
    ++in_flight;
    keys_sent_.fetch_add(1, std::memory_order_relaxed);
    bytes += k.size() + (v ? v->size() : 0);
    progress.Note(phase, ++keys, bytes);
    if (o_.rate_bytes_s > 0) {  // paced: never ahead of rate x elapsed
      const auto due = start + std::chrono::microseconds(bytes * 1000000 / o_.rate_bytes_s);
      if (due > SteadyClock::now()) {  // a stop ends the wait (and the copy)
        std::unique_lock<std::mutex> l(mu_);
        cv_.wait_until(l, due, [this] { return stop_; });
      }
    }
    return s.ok() && !Stopping();
  };
  auto ship_dirty = [&](size_t* count, bool* overflow) {
    std::vector<std::string> keys;
    owners_->TakeDirty(&keys, overflow);
    *count = keys.size();
    std::string value;
    for (const std::string& k : keys) {
      Status g = table_->Get(k, &value);
      if (!send(k, g.ok() ? &value : nullptr)) return false;
    }
    return flush();
  };
  owners_->Track(rec.slots, true);
  auto fail = [&](const std::string& what) {
    owners_->Track(rec.slots, false);
    *why = what + (s.ok() ? std::string() : ": " + s.ToString());
    // No copy stays in flight past the failure (a late one could land after the next
    // attempt's MIGRATE_BEGIN purged the slots): answered, or the connection is gone.
    while (in_flight > 0 && !target.broken()) {  // whatever s says: every answer taken
      uint64_t rid = 0;
      std::string reply;
      (void)target.TakeCall(&rid, &reply);
      --in_flight;
    }
    return false;
  };
  bool rescan = true;
  size_t dirty = 0;
  for (size_t round = 0; round < kDirtyRounds; ++round) {
    if (rescan && (!ScanSlots(
                       *table_, *owners_, in_set,
                       [&](const std::string& k, const std::string& v) { return send(k, &v); },
                       [&](uint64_t b) {
                         progress.Scanned(scanned + b);
                         progress.Note(phase, keys, bytes);
                       }) ||
                   !flush()))
      return fail("copying the slots' entries");
    if (rescan) scanned += table_->geometry().num_buckets + 1;
    rescan = false;
    phase = MigrationProgress::kCatchUp;
    progress.Note(phase, keys, bytes);
    if (!ship_dirty(&dirty, &rescan)) return fail("shipping the keys written meanwhile");
    if (dirty <= kFewDirty && !rescan) break;
  }
  if (rescan) return fail("more keys were written during the copy than the dirty set holds");
  // Writes stay paused while the last keys are shipped: only a short tail may be left for it.
  if (dirty > kMaxPausedKeys)
    return fail("the slots' writes outpace the copy (" + std::to_string(dirty) +
                " keys written in the last round); not pausing them");
  // Pause the slots' writes and wait for the admitted ones; then the last dirty keys are exact.
  const auto deadline = SteadyClock::now() + std::chrono::milliseconds(kPauseWaitMs);
  for (uint32_t slot : rec.slots)
    if (!owners_->Pause(slot, deadline)) {
      for (uint32_t t : rec.slots) ResumeSlot(t);
      return fail(
          "writes admitted before the pause did not finish in time (or a map change "
          "released a slot)");
    }
  phase = MigrationProgress::kPaused;
  progress.Note(phase, keys, bytes);
  bool overflow = false;
  if (!ship_dirty(&dirty, &overflow) || overflow) {
    for (uint32_t t : rec.slots) ResumeSlot(t);
    return fail("shipping the last keys");
  }
  owners_->Track(rec.slots, false);
  // Paused and idle: no write runs in these slots, so none can keep a write until they resume
  // (after the commit, when every write also reaches the new backup).
  for (uint32_t slot : rec.slots)
    if (rec.CopiesToBackup() && o_.has_kept && o_.has_kept(slot)) {
      for (uint32_t t : rec.slots) ResumeSlot(t);
      return fail("slot " + std::to_string(slot) +
                  " holds a write of unknown outcome that this server's table has not taken yet");
    }
  // Nor a slot whose table lacks a write its backups hold (Replicator::LacksWrite, left when
  // settling could not revert it): the copy would carry the older value, and a later failover
  // that keeps both backups would leave them differing by a key no last-write record names
  // (the resync's premise, docs/design.md).
  for (uint32_t slot : rec.slots)
    if (rec.CopiesToBackup() && o_.lacks_write && o_.lacks_write(slot)) {
      for (uint32_t t : rec.slots) ResumeSlot(t);
      return fail("slot " + std::to_string(slot) +
                  " lacks a write its backups hold (not reverted: more than one backup, or "
                  "too many such keys); it is copied once that key is written again");
    }
  progress.Note(MigrationProgress::kCommit, keys, bytes);
  if (rec.CopiesToBackup()) return true;  // still this server's: MOVING
  for (uint32_t slot : rec.slots)
    owners_->Set(slot, OwnerWord(WordEpoch(owners_->Word(slot)), SlotState::kNotOwned));
  std::this_thread::sleep_for(std::chrono::milliseconds(kGraceMs));
  return true;
}
}  // namespace rkv::cluster
