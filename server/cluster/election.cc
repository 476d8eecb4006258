// SPDX-License-Identifier: Apache-2.0
#include "server/cluster/election.h"

#include <chrono>
#include <cstdio>
#include <vector>

namespace rkv::cluster {

std::string Election::Key() const {
  char hex[17];
  std::snprintf(hex, sizeof hex, "%016llx", static_cast<unsigned long long>(lease_));
  return prefix_ + hex;
}

EtcdClient::Compare Election::StillLeader() const {
  return {Key(), EtcdClient::Compare::kCreateRevision, EtcdClient::Compare::kEqual, token_, {}};
}

Status Election::Campaign(const std::string& value, int timeout_ms,
                          const std::function<bool()>& interrupt) {
  using Clock = std::chrono::steady_clock;
  const auto deadline = Clock::now() + std::chrono::milliseconds(timeout_ms);
  const std::string key = Key();
  leading_ = false;
  if (!waiting_on_.empty() && resumes_ < kMaxResumes) {
    ++resumes_;
    Status s = WaitForBefore(deadline, interrupt);
    if (s.code() == Code::kTimeout) return s;  // still waiting: the next call goes on
    waiting_on_.clear();
    if (!s.ok()) return s;
    // The candidate before this one went: read the line again below.
  }
  waiting_on_.clear();
  resumes_ = 0;
  // Stand: create the key under the lease unless it exists (a second Campaign keeps it, and
  // with it its place in the line).
  using C = EtcdClient::Compare;
  bool created = false;
  Status s = etcd_->Txn({C{key, C::kCreateRevision, C::kEqual, 0, {}}},
                        {EtcdClient::Op::Put(key, value, lease_)}, {}, &created);
  if (!s.ok()) return s;
  bool found = false;
  EtcdKv mine;
  s = etcd_->Get(key, &found, &mine, nullptr);
  if (!s.ok()) return s;
  if (!found || mine.lease != lease_)
    return Status(Code::kIoError, "election: this candidate's key is gone (its lease expired?)");
  token_ = mine.create_revision;
  for (;;) {
    std::vector<EtcdKv> all;
    int64_t revision = 0;
    bool more = false;
    s = etcd_->GetPrefix(prefix_, &all, &revision, true, &more);
    if (!s.ok()) return s;
    if (more) return Status(Code::kIoError, "election: more candidates than one read returns");
    // The candidate just before this one in line: the largest create revision below ours.
    const EtcdKv* before = nullptr;
    bool still_here = false;
    for (const EtcdKv& kv : all) {
      if (kv.key == key) still_here = kv.create_revision == token_;
      if (kv.create_revision < token_ &&
          (before == nullptr || kv.create_revision > before->create_revision))
        before = &kv;
    }
    if (!still_here)
      return Status(Code::kIoError, "election: this candidate's key is gone (its lease expired?)");
    if (before == nullptr) {
      leading_ = true;
      return Status::Ok();
    }
    // Wait for that key's deletion (resigned, or its lease expired), then look again.
    waiting_on_ = before->key;
    wait_from_ = revision + 1;
    s = WaitForBefore(deadline, interrupt);
    if (s.code() == Code::kTimeout) return s;  // the next call goes on waiting for it
    waiting_on_.clear();
    if (!s.ok()) return s;
  }
}

Status Election::WaitForBefore(std::chrono::steady_clock::time_point deadline,
                               const std::function<bool()>& interrupt) {
  const int left = int(std::chrono::duration_cast<std::chrono::milliseconds>(
                           deadline - std::chrono::steady_clock::now())
                           .count());
  if (left <= 0) return Status(Code::kTimeout, "election: another candidate leads");
  const std::string watched = waiting_on_;
  Status s = etcd_->Watch(
      watched, false, wait_from_, left,
      [&](const std::vector<EtcdEvent>& events, int64_t) {
        for (const EtcdEvent& e : events)
          if (e.deleted && e.kv.key == watched) return true;
        return false;
      },
      interrupt);
  if (s.code() == Code::kTimeout)
    return Status(Code::kTimeout, "election: another candidate leads");
  return s;
}

Status Election::Resign() {
  leading_ = false;
  bool ok = false;
  // Only our own key, with our revision (never a newer candidacy under the same lease).
  return etcd_->Txn({StillLeader()}, {EtcdClient::Op::Delete(Key())}, {}, &ok);
}

Status Election::Leader(EtcdClient* etcd, const std::string& prefix, std::string* value,
                        int64_t* token, bool* any) {
  *any = false;
  std::vector<EtcdKv> all;
  bool more = false;
  Status s = etcd->GetPrefix(prefix, &all, nullptr, false, &more);
  if (!s.ok()) return s;
  if (more) return Status(Code::kIoError, "election: more candidates than one read returns");
  const EtcdKv* first = nullptr;
  for (const EtcdKv& kv : all)
    if (first == nullptr || kv.create_revision < first->create_revision) first = &kv;
  if (first == nullptr) return Status::Ok();
  *any = true;
  *value = first->value;
  *token = first->create_revision;
  return Status::Ok();
}

}  // namespace rkv::cluster
