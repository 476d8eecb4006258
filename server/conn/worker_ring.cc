// SPDX-License-Identifier: Apache-2.0
// Worker: RING_GRANT, a primary's request for a log ring on its replication link
// (docs/replication-rings.md, "The parts"). The ring is reachable by this connection's QP only:
// window mode binds a type-2 window on the QP over a registration of the ring (MW_BIND, local
// write), as OPEN does for the region; registration mode registers it in the connection's own
// PD. Either is zero-based, with remote write (the records) and remote read (the control
// block). The registration and the window belong to the ring's revoker, which the drainer runs
// once (a map's revocation, a refused record, this connection's close: Worker's close path
// revokes the ring before the connection's PD goes).
// Refusals: INVALID_ARGUMENT (this server takes no rings; a malformed request; this connection
// has one already; a writer the map does not place at the connection's address), UNAVAILABLE
// (ask again: a map is being applied, none yet, a role it does not serve, or the writer's epoch
// is newer than this server's map), IO_ERROR (a verbs call failed: named), BUSY (too many).
#include <glog/logging.h>
#include <netinet/in.h>

#include <cstring>

#include "common/secure_random.h"
#include "common/wire.h"
#include "server/cluster/replica_ring.h"
#include "server/conn/worker.h"
#include "server/conn/worker_internal.h"

namespace rkv {

using namespace worker_internal;  // NOLINT(build/namespaces): this class's own helpers

bool Worker::HandleRingGrant(const std::shared_ptr<Conn>& c, const uint8_t* msg, uint32_t len) {
  if (len < sizeof(wire::RequestHeader) ||
      msg[offsetof(wire::RequestHeader, op)] != uint8_t(wire::Op::kRingGrant))
    return false;
  wire::Request req;
  if (!wire::DecodeRequest(msg, len, &req).ok()) return false;  // the executor: BAD_REQUEST
  std::string payload;
  const Status s = GrantRing(c, req, &payload);
  if (!s.ok()) {
    LOG_EVERY_N(WARNING, 20) << "qp " << c->qpn << ": RING_GRANT: " << s.message();
  }
  PostReply(c, wire::Op::kRingGrant, req.request_id, s.code(), s.ok() ? payload : s.message());
  return true;
}

Status Worker::GrantRing(const std::shared_ptr<Conn>& c, const wire::Request& req,
                         std::string* payload) {
  if (env_.rings == nullptr)
    return Status(Code::kInvalidArgument,
                  "RING_GRANT: this server takes no log rings (a memory-only backup of a "
                  "replicated cluster with --replication_rings does)");
  wire::RingGrantRequest g{};
  if (req.key.size() != sizeof g || !req.value.empty())
    return Status(Code::kInvalidArgument, "RING_GRANT: the key must be a 16-byte request");
  std::memcpy(&g, req.key.data(), sizeof g);
  if (g.reserved != 0 || g.writer_id == 0)
    return Status(Code::kInvalidArgument, "RING_GRANT: malformed request");
  if (c->w.ring_id != 0)
    return Status(Code::kInvalidArgument, "RING_GRANT: this connection holds a log ring already");
  if (!env_.rings->Accepting(g.writer_id))  // before any memory is allocated or registered
    return Status(Code::kUnavailable, "RING_GRANT: this backup takes no log ring now");
  if (env_.replicate_sender) {  // the writer must come from where the map places it
    uint32_t peer = 0;
    if (c->id() != nullptr) {
      const sockaddr* a = rdma_get_peer_addr(c->id());
      if (a != nullptr && a->sa_family == AF_INET)
        peer = reinterpret_cast<const sockaddr_in*>(a)->sin_addr.s_addr;
    }
    Status s = env_.replicate_sender(g.writer_id, g.epoch, peer);
    if (!s.ok()) return Status(s.code(), "RING_GRANT: " + s.message());
  }
  const uint32_t writer = g.writer_id;
  const uint64_t writer_epoch = g.epoch;
  auto ring = std::make_unique<cluster::ReplicaRing>(writer, writer_epoch, env_.ring_bytes);
  ibv_mr* mr = nullptr;
  ibv_mw* mw = nullptr;
  const int remote = IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ;
  uint32_t rkey = 0;
  if (!env_.windows) {
    if (c->domain() == nullptr)
      return Status(Code::kProtocolError, "registration mode without the connection's own PD");
    mr = ibv_reg_mr_iova(c->domain()->pd(), ring->data(), ring->size(), 0,
                         IBV_ACCESS_LOCAL_WRITE | remote);
    if (mr == nullptr) return ErrnoStatus("ibv_reg_mr_iova(ring, iova 0, REMOTE_WRITE)", errno);
    rkey = mr->rkey;
  } else {
    mr = ibv_reg_mr(env_.pd, ring->data(), ring->size(),
                    IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_MW_BIND);
    if (mr == nullptr) return ErrnoStatus("ibv_reg_mr(ring, MW_BIND)", errno);
    mw = ibv_alloc_mw(env_.pd, IBV_MW_TYPE_2);
    if (mw == nullptr) {
      const int e = errno;
      (void)ibv_dereg_mr(mr);
      return ErrnoStatus("ibv_alloc_mw(IBV_MW_TYPE_2) for a ring", e);
    }
  }
  // From here the revoker owns the registration and the window (run once, by the drainer or
  // by the ring's destructor).
  ring->set_revoker([mr, mw] {
    if (mw != nullptr && ibv_dealloc_mw(mw) != 0) {
      PLOG(ERROR) << "ibv_dealloc_mw(ring window)";
      return false;  // the window may still grant writes: the memory is never freed
    }
    if (ibv_dereg_mr(mr) != 0) {
      PLOG(ERROR) << "ibv_dereg_mr(ring)";
      return false;
    }
    return true;
  });
  if (mw != nullptr) {
    uint8_t key = 0;
    Status s = SecureRandom::Fill(&key, 1);
    if (!s.ok()) return s;
    rkey = (mw->rkey & 0xffffff00u) | key;
  }
  // The window is bound only once the drainer takes the ring (under its lock, so a revocation
  // cannot dealloc the window before the bind is posted, and a ring it refuses has no bind in
  // flight when its revoker runs). Posted before the reply on the same QP: bound when read.
  auto bind = [&]() -> Status {
    if (mw == nullptr) return Status::Ok();
    if (!c->w.sends.HasRoom())
      return Status(Code::kBusy, "no room in the send queue for the window bind");
    ibv_send_wr wr{}, *bad = nullptr;
    wr.wr_id = SendId(c->serial, c->w.sends.next_seq(), kBind);
    wr.opcode = IBV_WR_BIND_MW;
    wr.send_flags = IBV_SEND_SIGNALED;
    wr.bind_mw.mw = mw;
    wr.bind_mw.rkey = rkey;
    wr.bind_mw.bind_info.mr = mr;
    wr.bind_mw.bind_info.addr = reinterpret_cast<uint64_t>(mr->addr);
    wr.bind_mw.bind_info.length = mr->length;
    wr.bind_mw.bind_info.mw_access_flags = remote | IBV_ACCESS_ZERO_BASED;
    if (int rc = ibv_post_send(c->qp(), &wr, &bad); rc != 0)
      return ErrnoStatus("ibv_post_send(IBV_WR_BIND_MW) for a ring", rc);
    c->w.sends.Posted(kBind, true);
    return Status::Ok();
  };
  uint64_t id = 0, epoch = 0;
  const size_t size = ring->size();
  Status s = env_.rings->Add(std::move(ring), &id, &epoch, bind);
  if (!s.ok()) return Status(s.code(), "RING_GRANT: " + s.message());
  c->w.ring_id = id;
  env_.exec->CountRingGrant();
  wire::RingGrantReply r{};
  r.rkey = rkey;
  r.size = uint32_t(size);
  r.epoch = epoch;
  payload->assign(reinterpret_cast<const char*>(&r), sizeof r);
  return Status::Ok();
}

}  // namespace rkv
