// SPDX-License-Identifier: Apache-2.0
// PrivateDomain: the protection domain of one client connection when private rkeys are
// registrations (kvserver --client_rkeys=registration, or a device without type-2 memory
// windows; docs/security.md, "Private rkeys").
//
// Why: an rkey is honoured for any QP in the PD its registration belongs to. With one shared PD,
// client B's QP could use client A's registration of the region. So each such connection gets a
// PD of its own holding everything its QP touches: the QP itself, its region registration
// (ibv_reg_mr_iova, iova 0, remote READ: made at OPEN, owned by the Conn), a registration of
// its reply slots in the server's send buffer, and receive buffers of its own (a receive queue
// on the QP instead of the shared SRQ: receive WQEs are checked against the QP's PD on rxe, so
// the SRQ's buffers, registered in the server's PD, cannot serve it). B's QP is in another PD:
// A's rkey means nothing to it.
//
// Receive buffers, in two stages so that a connection that has not authenticated pins little:
//   before OPEN  one setup buffer of kSetupBufSize bytes (an OPEN request is 72 bytes; a bigger
//                request completes in error and closes the connection);
//   at OPEN      Open() allocates, registers and posts `receive_buffers` maximum-size buffers
//                (before the OPEN reply is posted, so the client's next request finds them); the
//                setup buffer is not posted again.
// Receive work request ids are (index << 1) | 1, as the SRQ's (server/conn/srq_pool.h); index
// receive_buffers() is the setup buffer. A worker of a server in registration mode has no SRQ,
// so every receive completion it polls is of a connection's PrivateDomain, found by QP number.
// Cost per connection: one PD and two registrations at accept (reply slots, setup buffer); at
// OPEN two more (receive buffers, the region) and receive_buffers x kBufSize bytes.
// Thread safety: created on the accepting thread, which posts the setup buffer before the Conn
// is handed to its worker (Worker::Adopt: the queue orders it); after that every method but
// pd() and send_lkey() belongs to the worker thread only. Destroyed by the Conn's owner thread
// after the QP is destroyed (Conn::DestroyVerbs), when no work request of the QP can complete.
// Ownership: owns the PD, the buffers and their registrations; destruction deregisters them,
// then deallocates the PD (which fails while a QP or an MR still uses it).
#ifndef RKV_SERVER_PRIVATE_DOMAIN_H_
#define RKV_SERVER_PRIVATE_DOMAIN_H_

#include <cstddef>
#include <cstdint>
#include <memory>

#include "common/verbs/rdma.h"
#include "rkv/status.h"
#include "server/conn/srq_pool.h"

namespace rkv {

class PrivateDomain {
 public:
  static constexpr size_t kBufSize = SrqPool::kBufSize;  // one maximum-size request
  static constexpr size_t kSetupBufSize = 4096;          // room for an OPEN request

  // A PD on ctx, the setup buffer registered in it (local write), and `send_bytes` at
  // `send_slots` (the connection's reply slots) registered in it. receive_buffers: how many
  // maximum-size buffers Open() posts.
  [[nodiscard]] static Status Create(ibv_context* ctx, uint8_t* send_slots, size_t send_bytes,
                                     int receive_buffers, std::unique_ptr<PrivateDomain>* out);
  ~PrivateDomain();
  PrivateDomain(const PrivateDomain&) = delete;
  PrivateDomain& operator=(const PrivateDomain&) = delete;

  ibv_pd* pd() const { return pd_.get(); }
  uint32_t send_lkey() const { return send_mr_->lkey; }
  int receive_buffers() const { return count_; }

  // Accepting thread, QP in INIT (before it can receive): posts the setup buffer on qp.
  [[nodiscard]] Status PostSetup(ibv_qp* qp);
  // Worker, at a successful OPEN: allocates, registers and posts the receive buffers on qp.
  [[nodiscard]] Status Open(ibv_qp* qp);
  bool opened() const { return opened_; }
  // Worker: the bytes of buffer `index` and how many it holds; null for an index that is not
  // one of this domain's (a broken invariant: the caller closes the connection).
  const uint8_t* Buffer(uint32_t index, size_t* size) const;
  // Worker: a receive completion (any status) consumed a buffer...
  void Consumed() { --posted_; }
  // ...and its bytes are no longer needed: post it again on qp (the setup buffer only until
  // the connection is open; after that it is left alone).
  [[nodiscard]] Status Repost(ibv_qp* qp, uint32_t index);
  // Receives posted and not yet completed (flushed ones included): 0 once a QP in ERR is drained.
  int posted() const { return posted_; }

 private:
  explicit PrivateDomain(int count) : count_(count) {}
  Status Post(ibv_qp* qp, uint32_t index);

  // Page-aligned anonymous memory (mmap), so a registration pins only its own pages and an
  // allocation failure is a Status, not an exception on the worker thread.
  struct Pages {
    uint8_t* data = nullptr;
    size_t size = 0;
    Pages() = default;
    Pages(const Pages&) = delete;
    Pages& operator=(const Pages&) = delete;
    ~Pages();
    [[nodiscard]] Status Map(size_t bytes, const char* what);
  };

  const int count_;
  int posted_ = 0;  // see Thread safety
  bool opened_ = false;
  Pages setup_;
  Pages recv_;  // mapped by Open()
  PdPtr pd_;
  MrPtr setup_mr_;  // declared after pd_: destroyed first
  MrPtr recv_mr_;
  MrPtr send_mr_;
};

}  // namespace rkv

#endif  // RKV_SERVER_PRIVATE_DOMAIN_H_
