// SPDX-License-Identifier: Apache-2.0
#include "server/cluster/disk_step_down.h"

#include <glog/logging.h>

#include <algorithm>

#include "common/cluster/drain_record.h"

namespace rkv::cluster {

DiskStepDown::DiskStepDown(DiskStepDownOptions o) : o_(std::move(o)) {
  CHECK(o_.etcd && o_.lease && o_.map_epoch && o_.failures && o_.broken && o_.probe);
  CHECK(o_.check_ms > 0 && o_.first_hold_ms > 0 && o_.max_hold_ms >= o_.first_hold_ms);
  last_failures_ = o_.failures();
  hold_ms_ = o_.first_hold_ms;
  thread_ = std::thread([this] { Loop(); });
}

DiskStepDown::~DiskStepDown() {
  {
    std::lock_guard<std::mutex> l(mu_);
    stop_ = true;
  }
  cv_.notify_all();
  thread_.join();
}

std::string DiskStepDown::Key() const {
  DrainRecord r;
  r.server = o_.my_id;
  return o_.cluster.Prefix() + r.KeySuffix();
}

void DiskStepDown::Loop() {
  std::unique_lock<std::mutex> l(mu_);
  while (!stop_) {
    l.unlock();
    Check(SteadyClock::now());
    l.lock();
    cv_.wait_for(l, std::chrono::milliseconds(o_.check_ms), [this] { return stop_; });
  }
}

Status DiskStepDown::PutRecord(bool* put) {
  // After a put whose answer was lost, the same bytes again (the map's epoch may have moved
  // since, by the failover that record caused), so that reading them back recognises it.
  Status s;
  if (!ambiguous_) {
    DrainRecord d;
    d.server = o_.my_id;
    d.map_epoch = o_.map_epoch();
    s = d.Encode(&tried_);
    if (!s.ok()) return s;
  }
  const std::string& value = tried_;
  const int64_t lease = o_.lease();
  EtcdClient::Compare absent;
  absent.key = Key();
  absent.target = EtcdClient::Compare::kCreateRevision;
  absent.number = 0;
  int64_t rev = 0;
  s = o_.etcd->Txn({absent}, {EtcdClient::Op::Put(Key(), value, lease)}, {}, put, &rev);
  if (!s.ok()) {
    // Maybe applied (the answer lost): the next try finds the key and reads it back.
    ambiguous_ = true;
    return s;
  }
  put_lease_ = lease;
  put_rev_ = *put ? rev : 0;
  if (!*put && ambiguous_) {
    // The key exists: this class's own earlier put whose answer was lost (the same bytes under
    // this lease), or a removal's record. Only the first is this class's to delete later.
    bool found = false;
    EtcdKv kv;
    s = o_.etcd->Get(Key(), &found, &kv, nullptr);
    if (!s.ok()) return s;
    if (found && kv.lease == lease && kv.value == value) {
      *put = true;
      put_rev_ = kv.mod_revision;
    }
  }
  ambiguous_ = false;
  return Status::Ok();
}

Status DiskStepDown::DeleteRecord(bool* deleted) {
  EtcdClient::Compare same;
  same.key = Key();
  same.target = EtcdClient::Compare::kModRevision;
  same.number = put_rev_;
  return o_.etcd->Txn({same}, {EtcdClient::Op::Delete(Key())}, {}, deleted);
}

void DiskStepDown::Check(SteadyClock::time_point now) {
  const uint64_t failures = o_.failures();
  const Status broken = o_.broken();
  const bool failed = failures > last_failures_;
  last_failures_ = failures;
  const auto hold = [this] { return std::chrono::milliseconds(hold_ms_); };
  switch (state_) {
    case State::kHealthy:
      if (broken.ok()) {
        // A failure streak: failures seen at checks at least kConfirmMs apart, none more than
        // kStreakGapMs after the previous one. One passing failure (a snapshot that filled the
        // disk for a moment) costs its writes, not a failover and a re-replication.
        if (!failed) return;
        if (streak_start_ == SteadyClock::time_point{} ||
            now - last_failure_ > std::chrono::milliseconds(kStreakGapMs))
          streak_start_ = now;
        last_failure_ = now;
        if (now - streak_start_ < std::chrono::milliseconds(kConfirmMs)) return;
      }
      streak_start_ = {};
      // Down again soon after it came back: the disk is not well yet; wait longer this time.
      hold_ms_ =
          returns_.load() > 0 && now - returned_at_ < std::chrono::milliseconds(o_.max_hold_ms)
              ? std::min(hold_ms_ * 2, o_.max_hold_ms)
              : o_.first_hold_ms;
      why_ = broken.ok() ? "the write-ahead log failed (" + std::to_string(failures) +
                               " failed record(s) so far)"
                         : broken.ToString();
      state_ = State::kStepping;
      down_.store(true);
      step_downs_.fetch_add(1);
      LOG(WARNING) << "cluster: server " << o_.my_id << " steps down from its replicas: " << why_
                   << "; its primaries fail over to their backups (" << Key() << ")";
      [[fallthrough]];
    case State::kStepping: {
      if (o_.lease() == 0) return;  // not registered now: put once it is
      bool put = false;
      Status s = PutRecord(&put);
      if (!s.ok()) {
        LOG(WARNING) << "cluster: stepping down: put " << Key() << ": " << s.ToString()
                     << " (tried again)";
        return;
      }
      ours_ = put;
      if (!put)
        LOG(INFO) << "cluster: " << Key() << " already exists (a removal): the server drains";
      state_ = State::kDown;
      next_probe_ = now + hold();
      return;
    }
    case State::kDown: {
      if (o_.lease() != put_lease_) {  // registered again: the record went with the old lease
        state_ = State::kStepping;
        return;
      }
      if (failed) next_probe_ = std::max(next_probe_, now + hold());  // still failing
      if (now < next_probe_) return;
      if (!broken.ok()) {  // refuses every record until a restart: stays down
        next_probe_ = now + std::chrono::milliseconds(o_.max_hold_ms);
        return;
      }
      Status s = o_.probe();
      if (!s.ok()) {
        hold_ms_ = std::min(hold_ms_ * 2, o_.max_hold_ms);
        next_probe_ = now + hold();
        LOG(WARNING) << "cluster: the data directory still fails (" << s.ToString()
                     << "); the next probe in " << hold_ms_ / 1000 << " s";
        return;
      }
      state_ = State::kReturning;
      [[fallthrough]];
    }
    case State::kReturning: {
      if (failed) {  // failing again before the record went: stays down, waits longer
        hold_ms_ = std::min(hold_ms_ * 2, o_.max_hold_ms);
        next_probe_ = now + hold();
        state_ = State::kDown;
        return;
      }
      if (ours_) {
        bool deleted = false;
        Status s = DeleteRecord(&deleted);
        if (!s.ok()) {
          LOG(WARNING) << "cluster: delete " << Key() << ": " << s.ToString() << " (tried again)";
          return;
        }
        if (!deleted)
          LOG(INFO) << "cluster: " << Key() << " was replaced (a removal): left in place";
      }
      state_ = State::kHealthy;
      down_.store(false);
      returned_at_ = now;
      returns_.fetch_add(1);
      LOG(INFO) << "cluster: the data directory takes writes again: server " << o_.my_id
                << " may hold replicas again";
      return;
    }
  }
}

}  // namespace rkv::cluster
