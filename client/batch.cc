// SPDX-License-Identifier: Apache-2.0
// Client::Execute: a batch of GETs, PUTs and DELETEs with many in flight on one connection.
// The writes go out through Connection::PostRpc up to the server's credits (so the server's
// credit_drops stays 0) and the next is posted as each reply is taken; the GETs run as one
// MultiGet meanwhile (their READs share the QP with the requests in flight; Connection::Poll
// records the replies that arrive while it waits for READs).
#include "client/client_impl.h"
#include "client/write_batch.h"
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
    Status check = CheckOp(op);
    if (!check.ok()) {
      op.status = check;
    } else if (op.type == BatchOp::Type::kGet) {
      gets.push_back(i);
      get_keys.push_back(op.key);
    } else {
      writes.push_back(i);
    }
  }

  WriteBatch w;
  w.ops = ops;
  w.writes = std::move(writes);
  s = PostWrites(&w);
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
  while (s.ok() && !w.done()) {
    s = TakeWrite(&w);
    if (s.ok()) s = PostWrites(&w);
  }
  if (s.ok()) return s;
  FailWrites(&w, s);
  for (size_t i = 0; i < n; ++i)
    if (Pending(ops[i].status)) ops[i].status = s;
  return s;
}

Status ClientImpl::CheckOp(const BatchOp& op) const {
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
  return check;
}

Status ClientImpl::PostWrites(WriteBatch* w) {
  while (w->next < w->writes.size()) {
    BatchOp& op = w->ops[w->writes[w->next]];
    const bool put = op.type == BatchOp::Type::kPut;
    const uint64_t hash = KeyHashOf(op.key).hash;
    cache_.Erase(hash);  // whatever happens, its old location is stale
    uint64_t rid = 0;
    bool posted = false;
    Status ps = conn_->PostRpc(put ? wire::Op::kPut : wire::Op::kDelete, op.key,
                               put ? op.value : std::string_view(), &rid, &posted);
    if (!ps.ok()) return ps;
    if (!posted) {
      if (w->in == 0)  // PostRpc waits for the ring itself when nothing is outstanding
        return Status(Code::kIoError, "pipelined request not posted with nothing in flight");
      break;
    }
    ++counters_.rpcs;
    w->inflight[w->in++] = {rid, w->writes[w->next], hash};
    ++w->next;
  }
  return Status::Ok();
}

Status ClientImpl::TakeWrite(WriteBatch* w) {
  uint64_t rid = 0;
  Code code = Code::kOk;
  std::string payload;
  Status rs = conn_->NextReply(&rid, &code, &payload);
  if (!rs.ok()) return rs;
  int j = 0;
  while (j < w->in && w->inflight[j].rid != rid) ++j;
  if (j == w->in) return Status(Code::kProtocolError, "reply to a request of no batch operation");
  BatchOp& op = w->ops[w->inflight[j].op];
  if (code == Code::kOk) {
    op.status = Status::Ok();
    layout::EntryLocation loc;
    if (op.type == BatchOp::Type::kPut &&
        layout::DecodeEntryLocation(payload, conn_->geometry(), Connection::kBlockAreaSize, &loc))
      cache_.Insert(w->inflight[j].key_hash, loc);
  } else {
    op.status = Status(code, Printable(payload, 2048));  // the server's words, escaped
  }
  w->inflight[j] = w->inflight[--w->in];
  return Status::Ok();
}

void ClientImpl::FailWrites(WriteBatch* w, const Status& s) {
  for (int j = 0; j < w->in; ++j) {
    BatchOp& op = w->ops[w->inflight[j].op];
    op.status = Status(Code::kConnectionLost,
                       std::string(OpName(op.type)) + " outcome unknown: the connection to " +
                           Where() + " failed after the request was sent (" + s.ToString() +
                           "); not retried: it may or may not have been applied");
  }
  w->in = 0;
  for (size_t k = w->next; k < w->writes.size(); ++k) {
    BatchOp& op = w->ops[w->writes[k]];
    op.status = Status(Code::kConnectionLost, std::string(OpName(op.type)) +
                                                  " not sent: the connection to " + Where() +
                                                  " failed before it was sent (" + s.ToString() +
                                                  "); the " + OpName(op.type) + " was not applied");
  }
  w->next = w->writes.size();
}

}  // namespace rkv
