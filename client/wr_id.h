// SPDX-License-Identifier: Apache-2.0
// Work request ids of a Connection's QP (connection.cc, connection_open.cc,
// connection_pipeline.cc): the kind in the low byte; a pipelined receive carries its slot above
// it. Internal to the Connection.
#ifndef RKV_CLIENT_WR_ID_H_
#define RKV_CLIENT_WR_ID_H_

#include <cstdint>

namespace rkv::wr_id {
enum WrId : uint64_t {
  kRead = 1,
  kSend = 2,
  kRecv = 3,
  kPipeSend = 4,
  kPipeRecv = 5,
  kRing = 6  // the signalled end of a log ring chain (connection_ring.cc)
};
}  // namespace rkv::wr_id

#endif  // RKV_CLIENT_WR_ID_H_
