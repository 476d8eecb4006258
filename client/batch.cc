// SPDX-License-Identifier: Apache-2.0
// Client::Execute: a batch of GETs, PUTs and DELETEs with many in flight on one connection.
// The writes go out through Connection::PostRpc up to the server's credits (so the server's
// credit_drops stays 0) and the next is posted as each reply is taken; the GETs run as one
// MultiGet meanwhile (their READs share the QP with the requests in flight; Connection::Poll
// records the replies that arrive while it waits for READs).
#include "client/client_impl.h"
#include "common/printable.h"

namespace rkv {

namespace {
const char* OpName(BatchOp::Type t) { return t == BatchOp::Type::kPut ? "PUT" : "DELETE"; }
// The placeholder status of an operation not decided yet (replaced before Execute returns).
bool Pending(const Status& s) { return s.code() == Code::kConnectionLost && s.message().empty(); }
}  // namespace

Status ClientImpl::Execute(BatchOp* ops, size_t n) {
  Status s = Usable();
  for (size_t i = 0; i < n; ++i) ops[i].status = s.ok() ? Status(Code::kConnectionLost, "") : s;
  if (!s.ok()) return s;
  std::vector<std::string_view> get_keys;
  std::vector<size_t> gets, writes;
  for (size_t i = 0; i < n; ++i) {
    BatchOp& op = ops[i];
    Status check = CheckKey(op.key);
    if (check.ok() && op.type == BatchOp::Type::kGet && op.result == nullptr)
      check = Status(Code::kInvalidArgument, "BatchOp::result is null for a GET");
    if (check.ok() && op.type == BatchOp::Type::kPut &&
        op.value.size() > conn_->hello().max_value_size)
      check = Status(Code::kTooLarge, "value of " + std::to_string(op.value.size()) +
                                          " bytes exceeds the server's limit of " +
                                          std::to_string(conn_->hello().max_value_size));
    if (check.ok() && op.type != BatchOp::Type::kGet && op.type != BatchOp::Type::kPut &&
        op.type != BatchOp::Type::kDelete)
      check = Status(Code::kInvalidArgument, "unknown BatchOp::type");
    if (!check.ok()) {
      op.status = check;
    } else if (op.type == BatchOp::Type::kGet) {
      gets.push_back(i);
      get_keys.push_back(op.key);
    } else {
      writes.push_back(i);
    }
  }

  struct InFlight {
    uint64_t rid;
    size_t op;
    uint64_t key_hash;
  };
  InFlight inflight[Connection::kMaxPipeline];
  int in = 0;
  size_t next = 0;
  auto post = [&]() -> Status {
    while (next < writes.size()) {
      BatchOp& op = ops[writes[next]];
      const bool put = op.type == BatchOp::Type::kPut;
      const uint64_t hash = KeyHashOf(op.key).hash;
      cache_.Erase(hash);  // whatever happens, its old location is stale
      uint64_t rid = 0;
      bool posted = false;
      Status ps = conn_->PostRpc(put ? wire::Op::kPut : wire::Op::kDelete, op.key,
                                 put ? op.value : std::string_view(), &rid, &posted);
      if (!ps.ok()) return ps;
      if (!posted) {
        if (in == 0)  // PostRpc waits for the ring itself when nothing is outstanding
          return Status(Code::kIoError, "pipelined request not posted with nothing in flight");
        break;
      }
      ++counters_.rpcs;
      inflight[in++] = {rid, writes[next], hash};
      ++next;
    }
    return Status::Ok();
  };
  std::string payload;
  auto take = [&]() -> Status {
    uint64_t rid = 0;
    Code code = Code::kOk;
    Status rs = conn_->NextReply(&rid, &code, &payload);
    if (!rs.ok()) return rs;
    int j = 0;
    while (j < in && inflight[j].rid != rid) ++j;
    if (j == in) return Status(Code::kProtocolError, "reply to a request of no batch operation");
    BatchOp& op = ops[inflight[j].op];
    if (code == Code::kOk) {
      op.status = Status::Ok();
      layout::EntryLocation loc;
      if (op.type == BatchOp::Type::kPut &&
          layout::DecodeEntryLocation(payload, conn_->geometry(), Connection::kBlockAreaSize, &loc))
        cache_.Insert(inflight[j].key_hash, loc);
    } else {
      op.status = Status(code, Printable(payload, 2048));  // the server's words, escaped
    }
    inflight[j] = inflight[--in];
    return Status::Ok();
  };

  s = post();
  if (s.ok() && !gets.empty()) {
    std::vector<std::string> values;
    std::vector<Status> statuses;
    s = MultiGet(get_keys, &values, &statuses);
    for (size_t k = 0; k < gets.size(); ++k) {
      BatchOp& op = ops[gets[k]];
      op.status = statuses[k];
      if (op.status.ok()) op.result->swap(values[k]);
    }
  }
  while (s.ok() && (in > 0 || next < writes.size())) {
    s = take();
    if (s.ok()) s = post();
  }
  if (s.ok()) return s;
  // The connection failed: say for every write whether it went out.
  for (int j = 0; j < in; ++j) {
    BatchOp& op = ops[inflight[j].op];
    op.status = Status(Code::kConnectionLost,
                       std::string(OpName(op.type)) + " outcome unknown: the connection to " +
                           Where() + " failed after the request was sent (" + s.ToString() +
                           "); not retried: it may or may not have been applied");
  }
  for (size_t k = next; k < writes.size(); ++k) {
    BatchOp& op = ops[writes[k]];
    op.status = Status(Code::kConnectionLost, std::string(OpName(op.type)) +
                                                  " not sent: the connection to " + Where() +
                                                  " failed before it was sent (" + s.ToString() +
                                                  "); the " + OpName(op.type) + " was not applied");
  }
  for (size_t i = 0; i < n; ++i)
    if (Pending(ops[i].status)) ops[i].status = s;
  return s;
}

}  // namespace rkv
