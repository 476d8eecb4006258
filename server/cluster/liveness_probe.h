// SPDX-License-Identifier: Apache-2.0
// LivenessProbe: finds a replicated cluster's dead servers sooner than their etcd leases do
// (docs/cluster.md, "Failover and re-replication"). The elected coordinator names the servers
// of its map that are live in etcd (SetTargets: id, address, the lease of the membership
// record); a thread keeps one authenticated connection to each and, every kProbeMs, checks it
// for a disconnect (a dying process's kernel sends one at once) and reads a bucket pair through
// it (a one-sided GET: the server's CPU does nothing). When either fails, it connects once more,
// and decides:
//   - dead: the server's host rejects the connect because nothing listens on the address
//     (rdma_cm REJECTED with IB CM reason 8, invalid service id: the process is gone), or a
//     process with another instance id answers (the one probed was replaced);
//   - nothing: a timeout, an unreachable host, a busy or refusing server, a reset connection.
//     A cut link or a stopped process proves nothing: the lease decides for them.
// FoundDead(id, lease) is then true for that record until SetTargets drops it. The coordinator
// fails the server over at once (and revokes the lease: the record goes). A wrong "dead" would
// cost availability only, never a write or a fresh read: failover is fenced by epochs and the
// promotion fence (docs/design.md, "Replicas and failover").
// Thread safety: every public method from any thread. Ownership: owns its thread and its
// connections; the destructor stops the thread (within one probe's timeouts, about 2 s).
#ifndef RKV_SERVER_CLUSTER_LIVENESS_PROBE_H_
#define RKV_SERVER_CLUSTER_LIVENESS_PROBE_H_

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "rkv/client.h"
#include "rkv/status.h"

namespace rkv {
class ClientImpl;
}

namespace rkv::cluster {

class LivenessProbe {
 public:
  static constexpr int kProbeMs = 200;
  static constexpr int kTimeoutMs = 1000;     // a probe's connect
  static constexpr int kReadTimeoutMs = 500;  // a probe's READ (a timeout only reconnects)
  struct Target {
    uint32_t id = 0;
    int64_t lease = 0;  // the membership record's: a new registration is a new target
    std::string host;
    uint16_t port = 0;
  };
  // `auth_token`: the cluster's (--auth_token_file), empty when authentication is off.
  explicit LivenessProbe(std::string auth_token);
  ~LivenessProbe();
  LivenessProbe(const LivenessProbe&) = delete;
  LivenessProbe& operator=(const LivenessProbe&) = delete;

  // The servers to watch (replaces the set; connections of dropped ones are closed).
  void SetTargets(const std::vector<Target>& targets);
  bool FoundDead(uint32_t id, int64_t lease) const;
  uint64_t found_dead() const { return found_dead_.load(); }  // records found dead, ever

  // Whether a failed connect proves that nothing listens at the address (the process is gone).
  static bool NoListener(const Status& connect_error);

 private:
  struct Probe {
    Target t;
    std::unique_ptr<ClientImpl> conn;
    uint64_t instance = 0;  // the instance id of the process first reached (0: none yet)
    bool dead = false;
  };
  void Loop();
  // One probe of p (no lock held: p is the loop thread's until it is put back).
  void ProbeOnce(Probe* p);

  const Options options_;
  mutable std::mutex mu_;
  std::condition_variable cv_;
  bool stop_ = false;                               // guarded by mu_
  std::vector<Target> targets_;                     // guarded by mu_
  std::vector<std::pair<uint32_t, int64_t>> dead_;  // guarded by mu_: (id, lease) found dead
  std::atomic<uint64_t> found_dead_{0};
  std::thread thread_;
};

}  // namespace rkv::cluster

#endif  // RKV_SERVER_CLUSTER_LIVENESS_PROBE_H_
