// SPDX-License-Identifier: Apache-2.0
// RingLink: a primary's log ring on one of its workers' replication links (one-sided
// replication; docs/replication-rings.md; server/conn/replica_fast_path.h). The backup grants
// the ring (RING_GRANT, on the connector thread once the link is open); from then on a write
// whose record may go to the ring is placed there with one RDMA WRITE chain instead of a
// REPLICATE send, and the chain's completion is that backup's OK. A record goes to the ring
// only when
//   - the write's epoch e is at least the grant's epoch G (this server had applied the map the
//     backup had when it granted: a deposed writer cannot use a ring granted after the map
//     that deposed it), and at most the epoch the backup last said it applied completely (its
//     control block: a record is never acknowledged at an epoch the backup has not applied);
//   - it fits (an eighth of the ring, and the connection's staging area) and the ring has room
//     by what the backup last said it consumed.
// Otherwise the write goes two-sided on the same link, and a READ of the control block is
// posted after it (AskControl) so that the next write knows more. A chain whose used room
// passes half the ring carries such a READ too.
// Thread safety: Grant on the connector thread before the link is handed to the worker; the
// rest on the worker thread. Ownership: borrows the link's connection for each call.
#ifndef RKV_SERVER_CONN_REPLICA_RING_LINK_H_
#define RKV_SERVER_CONN_REPLICA_RING_LINK_H_

#include <cstdint>
#include <memory>

#include "client/connection.h"
#include "common/cluster/ring_tail.h"
#include "rkv/status.h"
#include "server/cluster/replicator.h"

namespace rkv {

class ClientImpl;

class RingLink {
 public:
  // Asks the link's backup for a ring (RING_GRANT naming `writer`, this server's id, at map
  // `epoch`). An error: none (the link stays two-sided).
  [[nodiscard]] static Status Grant(ClientImpl* client, uint32_t writer, uint64_t epoch,
                                    std::unique_ptr<RingLink>* out);
  // Posts fw's record to the ring when it may go there now (*posted true); else does nothing
  // (*posted false: send it two-sided). An error: the post failed (the link is broken).
  [[nodiscard]] Status TryPost(Connection* c, const cluster::Replicator::FastWrite& fw,
                               bool* posted);
  // After a two-sided send: a READ of the control block, unless one is out already.
  [[nodiscard]] Status AskControl(Connection* c);
  // Once the link's ring chains completed: takes what the last READ brought.
  void TakeControl(const Connection& c);
  bool usable() const { return !broken_; }
  uint64_t known_epoch() const { return known_epoch_; }

 private:
  RingLink(uint32_t rkey, size_t size, uint64_t grant_epoch)
      : rkey_(rkey), grant_epoch_(grant_epoch), known_epoch_(grant_epoch), tail_(size) {}

  const uint32_t rkey_;
  const uint64_t grant_epoch_;
  uint64_t known_epoch_;  // the newest epoch the backup said it applied
  cluster::RingTail tail_;
  bool read_out_ = false;  // a READ of the control block is posted and not yet taken
  bool broken_ = false;    // the control block said something impossible: not used again
};

}  // namespace rkv

#endif  // RKV_SERVER_CONN_REPLICA_RING_LINK_H_
