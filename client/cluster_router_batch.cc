// SPDX-License-Identifier: Apache-2.0
// ClusterRouter's batches: MultiGet (each owner's keys in batches of Connection::kMaxBatch, one
// round trip each) and Execute (one by one through Route).
#include <algorithm>
#include <map>
#include <optional>

#include "client/cluster_router.h"
#include "client/connection.h"
#include "client/failover_watch.h"

namespace rkv {

Status ClusterRouter::MultiGet(const std::vector<std::string_view>& keys,
                               std::vector<std::string>* values, std::vector<Status>* statuses) {
  values->resize(keys.size());
  statuses->assign(keys.size(), Status());
  std::shared_ptr<const cluster::SlotMap> map = (Map(), map_);  // held across the calls
  // Keys by owner; each owner's keys in batches of Connection::kMaxBatch (one round trip for
  // all of them, each slot's ownership word read with it). A key whose batch met a moved slot
  // or a lost connection, or without an owner, goes through the single-key path (Route).
  std::map<uint16_t, std::vector<size_t>> by_owner;
  std::vector<size_t> single;
  for (size_t i = 0; i < keys.size(); ++i) {
    if (keys[i].empty()) {
      (*statuses)[i] = Status(Code::kInvalidArgument, "empty key");
      continue;
    }
    const uint16_t o = map->OwnerIndex(map->SlotOf(keys[i]));
    (o == cluster::kUnassigned ? single : by_owner[o]).push_back(i);
  }
  std::vector<std::string_view> sub_keys;
  std::vector<std::string> sub_values;
  std::vector<Status> sub_statuses;
  for (const auto& [owner, idx] : by_owner) {
    Status s;
    ClientImpl* c = ConnectionTo(*map, owner, &s, map->SlotOf(keys[idx.front()]));
    if (c == nullptr) {
      if (watcher_->epoch() > map->epoch()) {  // a newer map: these keys one by one
        single.insert(single.end(), idx.begin(), idx.end());
      } else {
        for (size_t i : idx) (*statuses)[i] = s;
      }
      continue;
    }
    for (size_t from = 0; from < idx.size(); from += Connection::kMaxBatch) {
      const size_t n = std::min<size_t>(Connection::kMaxBatch, idx.size() - from);
      uint32_t slots[Connection::kMaxBatch];
      int distinct = 0;
      sub_keys.clear();
      for (size_t j = 0; j < n; ++j) {
        const std::string_view k = keys[idx[from + j]];
        sub_keys.push_back(k);
        const uint32_t slot = map->SlotOf(k);
        if (std::find(slots, slots + distinct, slot) == slots + distinct) slots[distinct++] = slot;
      }
      c->ExpectOwners(slots, distinct, map->epoch());
      Status held;
      const bool leased_before = LeaseHeld(*map, &held) && watcher_->epoch() == map->epoch();
      if (leased_before) {
        // A batch at a cut-off primary: its READ wait ends once the map gives the batch's
        // first slot to another server (failover moves all of a server's primaries); its keys
        // then go one by one.
        std::optional<FailoverWatch> watch;
        if (map->replicas() > 1)
          watch.emplace(watcher_.get(), c, slots[0], map->servers()[owner].id, map->epoch(),
                        kAbandonAfterMs);
        (void)c->MultiGet(sub_keys, &sub_values, &sub_statuses);
        if (watch && watch->abandoned()) ++abandoned_waits_;
      }
      const bool leased =
          leased_before &&
          (map->replicas() <= 1 || (watcher_->Confirmed() && watcher_->epoch() == map->epoch()));
      for (size_t j = 0; j < n; ++j) {
        const size_t i = idx[from + j];
        const Code code = leased ? sub_statuses[j].code() : Code::kMoved;
        if (code == Code::kMoved || code == Code::kConnectionLost || c->broken()) {
          single.push_back(i);
        } else {
          (*statuses)[i] = std::move(sub_statuses[j]);
          (*values)[i] = std::move(sub_values[j]);
        }
      }
      if (c->broken()) {  // the rest of this owner's keys go one by one (reconnecting)
        for (size_t j = from + n; j < idx.size(); ++j) single.push_back(idx[j]);
        Drop(map->servers()[owner].id);
        break;
      }
    }
  }
  for (size_t i : single) (*statuses)[i] = Get(keys[i], &(*values)[i]);
  return Status::Ok();
}

Status ClusterRouter::Execute(BatchOp* ops, size_t n) {
  for (size_t i = 0; i < n; ++i) {
    BatchOp& op = ops[i];
    switch (op.type) {
      case BatchOp::Type::kGet:
        op.status = op.result ? Get(op.key, op.result)
                              : Status(Code::kInvalidArgument, "a GET needs a result string");
        break;
      case BatchOp::Type::kPut:
        op.status = Put(op.key, op.value);
        break;
      case BatchOp::Type::kDelete:
        op.status = Delete(op.key);
        break;
    }
  }
  return Status::Ok();
}

}  // namespace rkv
