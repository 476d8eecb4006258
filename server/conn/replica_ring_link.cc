// SPDX-License-Identifier: Apache-2.0
#include "server/conn/replica_ring_link.h"

#include <glog/logging.h>

#include <algorithm>
#include <atomic>
#include <cstring>
#include <string>

#include "client/client_impl.h"
#include "common/cluster/ring_record.h"
#include "common/wire.h"

namespace rkv {
namespace {

// The posting order of every record this process writes (RingRecordView::order): a record
// posted after another's WRITE completed has a greater one, whichever link carries it.
std::atomic<uint64_t> g_order{0};

}  // namespace

Status RingLink::Grant(ClientImpl* client, uint32_t writer, uint64_t epoch,
                       std::unique_ptr<RingLink>* out) {
  wire::RingGrantRequest g{};
  g.epoch = epoch;
  g.writer_id = writer;
  std::string payload;
  Status s =
      client->Call(wire::Op::kRingGrant,
                   std::string_view(reinterpret_cast<const char*>(&g), sizeof g), "", &payload);
  if (!s.ok()) return s;
  wire::RingGrantReply r{};
  if (payload.size() != sizeof r)
    return Status(Code::kProtocolError, "RING_GRANT reply of " + std::to_string(payload.size()) +
                                            " bytes, not " + std::to_string(sizeof r));
  std::memcpy(&r, payload.data(), sizeof r);
  const size_t size = r.size;
  if (size % 8 != 0 || size < cluster::kRingControlBytes + 8 * cluster::kRingHeaderBytes ||
      size > (size_t(16384) << 10) || r.reserved != 0)
    return Status(Code::kProtocolError,
                  "RING_GRANT reply with a ring of " + std::to_string(size) + " bytes");
  out->reset(new RingLink(r.rkey, size, r.epoch));
  return Status::Ok();
}

Status RingLink::TryPost(Connection* c, const cluster::Replicator::FastWrite& fw, bool* posted) {
  *posted = false;
  const uint64_t e = fw.snap.epoch;
  if (broken_ || e < grant_epoch_ || e > known_epoch_) return Status::Ok();
  wire::ReplicateHeader h{};
  if (fw.msg.size() < sizeof h) return Status::Ok();
  std::memcpy(&h, fw.msg.data(), sizeof h);
  const std::string_view key = std::string_view(fw.msg).substr(sizeof h);
  const std::string_view value = fw.put ? std::string_view(fw.value) : std::string_view();
  const size_t bytes = cluster::RingRecordBytes(key.size(), value.size());
  if (bytes + cluster::kRingHeaderBytes > Connection::kRingStagingSize) return Status::Ok();
  cluster::RingTail::Placement p;
  if (!tail_.Plan(bytes, &p)) return Status::Ok();
  Connection::RingPiece pieces[2];
  int n = 0;
  uint32_t at = 0;
  if (p.wrap_at >= 0) {
    cluster::EncodeRingWrap(p.wrap_index, c->ring_staging());
    pieces[n++] = {uint64_t(p.wrap_at), 0, uint32_t(cluster::kRingHeaderBytes)};
    at = uint32_t(cluster::kRingHeaderBytes);
  }
  const uint64_t order = g_order.fetch_add(1, std::memory_order_relaxed) + 1;
  cluster::EncodeRingRecord(p.index, order, h, key, value, c->ring_staging() + at);
  pieces[n++] = {p.at, at, uint32_t(bytes)};
  // Past half the ring in use: learn what the backup consumed (and its epoch) on the way.
  const bool read = !read_out_ && tail_.written() + p.skipped + bytes - tail_.consumed() >
                                      tail_.layout().capacity() / 2;
  Status s = c->PostRingChain(rkey_, pieces, n, read);
  if (!s.ok()) return s;
  if (read) read_out_ = true;
  tail_.Commit(bytes, p);
  *posted = true;
  return Status::Ok();
}

Status RingLink::AskControl(Connection* c) {
  if (broken_ || read_out_) return Status::Ok();
  Status s = c->PostRingChain(rkey_, nullptr, 0, true);
  if (s.ok()) read_out_ = true;
  return s;
}

void RingLink::TakeControl(const Connection& c) {
  if (!read_out_ || !c.RingIdle()) return;
  read_out_ = false;
  cluster::RingControl control;
  std::memcpy(&control, c.ring_control(), sizeof control);
  known_epoch_ = std::max(known_epoch_, control.applied_epoch);
  if (!tail_.SeeConsumed(control.consumed)) {
    LOG_EVERY_N(WARNING, 20) << "log ring: the backup says it consumed " << control.consumed
                             << " bytes of " << tail_.written() << " written; not used again";
    broken_ = true;
  }
}

}  // namespace rkv
