// SPDX-License-Identifier: Apache-2.0
// Membership: a kvserver's place in a cluster's etcd state (docs/cluster.md, "Membership").
//
// Join: checks that the cluster exists (NAME/map), finds or allocates this server's id (a
// stable id per HOST:PORT: NAME/ids/HOST:PORT, allocated from NAME/next_id by one transaction
// that compares both keys' revisions, so two joining servers never get the same id), grants a
// lease of lease_ttl_s and creates NAME/servers/ID (a MemberRecord) under it, only if no live
// server holds that id (create-if-absent: a second process on the same address is refused
// until the first one's lease expires). A thread keeps the lease alive every ttl/3; when etcd
// says the lease is gone (the server was partitioned from etcd longer than its TTL, or someone
// revoked it), state() becomes kLost and the thread registers again under a new lease
// (kRegistered once that succeeds). While etcd cannot be reached, state() turns kLost by this
// process's own clock once the lease's TTL has passed since the last keepalive etcd answered
// (sent time + the TTL it granted): a server never believes it is registered longer than its
// record can live. A registration whose answer was lost and that ran twice (the transport
// retries on another member) is recognised by the record's instance id and lease. The
// destructor stops the thread and revokes the lease (the record disappears at once).
// Lifecycle (State): kRegistered <-> kLost -> (destructor) gone.
// Thread safety: id(), state() and Describe() from any thread; the rest from the owner.
// Ownership: owns its EtcdClient and its keepalive thread; waits: every etcd call has its
// deadline (EtcdClient::kCallTimeoutMs), the thread's sleeps end at once on destruction.
#ifndef RKV_SERVER_CLUSTER_MEMBERSHIP_H_
#define RKV_SERVER_CLUSTER_MEMBERSHIP_H_

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <thread>

#include "common/cluster/cluster_address.h"
#include "common/cluster/member_record.h"
#include "common/etcd/etcd_client.h"
#include "rkv/status.h"

namespace rkv::cluster {

class Membership {
 public:
  enum class State : int { kRegistered, kLost };
  struct Options {
    ClusterAddress cluster;
    EtcdSettings etcd;  // TLS and auth; endpoints come from `cluster`
    std::string host;   // the address clients dial (as in --listen)
    uint16_t port = 0;
    std::string zone;
    int lease_ttl_s = 5;  // 2..60
  };

  [[nodiscard]] static Status Join(const Options& o, std::unique_ptr<Membership>* out);
  ~Membership();
  Membership(const Membership&) = delete;
  Membership& operator=(const Membership&) = delete;

  uint32_t id() const { return record_.id; }
  State state() const;
  // Times the lease was found lost and registered again.
  uint64_t reregistrations() const { return reregistrations_.load(); }
  const MemberRecord& record() const { return record_; }
  // The current lease (0 while lost): an election candidacy lives under it.
  int64_t lease() const { return lease_.load(); }
  EtcdClient& etcd() { return *etcd_; }

 private:
  Membership(Options o, std::unique_ptr<EtcdClient> c) : o_(std::move(o)), etcd_(std::move(c)) {}
  // Finds or allocates record_.id.
  Status AllocateId();
  // Grants a lease and creates NAME/servers/ID under it (refused if a live server holds it).
  Status Register();
  void KeepAliveLoop();
  std::string Key(const std::string& rest) const { return o_.cluster.Prefix() + rest; }

  const Options o_;
  std::unique_ptr<EtcdClient> etcd_;
  MemberRecord record_;
  std::atomic<int64_t> lease_{0};  // written by the keepalive thread after Join; 0 while lost
  std::atomic<State> state_{State::kRegistered};
  // steady_clock nanoseconds after which the lease may have expired at etcd.
  std::atomic<int64_t> lease_valid_until_ns_{0};
  std::atomic<uint64_t> reregistrations_{0};
  std::mutex mu_;
  std::condition_variable cv_;
  bool stop_ = false;  // guarded by mu_
  std::thread thread_;
};

}  // namespace rkv::cluster

#endif  // RKV_SERVER_CLUSTER_MEMBERSHIP_H_
