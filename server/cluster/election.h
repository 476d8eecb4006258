// SPDX-License-Identifier: Apache-2.0
// Election: one leader among candidates, by etcd's election pattern (etcd's
// client/v3/concurrency Election; docs/cluster.md, "The coordinator"). No consensus of ours:
// etcd orders the candidates.
//
// Each candidate puts PREFIX<lease in hex> under its own lease (create-if-absent, so a
// candidate's key is created once per lease). The candidate whose key has the lowest create
// revision leads; the others each watch the key just before theirs and look again when it is
// deleted (its holder resigned, or its lease expired). The leader's create revision is its
// fencing token: every decision it makes is a transaction that includes StillLeader() (its key
// exists with that create revision), so a leader whose lease expired (paused, partitioned)
// can decide nothing more, even before it learns that it lost.
// Thread safety: one thread uses an Election at a time. Waits: Campaign has a deadline.
// Ownership: borrows the EtcdClient (outlives this); the lease belongs to the caller (its expiry
// ends the candidacy).
#ifndef RKV_SERVER_CLUSTER_ELECTION_H_
#define RKV_SERVER_CLUSTER_ELECTION_H_

#include <chrono>
#include <cstdint>
#include <functional>
#include <string>

#include "common/etcd/etcd_client.h"
#include "rkv/status.h"

namespace rkv::cluster {

class Election {
 public:
  // prefix: the election's key prefix, ending in '/'; lease: the candidate's lease.
  Election(EtcdClient* etcd, std::string prefix, int64_t lease)
      : etcd_(etcd), prefix_(std::move(prefix)), lease_(lease) {}

  // Stands (creates this candidate's key with `value` if it does not exist yet) and waits at
  // most timeout_ms to lead. OK: this candidate leads; kTimeout: not yet (call again); an error
  // from etcd otherwise (the key is gone if the lease expired: call again with a new lease).
  // A call after a kTimeout goes on watching the key it waited for from where it left off,
  // without reading etcd (one watch call), up to kMaxResumes calls in a row; then it stands
  // and reads the line again (a safety net: e.g. this candidate's key deleted by hand). The
  // resumed watch starts from the revision of the last read: with other writes to etcd
  // meanwhile, etcd replays them to it (a catch-up it runs every 100 ms), so the deletion may
  // reach this candidate up to ~100 ms later than a fresh watch would.
  // interrupt (may be empty; must not throw): looked at every ~20 ms while waiting; true ends
  // the call (kTimeout).
  [[nodiscard]] Status Campaign(const std::string& value, int timeout_ms,
                                const std::function<bool()>& interrupt = nullptr);
  bool leading() const { return leading_; }
  // The create revision of this candidate's key (0 before Campaign).
  int64_t fencing_token() const { return token_; }
  // The compare each decision's transaction includes: this candidate's key still exists with
  // its create revision.
  EtcdClient::Compare StillLeader() const;
  // Deletes this candidate's key: the next candidate leads.
  [[nodiscard]] Status Resign();

  // The current leader's value and fencing token; *any false when nobody stands.
  [[nodiscard]] static Status Leader(EtcdClient* etcd, const std::string& prefix,
                                     std::string* value, int64_t* token, bool* any);

 private:
  static constexpr int kMaxResumes = 25;
  std::string Key() const;
  // Waits until `deadline` for the deletion of waiting_on_ (watched from wait_from_): OK when
  // it went, kTimeout, or an etcd error.
  [[nodiscard]] Status WaitForBefore(std::chrono::steady_clock::time_point deadline,
                                     const std::function<bool()>& interrupt);

  EtcdClient* const etcd_;
  const std::string prefix_;
  const int64_t lease_;
  int64_t token_ = 0;
  bool leading_ = false;
  std::string waiting_on_;  // the candidate before this one, while a Campaign timed out on it
  int64_t wait_from_ = 0;   // the revision its watch goes on from
  int resumes_ = 0;         // calls in a row that went on waiting without a read
};

}  // namespace rkv::cluster

#endif  // RKV_SERVER_CLUSTER_ELECTION_H_
