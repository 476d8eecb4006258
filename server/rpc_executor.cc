// SPDX-License-Identifier: Apache-2.0
#include "server/rpc_executor.h"

#include <glog/logging.h>

#include <cstring>

#include "common/table/entry_location.h"
#include "common/verbs/conn_params.h"
#include "common/verbs/qp_setup.h"
#include "common/wire.h"

namespace rkv {

size_t RpcExecutor::Execute(ibv_qp* qp, uint32_t qp_num, uint32_t granted_rkey, const uint8_t* msg,
                            size_t len, uint8_t* out, size_t cap, bool* malformed) {
  *malformed = false;
  wire::Request req{};
  Status s = wire::DecodeRequest(msg, len, &req);
  std::string payload;
  Code code = Code::kOk;
  wire::Op op = req.op;
  if (!s.ok()) {
    *malformed = true;
    counters_->rpc_bad.fetch_add(1, std::memory_order_relaxed);
    LOG_EVERY_N(WARNING, 100) << "bad request from qp " << qp_num << ": " << s.message();
    code = Code::kBadRequest;
    payload = s.message();
    op = static_cast<wire::Op>(0);
    wire::RequestHeader h{};
    if (len >= sizeof(h)) {
      std::memcpy(&h, msg, sizeof(h));
      req.request_id = h.request_id;
    }
  } else if (req.op == wire::Op::kOpen) {
    *malformed = true;
    s = Status(Code::kBadRequest, "the connection is already open");
  } else if (req.op == wire::Op::kPut || req.op == wire::Op::kDelete) {
    const bool put = req.op == wire::Op::kPut;
    (put ? counters_->rpc_put : counters_->rpc_delete).fetch_add(1, std::memory_order_relaxed);
    uint32_t slot = 0;
    uint64_t word = 0;
    bool admitted = false;  // by the write gate: EndWrite follows
    if (replicator_ != nullptr &&
        !(s = Table::CheckEntry(req.key, put ? req.value : std::string_view("x"))).ok()) {
      // Refused before the backups see it (they would refuse it too, for good).
    } else if (owners_ != nullptr && !owners_->BeginWrite(slot = owners_->SlotOf(req.key), &word)) {
      code = Refuse(slot, word, &payload);
    } else {
      admitted = owners_ != nullptr;
      auto apply = [&]() -> Status { return ApplyWrite(put, req.key, req.value, &payload); };
      s = replicator_ != nullptr ? replicator_->Write(slot, put, req.key, req.value, apply)
                                 : apply();
    }
    if (admitted) {
      if (owners_->Tracked(slot)) owners_->MarkDirty(req.key);  // a migration ships it again
      owners_->EndWrite(slot);
    }
  } else if (req.op == wire::Op::kMigrateBegin || req.op == wire::Op::kMigratePut ||
             req.op == wire::Op::kMigrateDelete) {
    s = ExecuteMigration(req, qp_num, &payload);
  } else if (req.op == wire::Op::kReplicate) {
    s = ExecuteReplicate(req, &payload);
  } else if (req.op == wire::Op::kRingGrant) {  // the worker answers it (worker_ring.cc)
    s = Status(Code::kInvalidArgument, "RING_GRANT: this server takes no log rings");
  } else if (req.op == wire::Op::kSnapshot) {
    counters_->rpc_snapshot.fetch_add(1, std::memory_order_relaxed);
    if (snapshot_) {
      payload = snapshot_();
    } else {
      s = Status(Code::kInvalidArgument,
                 "this server is memory-only (no --data_dir): no snapshots");
    }
  } else if (req.op == wire::Op::kParams && qp != nullptr) {
    counters_->rpc_params.fetch_add(1, std::memory_order_relaxed);
    ConnParams local, peer;
    s = ReadBackParams(qp, &local, &peer);
    // The memory parameters this connection was granted at OPEN (zero-based address).
    local.remote_addr = region_.addr;
    local.rkey = granted_rkey;
    local.region_size = region_.size;
    uint8_t rec[kConnParamsSize];
    EncodeConnParams(local, rec);
    if (s.ok()) payload.assign(reinterpret_cast<const char*>(rec), sizeof rec);
  } else {
    counters_->rpc_stats.fetch_add(1, std::memory_order_relaxed);
    payload = stats_text_();
  }
  return EncodeOutcome(op, req.request_id, code, s, &payload, out, cap);
}

size_t RpcExecutor::EncodeOutcome(wire::Op op, uint64_t request_id, Code code, const Status& s,
                                  std::string* payload, uint8_t* out, size_t cap) {
  if (code == Code::kOk && !s.ok()) {
    code = s.code();
    *payload = s.message();
    if (code != Code::kNotFound) counters_->rpc_errors.fetch_add(1, std::memory_order_relaxed);
  }
  return wire::EncodeReply(op, request_id, code, *payload, out, cap);
}

Status RpcExecutor::ApplyWrite(bool put, std::string_view key, std::string_view value,
                               std::string* payload) {
  if (!put) return table_->Delete(key);
  layout::EntryLocation where;
  Status p = table_->Put(key, value, &where);
  if (p.ok() && where.kind != layout::EntryLocation::kNone) {
    uint8_t rec[layout::kEntryLocationWireSize];  // the client's location cache's hint
    layout::EncodeEntryLocation(where, rec);
    payload->assign(reinterpret_cast<const char*>(rec), sizeof rec);
  }
  return p;
}

Code RpcExecutor::Refuse(uint32_t slot, uint64_t word, std::string* payload) {
  uint64_t epoch = 0;
  uint32_t owner = wire::kNoOwner;
  owners_->Route(slot, &epoch, &owner);
  wire::MovedPayload m{};
  m.epoch = epoch;
  m.owner_id = owner;
  m.slot = slot;
  const bool moving = cluster::WordState(word) == cluster::SlotState::kMoving ||
                      cluster::WordState(word) == cluster::SlotState::kPromoting;
  (moving ? counters_->rpc_try_again : counters_->rpc_moved)
      .fetch_add(1, std::memory_order_relaxed);
  payload->assign(reinterpret_cast<const char*>(&m), sizeof m);
  if (moving) {
    *payload += "slot " + std::to_string(slot) + " is being handed over; try again";
  } else if (m.owner_id == wire::kNoOwner) {
    *payload += "slot " + std::to_string(slot) + " has no owner in the map of epoch " +
                std::to_string(m.epoch) + " (kvctl cluster rebalance assigns it)";
  } else {
    *payload += "slot " + std::to_string(slot) + " is owned by server " +
                std::to_string(m.owner_id) + " (map epoch " + std::to_string(m.epoch) + ")";
  }
  return moving ? Code::kTryAgain : Code::kMoved;
}

}  // namespace rkv
