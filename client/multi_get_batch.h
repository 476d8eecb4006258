// SPDX-License-Identifier: Apache-2.0
// MultiGetBatch: what one MultiGet batch (up to Connection::kMaxBatch keys) carries from its
// first round's posting (ClientImpl::StartBatch) to its completion (ClientImpl::FinishBatch),
// so that a cluster MultiGet has every server's first round in flight at once
// (cluster_router_batch.cc). Plain data on the caller's stack or heap; no allocation of its own.
// Thread safety: none (one batch of one connection, one thread).
// Invariant: between StartBatch and FinishBatch the connection carries no other READs.
#ifndef RKV_CLIENT_MULTI_GET_BATCH_H_
#define RKV_CLIENT_MULTI_GET_BATCH_H_

#include <cstddef>
#include <cstdint>
#include <optional>

#include "client/connection.h"
#include "client/read_plan.h"
#include "common/table/entry_location.h"
#include "common/table/layout.h"

namespace rkv {

struct MultiGetBatch {
  // What is left to do for a key: nothing, its second round, the single-key loop, or the check
  // of its cached location's READs.
  enum Next : uint8_t { kDone, kSecond, kSingle, kCached };
  size_t n = 0;                  // keys in the batch
  bool posted = false;           // the first round is in flight (FinishBatch waits for it)
  std::optional<ReadPlan> plan;  // the round in flight (StartBatch sizes it to the region)
  layout::KeyHash kh[Connection::kMaxBatch];
  Next next[Connection::kMaxBatch];
  layout::EntryLocation loc[Connection::kMaxBatch];
  int first_op[Connection::kMaxBatch] = {};
};

}  // namespace rkv

#endif  // RKV_CLIENT_MULTI_GET_BATCH_H_
