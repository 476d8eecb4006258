// SPDX-License-Identifier: Apache-2.0
// Connection's log ring chains (one-sided replication; docs/replication-rings.md): WRITEs of
// staged bytes to a backup's ring and a READ of its control block, one signalled completion
// per chain (PollReply takes it).
#include <string>

#include "client/connection.h"
#include "client/wr_id.h"
#include "common/cluster/ring_record.h"

namespace rkv {

using namespace wr_id;  // NOLINT(build/namespaces): this class's own ids

Status Connection::PostRingChain(uint32_t rkey, const RingPiece* pieces, int n, bool read_control) {
  if (state_ != State::kConnected) return Status(Code::kConnectionLost, "connection is broken");
  constexpr int kMaxPieces = 2;
  if (n < 0 || n > kMaxPieces || (n == 0 && !read_control))
    return Status(Code::kInvalidArgument, "bad ring chain");
  ibv_sge sge[kMaxPieces + 1];
  ibv_send_wr wr[kMaxPieces + 1];
  int k = 0;
  for (; k < n; ++k) {
    if (uint64_t{pieces[k].staging_offset} + pieces[k].length > kRingStagingSize)
      return Status(Code::kInvalidArgument, "a ring piece outside the staging area");
    sge[k] = {reinterpret_cast<uint64_t>(ring_staging() + pieces[k].staging_offset),
              pieces[k].length, mr_->lkey};
    wr[k] = {};
    wr[k].wr_id = kRing;
    wr[k].sg_list = &sge[k];
    wr[k].num_sge = 1;
    wr[k].opcode = IBV_WR_RDMA_WRITE;
    wr[k].wr.rdma.remote_addr = pieces[k].remote_offset;  // zero-based
    wr[k].wr.rdma.rkey = rkey;
  }
  if (read_control) {
    sge[k] = {reinterpret_cast<uint64_t>(buf_.get() + kSendArea + kRingStagingSize),
              uint32_t(cluster::kRingControlBytes), mr_->lkey};
    wr[k] = {};
    wr[k].wr_id = kRing;
    wr[k].sg_list = &sge[k];
    wr[k].num_sge = 1;
    wr[k].opcode = IBV_WR_RDMA_READ;
    wr[k].wr.rdma.remote_addr = 0;  // the control block
    wr[k].wr.rdma.rkey = rkey;
    ++k;
  }
  for (int i = 0; i + 1 < k; ++i) wr[i].next = &wr[i + 1];
  wr[k - 1].next = nullptr;
  wr[k - 1].send_flags = IBV_SEND_SIGNALED;  // the chain's one completion: all of it done
  ibv_send_wr* bad = nullptr;
  if (int rc = ibv_post_send(qp_.qp(), wr, &bad); rc != 0)
    return Broken(ErrnoStatus("ibv_post_send(ring chain)", rc));
  ++ring_chains_;
  return Status::Ok();
}

}  // namespace rkv
