// SPDX-License-Identifier: Apache-2.0
#include "server/cluster/ring_loss_reporter.h"

#include <glog/logging.h>

#include <chrono>
#include <string>
#include <utility>
#include <vector>

#include "common/cluster/ring_loss_record.h"

namespace rkv::cluster {

RingLossReporter::RingLossReporter(RingLossReporterOptions o) : o_(std::move(o)) {
  CHECK(o_.etcd != nullptr && o_.owners != nullptr && o_.lease && o_.map_epoch);
  thread_ = std::thread([this] { Loop(); });
}

RingLossReporter::~RingLossReporter() {
  {
    std::lock_guard<std::mutex> l(mu_);
    stop_ = true;
  }
  cv_.notify_all();
  if (thread_.joinable()) thread_.join();
}

void RingLossReporter::Loop() {
  std::unique_lock<std::mutex> l(mu_);
  int wait_ms = kCheckMs;
  while (!cv_.wait_for(l, std::chrono::milliseconds(wait_ms), [this] { return stop_; })) {
    l.unlock();
    const bool ok = Check();
    l.lock();
    wait_ms = ok ? kCheckMs : kRetryMs;
  }
}

bool RingLossReporter::Check() {
  const uint64_t gen = o_.owners->RingLossGeneration();
  const int64_t lease = o_.lease();
  const auto now = std::chrono::steady_clock::now();
  const bool refresh = in_etcd_ && now - put_at_ >= std::chrono::milliseconds(kRefreshMs);
  if (gen == put_gen_ && (lease == put_lease_ || !in_etcd_) && !refresh) return true;
  if (lease == 0) return true;  // not registered now: put once it is (under its lease)
  RingLossRecord r;
  r.server = o_.my_id;
  r.map_epoch = o_.map_epoch();
  r.slots = o_.owners->RingLossSlots();
  const std::string key = o_.cluster.Prefix() + r.KeySuffix();
  Status s;
  if (r.slots.empty()) {
    if (in_etcd_) s = o_.etcd->Delete(key);
  } else {
    std::string value;
    s = r.Encode(&value);
    // A refresh reads first and puts only when the record is gone or differs (a put would
    // wake the coordinator's watch of the prefix every time).
    bool same = false;
    if (s.ok() && in_etcd_ && gen == put_gen_ && lease == put_lease_) {
      bool found = false;
      EtcdKv kv;
      s = o_.etcd->Get(key, &found, &kv, nullptr);
      same = s.ok() && found && kv.value == value && kv.lease == lease;
    }
    if (s.ok() && !same) s = o_.etcd->Put(key, value, lease);
  }
  if (!s.ok()) {
    failures_.fetch_add(1);
    LOG_EVERY_N(WARNING, 10) << "reporting the slots that may lack a write (" << key
                             << "): " << s.ToString();
    return false;
  }
  if (r.slots.empty() && !in_etcd_) {
    put_gen_ = gen;
    return true;
  }
  put_at_ = now;
  if (!r.slots.empty() && in_etcd_ && gen == put_gen_ && lease == put_lease_)
    return true;  // refreshed
  LOG(WARNING) << (r.slots.empty() ? "no slot lacks a write any more: deleted "
                                   : "slots that may lack an acknowledged write (" +
                                         std::to_string(r.slots.size()) + ") reported at ")
               << key;
  in_etcd_ = !r.slots.empty();
  put_gen_ = gen;
  put_lease_ = lease;
  reported_.store(uint32_t(r.slots.size()));
  reports_.fetch_add(1);
  return true;
}

}  // namespace rkv::cluster
