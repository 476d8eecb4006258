// SPDX-License-Identifier: Apache-2.0
// WriteBatch: the PUTs and DELETEs of one Execute batch on one connection, between
// ClientImpl::PostWrites (posts as many as the server's credits allow), TakeWrite (takes one
// reply and decides its operation) and FailWrites (the connection failed: each undecided write
// is "outcome unknown" or "not sent"). Single-server Execute (batch.cc) and a cluster's
// Execute (cluster_router_batch.cc, one batch per server, all in flight at once) drive them.
// Thread safety: none (one connection, one thread). Ownership: borrows `ops`, which outlives it.
// Invariants: in <= Connection::kMaxPipeline; writes[0..next) were posted, of which the `in`
// listed in inflight are not yet answered.
#ifndef RKV_CLIENT_WRITE_BATCH_H_
#define RKV_CLIENT_WRITE_BATCH_H_

#include <cstddef>
#include <cstdint>
#include <vector>

#include "client/connection.h"
#include "rkv/client.h"

namespace rkv {

struct WriteBatch {
  BatchOp* ops = nullptr;
  std::vector<size_t> writes;  // indexes into ops, in the order they are sent
  size_t next = 0;             // the next write to post
  struct InFlight {
    uint64_t rid;
    size_t op;
    uint64_t key_hash;
  };
  InFlight inflight[Connection::kMaxPipeline];
  int in = 0;
  bool done() const { return in == 0 && next >= writes.size(); }
};

}  // namespace rkv

#endif  // RKV_CLIENT_WRITE_BATCH_H_
