// SPDX-License-Identifier: Apache-2.0
// AsyncEvents: the thread that reads the device's asynchronous events (ibv_get_async_event)
// and acts on them:
//   QP fatal / request / access / path-migration errors -> close that connection;
//   QP Last WQE Reached (a QP on the SRQ in ERR will consume no more receives) -> tell its
//     worker, which then drains the QP (server/conn/conn.h);
//   SRQ limit reached -> post the SRQ's reserve buffers (server/conn/srq_pool.h; no SRQ, as in
//     registration mode: srq is null and there is no such event);
//   port, device and SRQ errors -> logged (device fatal also stops the server).
// The connection is looked up by QP number in the registry and must also hold the event's
// ibv_qp handle: a QP's number may be reused as soon as the kernel QP is destroyed, but its
// ibv_qp struct is freed only after its events are acknowledged, so a late event of a destroyed
// QP never matches a newer connection that got the same number.
// Threads: owns one thread (Start/Join). Ownership: borrows the context, registry, SRQ pool
// and counters, which outlive it.
#ifndef RKV_SERVER_ASYNC_EVENTS_H_
#define RKV_SERVER_ASYNC_EVENTS_H_

#include <infiniband/verbs.h>

#include <atomic>
#include <thread>

#include "server/conn/conn_registry.h"
#include "server/conn/srq_pool.h"
#include "server/metrics/counters.h"

namespace rkv {

class AsyncEvents {
 public:
  AsyncEvents(ibv_context* ctx, ConnRegistry* registry, SrqPool* srq, ServerCounters* counters,
              std::atomic<bool>* stop)
      : ctx_(ctx), registry_(registry), srq_(srq), counters_(counters), stop_(stop) {}
  ~AsyncEvents() { Join(); }
  // Makes the async fd non-blocking and starts the thread.
  [[nodiscard]] Status Start();
  void Join();

 private:
  void Loop();
  void Handle(const ibv_async_event& ev);

  ibv_context* const ctx_;
  ConnRegistry* const registry_;
  SrqPool* const srq_;
  ServerCounters* const counters_;
  std::atomic<bool>* const stop_;
  std::thread thread_;
};

}  // namespace rkv

#endif  // RKV_SERVER_ASYNC_EVENTS_H_
