// SPDX-License-Identifier: Apache-2.0
// RpcExecutor's fast path for replicated writes (rpc_executor.h, "FastOp"): Execute's PUT and
// DELETE, split where the backups' replies are awaited. The same checks, gate, apply and reply
// as Execute's; what Execute would refuse (a malformed request, an entry too large, a slot not
// OWNED here) is left to Execute.
#include "server/rpc_executor.h"

namespace rkv {

bool RpcExecutor::BeginFast(std::string* request, FastOp* op) {
  if (replicator_ == nullptr || owners_ == nullptr) return false;
  wire::Request req{};
  if (!wire::DecodeRequest(reinterpret_cast<const uint8_t*>(request->data()), request->size(), &req)
           .ok() ||
      (req.op != wire::Op::kPut && req.op != wire::Op::kDelete))
    return false;
  const bool put = req.op == wire::Op::kPut;
  if (!Table::CheckEntry(req.key, put ? req.value : std::string_view("x")).ok()) return false;
  const uint32_t slot = owners_->SlotOf(req.key);
  uint64_t word = 0;
  if (!owners_->BeginWrite(slot, &word)) return false;
  if (!replicator_->BeginFast(slot, put, req.key, req.value, &op->fw)) {
    owners_->EndWrite(slot);
    return false;
  }
  op->op = req.op;
  op->request_id = req.request_id;
  op->request = std::move(*request);  // req's views die here: the FastWrite holds copies
  return true;
}

void RpcExecutor::AbortFast(FastOp* op) {
  if (!op->fw.locked) return;
  const uint32_t slot = op->fw.slot;
  replicator_->AbortFast(&op->fw);
  owners_->EndWrite(slot);
}

void RpcExecutor::FailFast(FastOp* op, const Status* status, const bool* maybe_sent) {
  if (!op->fw.locked) return;
  const uint32_t slot = op->fw.slot;
  replicator_->FailFast(&op->fw, status, maybe_sent);
  owners_->EndWrite(slot);
}

size_t RpcExecutor::EndFast(FastOp* op, const Status* status, const bool* maybe_sent, uint8_t* out,
                            size_t cap) {
  const bool put = op->op == wire::Op::kPut;
  (put ? counters_->rpc_put : counters_->rpc_delete).fetch_add(1, std::memory_order_relaxed);
  std::string payload;
  const uint32_t slot = op->fw.slot;
  const std::string& key = op->fw.key;
  const std::string& value = op->fw.value;
  Status s = replicator_->EndFast(&op->fw, status, maybe_sent, [&]() -> Status {
    return ApplyWrite(put, key, value, &payload);
  });
  if (owners_->Tracked(slot)) owners_->MarkDirty(key);  // a migration ships it again
  owners_->EndWrite(slot);
  return EncodeOutcome(op->op, op->request_id, Code::kOk, s, &payload, out, cap);
}

}  // namespace rkv
