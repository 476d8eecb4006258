// SPDX-License-Identifier: Apache-2.0
// AcceptEnv: what both acceptors (rdma_cm and manual mode) need to turn a new client into a
// served connection, and NewConn, the one place where a Conn is created, handed to its worker
// and registered.
// Thread safety: AcceptEnv is immutable after construction; everything it points to is
// thread-safe or immutable and outlives the acceptors' threads.
#ifndef RKV_SERVER_ACCEPT_ENV_H_
#define RKV_SERVER_ACCEPT_ENV_H_

#include <atomic>
#include <functional>
#include <memory>
#include <vector>

#include "common/verbs/conn_params.h"
#include "common/wire.h"
#include "server/conn/conn.h"
#include "server/conn/conn_registry.h"
#include "server/conn/source_limiter.h"
#include "server/conn/srq_pool.h"
#include "server/conn/worker.h"
#include "server/metrics/counters.h"
#include "server/rpc_executor.h"
#include "server/server_options.h"

namespace rkv {

struct AcceptEnv {
  const ServerOptions* opt = nullptr;
  ibv_context* ctx = nullptr;
  ibv_pd* pd = nullptr;
  // Window mode: the shared SRQ every client QP receives from. Null in registration mode: each
  // client QP is in a PD of its own with a receive queue of its own (server/conn/private_domain.h).
  SrqPool* srq = nullptr;
  uint32_t max_inline = 0;  // every client QP's cap.max_inline_data (WorkerEnv::max_inline)
  // Registration mode: the server's reply buffers (Worker::ReplySlots per slot), of which each
  // connection's PD registers its slot's share.
  uint8_t* send_base = nullptr;
  std::vector<Worker*> workers;
  ConnRegistry* registry = nullptr;
  SourceLimiter* limiter = nullptr;  // per-address caps (source_limiter.h)
  ServerCounters* counters = nullptr;
  // The accept private data without its nonce (HelloFor fills in the connection's).
  wire::ServerHello hello{};
  RegionInfo region;
  std::atomic<uint64_t>* next_serial = nullptr;
  const std::atomic<bool>* stop = nullptr;

  int WorkerFor(int slot) const { return slot % int(workers.size()); }
  // Creation attributes of a client QP served by worker `w`.
  ibv_qp_init_attr QpAttr(int w) const;
  // The ServerHello of connection c (its nonce).
  wire::ServerHello HelloFor(const Conn& c) const;
};

// Creates the QP of a new connection in `slot`: window mode, in the server's PD on the shared SRQ
// (*domain stays null); registration mode, in a PrivateDomain of its own (*domain) with its own
// receive queue, whose buffers are posted here. rdma_cm: `id` non-null (rdma_create_qp leaves
// the QP in INIT); manual: `init` non-null, the QP is moved to INIT with it. On failure nothing
// is left (QP destroyed, domain freed) and the slot is still the caller's. The message names the
// failed call.
[[nodiscard]] Status CreateClientQp(const AcceptEnv& env, int slot, rdma_cm_id* id,
                                    const ConnParams* init, ibv_qp** qp,
                                    std::unique_ptr<PrivateDomain>* domain);

// A fresh server nonce (wire::kNonceSize bytes) from SecureRandom.
[[nodiscard]] Status NewServerNonce(uint8_t* nonce);

// Wraps a freshly created QP (and rdma_cm id) in a Conn owned by `owner`, hands it to its
// worker (before the QP can receive) and registers it; counts it as total, active, pending.
// nonce: from NewServerNonce; peer_qpn: the client's QP number; lease: the connection's share
// of its source address's cap (empty where there is no address), held until the Conn is gone.
// domain: from CreateClientQp (null in window mode).
std::shared_ptr<Conn> NewConn(const AcceptEnv& env, Conn::Kind kind, int slot, ConnOwner* owner,
                              rdma_cm_id* id, ibv_qp* qp, const uint8_t* nonce, uint32_t peer_qpn,
                              std::unique_ptr<PrivateDomain> domain,
                              SourceLimiter::Lease lease = {});

// Admits a connection attempt from `addr` (an IPv4/IPv6 sockaddr): *lease holds it, or the
// Status (Code::kBusy, message starting "BUSY: ") says which limit. Fails closed: a null
// address or another family is refused (Code::kProtocolError). No limiter: always Ok.
[[nodiscard]] Status AdmitSource(const AcceptEnv& env, const sockaddr* addr,
                                 SourceLimiter::Lease* lease);

// Owner: kSetup -> kEstablished, counted in connections_established (counted first, so the
// worker's uncount at close never runs ahead of it). True also if the worker already opened it
// (kOpen, counted by the worker). False if the Conn is already closing.
bool MarkEstablished(const AcceptEnv& env, Conn* c);

// One line with the parameters both sides of `qp` use (read back), for the connection log.
std::string QpParamsLine(ibv_qp* qp);

// The owner's side of a drained Conn: destroys its verbs objects, frees its slot, uncounts it.
void DestroyDrained(const AcceptEnv& env, Conn* c);

}  // namespace rkv

#endif  // RKV_SERVER_ACCEPT_ENV_H_
