// SPDX-License-Identifier: Apache-2.0
// Worker's constants and work request id helpers, shared by its files (worker.cc: the loop and
// completions; worker_request.cc: requests, replies and the write pool; worker_open.cc: OPEN and
// grants; worker_close.cc: ticks, keepalives, close and drain). Not for other classes.
#ifndef RKV_SERVER_WORKER_INTERNAL_H_
#define RKV_SERVER_WORKER_INTERNAL_H_

#include <chrono>
#include <cstdint>

#include "server/conn/conn.h"

namespace rkv::worker_internal {
// After moving a QP to ERR, how long to wait for IBV_EVENT_QP_LAST_WQE_REACHED (not every
// device raises it) before posting the drain marker.
inline constexpr auto kLastWqeGrace = std::chrono::milliseconds(300);
// A QP whose marker has not completed by then is leaked (kept, never reused), not destroyed.
inline constexpr auto kDrainDeadline = std::chrono::seconds(10);
inline constexpr auto kTickPeriod = std::chrono::milliseconds(50);
inline constexpr int kMaxBatches = 4;  // CQ batches of 32 per loop round

// Send work request ids: (serial << 20) | (seq << 4) | (kind << 1); bit 0 is 0 (receive ids
// are odd). seq is the send's SendTracker sequence number: a completion names exactly the send
// it reports, and with it every send posted before it.
inline uint64_t SendId(uint64_t serial, uint16_t seq, uint64_t kind) {
  return (serial << 20) | (uint64_t{seq} << 4) | (kind << 1);
}
inline uint64_t SerialOf(uint64_t wr_id) { return wr_id >> 20; }
inline uint16_t SeqOf(uint64_t wr_id) { return uint16_t(wr_id >> 4); }
inline uint64_t KindOf(uint64_t wr_id) { return (wr_id >> 1) & 3; }
inline int64_t Ms(Conn::Clock::duration d) {
  return std::chrono::duration_cast<std::chrono::milliseconds>(d).count();
}
}  // namespace rkv::worker_internal

#endif  // RKV_SERVER_WORKER_INTERNAL_H_
