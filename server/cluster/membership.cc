// SPDX-License-Identifier: Apache-2.0
#include "server/cluster/membership.h"

#include <glog/logging.h>

#include <chrono>

#include "common/secure_random.h"

namespace rkv::cluster {

Status Membership::Join(const Options& o, std::unique_ptr<Membership>* out) {
  if (o.lease_ttl_s < 2 || o.lease_ttl_s > 60)
    return Status(Code::kInvalidArgument, "cluster lease TTL must be 2..60 s");
  EtcdSettings e = o.etcd;
  e.endpoints = o.cluster.endpoints;
  std::unique_ptr<EtcdClient> c;
  Status s = EtcdClient::Open(e, &c);
  if (!s.ok()) return s;
  std::unique_ptr<Membership> m(new Membership(o, std::move(c)));
  m->record_.host = o.host;
  m->record_.port = o.port;
  m->record_.zone = o.zone;
  s = SecureRandom::Fill(reinterpret_cast<uint8_t*>(&m->record_.instance),
                         sizeof m->record_.instance);
  if (!s.ok()) return s;
  bool found = false;
  EtcdKv kv;
  s = m->etcd_->Get(m->Key("map"), &found, &kv, nullptr);
  if (!s.ok()) return s;
  if (!found)
    return Status(Code::kNotFound, "cluster '" + o.cluster.name +
                                       "' does not exist in etcd (create it with kvctl cluster "
                                       "init)");
  s = m->AllocateId();
  if (!s.ok()) return s;
  s = m->Register();
  if (!s.ok()) return s;
  m->thread_ = std::thread([p = m.get()] { p->KeepAliveLoop(); });
  *out = std::move(m);
  return Status::Ok();
}

namespace {
int64_t NowNs() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}
}  // namespace

Membership::State Membership::state() const {
  if (state_.load() == State::kRegistered && NowNs() > lease_valid_until_ns_.load())
    return State::kLost;  // no keepalive answered within the TTL: the record may be gone
  return state_.load();
}

Membership::~Membership() {
  {
    std::lock_guard<std::mutex> l(mu_);
    stop_ = true;
  }
  cv_.notify_all();
  if (thread_.joinable()) thread_.join();
  if (lease_ != 0) {
    Status s = etcd_->RevokeLease(lease_);  // the record goes at once, not at the TTL
    if (!s.ok()) LOG(WARNING) << "cluster: revoking the membership lease: " << s.message();
  }
}

Status Membership::AllocateId() {
  const std::string addr = record_.host + ":" + std::to_string(record_.port);
  const std::string id_key = Key("ids/" + addr), next_key = Key("next_id");
  // Bounded: each failed round means another server allocated meanwhile.
  for (int attempt = 0; attempt < 64; ++attempt) {
    bool found = false;
    EtcdKv kv;
    Status s = etcd_->Get(id_key, &found, &kv, nullptr);
    if (!s.ok()) return s;
    if (found) {
      if (!DecodeId(kv.value, &record_.id))
        return Status(Code::kProtocolError, "cluster: " + id_key + " does not hold an id");
      return Status::Ok();
    }
    EtcdKv next;
    s = etcd_->Get(next_key, &found, &next, nullptr);
    if (!s.ok()) return s;
    uint32_t id = 1;
    if (found && !DecodeId(next.value, &id))
      return Status(Code::kProtocolError, "cluster: " + next_key + " does not hold an id");
    using C = EtcdClient::Compare;
    bool won = false;
    s = etcd_->Txn({C{next_key, C::kModRevision, C::kEqual, found ? next.mod_revision : 0, {}},
                    C{id_key, C::kCreateRevision, C::kEqual, 0, {}}},
                   {EtcdClient::Op::Put(next_key, EncodeId(id + 1)),
                    EtcdClient::Op::Put(id_key, EncodeId(id))},
                   {}, &won);
    if (!s.ok()) return s;
    if (won) {
      record_.id = id;
      return Status::Ok();
    }
  }
  return Status(Code::kIoError, "cluster: could not allocate a server id in 64 attempts");
}

Status Membership::Register() {
  std::string value;
  Status s = record_.Encode(&value);
  if (!s.ok()) return s;
  int64_t lease = 0;
  const int64_t granted_at = NowNs();
  s = etcd_->GrantLease(o_.lease_ttl_s, &lease);
  if (!s.ok()) return s;
  const std::string key = Key("servers/" + std::to_string(record_.id));
  using C = EtcdClient::Compare;
  bool created = false;
  s = etcd_->Txn({C{key, C::kCreateRevision, C::kEqual, 0, {}}},
                 {EtcdClient::Op::Put(key, value, lease)}, {}, &created);
  if (s.ok() && !created) {
    // Ours already? A first run of this transaction whose answer was lost (same lease), or our
    // own record under a lease we gave up on (revoke it: its record goes, and we try again).
    bool found = false;
    EtcdKv kv;
    MemberRecord there;
    s = etcd_->Get(key, &found, &kv, nullptr);
    if (s.ok() && found && MemberRecord::Decode(kv.value, &there).ok() &&
        there.instance == record_.instance) {
      if (kv.lease == lease) {
        created = true;
      } else {
        s = etcd_->RevokeLease(kv.lease);
        if (s.ok())
          s = etcd_->Txn({C{key, C::kCreateRevision, C::kEqual, 0, {}}},
                         {EtcdClient::Op::Put(key, value, lease)}, {}, &created);
      }
    }
  }
  if (s.ok() && !created)
    s = Status(Code::kBusy,
               "cluster: server id " + std::to_string(record_.id) + " (" + record_.host + ":" +
                   std::to_string(record_.port) +
                   ") is registered by a live process; it is released when that process stops "
                   "or its lease expires (" +
                   std::to_string(o_.lease_ttl_s) + " s)");
  if (!s.ok()) {
    (void)etcd_->RevokeLease(lease);
    return s;
  }
  lease_ = lease;
  lease_valid_until_ns_.store(granted_at + int64_t(o_.lease_ttl_s) * 1000000000);
  state_.store(State::kRegistered);
  return Status::Ok();
}

void Membership::KeepAliveLoop() {
  const auto period = std::chrono::milliseconds(o_.lease_ttl_s * 1000 / 3);
  std::unique_lock<std::mutex> l(mu_);
  while (!cv_.wait_for(l, period, [this] { return stop_; })) {
    l.unlock();
    if (state_.load() == State::kRegistered) {
      int64_t ttl = 0;
      const int64_t sent = NowNs();
      Status s = etcd_->KeepAlive(lease_, &ttl);
      if (s.ok() && ttl > 0) lease_valid_until_ns_.store(sent + ttl * 1000000000);
      if (s.ok() && ttl == 0) {
        LOG(WARNING) << "cluster: membership lease " << lease_
                     << " expired (cut off from etcd longer than its TTL?); registering again";
        lease_ = 0;
        state_.store(State::kLost);
      } else if (!s.ok()) {
        LOG_EVERY_N(WARNING, 10) << "cluster: lease keepalive: " << s.message();
        if (NowNs() > lease_valid_until_ns_.load()) {
          // Past the TTL without an answer: the record may be gone; stand again (a new lease;
          // our old record, if it survived, is recognised and replaced).
          state_.store(State::kLost);
        }
      }
    }
    if (state_.load() == State::kLost) {
      Status s = Register();
      if (s.ok()) {
        reregistrations_.fetch_add(1);
        LOG(INFO) << "cluster: registered again as server " << record_.id;
      } else {
        LOG_EVERY_N(WARNING, 10) << "cluster: registering again: " << s.message();
      }
    }
    l.lock();
  }
}

}  // namespace rkv::cluster
