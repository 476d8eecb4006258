// SPDX-License-Identifier: Apache-2.0
// ClusterRouter's batches: MultiGet (each owner's keys in batches of Connection::kMaxBatch, one
// round trip each; every owner's batch in flight at once) and Execute (its GETs as one
// MultiGet, then its writes pipelined on every owner at once, in rounds that keep each key's
// writes in order).
#include <algorithm>
#include <map>
#include <optional>

#include "client/cluster_router.h"
#include "client/connection.h"
#include "client/failover_watch.h"
#include "client/multi_get_batch.h"
#include "client/write_batch.h"

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
  // One job per owner; in each wave every job with keys left starts its next batch (its first
  // round's READs posted) before any is finished, so the servers' round trips overlap.
  struct Job {
    uint16_t owner;
    ClientImpl* c;
    const std::vector<size_t>* idx;
    size_t from = 0;  // the next batch's first index into idx
    size_t n = 0;     // the batch in flight
    bool started = false;
    uint32_t slots[Connection::kMaxBatch];
    int distinct = 0;
    std::string_view sub_keys[Connection::kMaxBatch];
    std::string sub_values[Connection::kMaxBatch];
    Status sub_statuses[Connection::kMaxBatch];
    std::unique_ptr<MultiGetBatch> batch;
    std::optional<FailoverWatch> watch;
  };
  std::vector<std::unique_ptr<Job>> jobs;
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
    auto j = std::make_unique<Job>();
    j->owner = owner;
    j->c = c;
    j->idx = &idx;
    j->batch = std::make_unique<MultiGetBatch>();
    jobs.push_back(std::move(j));
  }
  for (;;) {
    Status held;
    const bool leased_before = LeaseHeld(*map, &held) && watcher_->epoch() == map->epoch();
    bool any = false;
    for (auto& jp : jobs) {
      Job& j = *jp;
      if (j.c == nullptr || j.from >= j.idx->size()) continue;
      any = true;
      j.n = std::min<size_t>(Connection::kMaxBatch, j.idx->size() - j.from);
      j.distinct = 0;
      for (size_t k = 0; k < j.n; ++k) {
        const std::string_view key = keys[(*j.idx)[j.from + k]];
        j.sub_keys[k] = key;
        j.sub_statuses[k] = Status(Code::kConnectionLost, "not read: the batch stopped early");
        const uint32_t slot = map->SlotOf(key);
        if (std::find(j.slots, j.slots + j.distinct, slot) == j.slots + j.distinct)
          j.slots[j.distinct++] = slot;
      }
      j.started = false;
      if (!leased_before) continue;  // every key of the batch goes one by one
      j.c->ExpectOwners(j.slots, j.distinct, map->epoch());
      // A batch at a cut-off primary: its READ wait ends once the map gives the batch's first
      // slot to another server (failover moves all of a server's primaries); its keys then go
      // one by one. The hook stays set until the batch is finished.
      if (map->replicas() > 1)
        j.watch.emplace(watcher_.get(), j.c, j.slots[0], map->servers()[j.owner].id, map->epoch(),
                        kAbandonAfterMs);
      // A batch that did not start (the connection broke) is finished one key at a time.
      j.started = j.c->StartBatch(j.sub_keys, j.n, j.batch.get(), j.sub_statuses).ok();
    }
    if (!any) break;
    for (auto& jp : jobs) {
      Job& j = *jp;
      if (j.c == nullptr || j.from >= j.idx->size()) continue;
      if (j.started)
        (void)j.c->FinishBatch(j.sub_keys, j.batch.get(), j.sub_values, j.sub_statuses);
      if (j.watch && j.watch->abandoned()) ++abandoned_waits_;
      j.watch.reset();
    }
    const bool leased =
        leased_before &&
        (map->replicas() <= 1 || (watcher_->Confirmed() && watcher_->epoch() == map->epoch()));
    for (auto& jp : jobs) {
      Job& j = *jp;
      if (j.c == nullptr || j.from >= j.idx->size()) continue;
      for (size_t k = 0; k < j.n; ++k) {
        const size_t i = (*j.idx)[j.from + k];
        const Code code = leased ? j.sub_statuses[k].code() : Code::kMoved;
        if (code == Code::kMoved || code == Code::kConnectionLost || j.c->broken()) {
          single.push_back(i);
        } else {
          (*statuses)[i] = std::move(j.sub_statuses[k]);
          (*values)[i] = std::move(j.sub_values[k]);
        }
      }
      j.from += j.n;
      if (j.c->broken()) {  // the rest of this owner's keys go one by one (reconnecting)
        for (size_t k = j.from; k < j.idx->size(); ++k) single.push_back((*j.idx)[k]);
        j.from = j.idx->size();
        Drop(map->servers()[j.owner].id);
        j.c = nullptr;  // Drop destroyed it
      }
    }
  }
  for (size_t i : single) (*statuses)[i] = Get(keys[i], &(*values)[i]);
  return Status::Ok();
}

Status ClusterRouter::Execute(BatchOp* ops, size_t n) {
  // The GETs first, as one MultiGet (every server's READs in flight at once): a GET of a key the
  // batch also writes returns the value from before the write, which Execute allows.
  std::vector<std::string_view> get_keys;
  std::vector<size_t> gets;
  // Each write's round: how many earlier writes of the batch have its key. Round r's writes go
  // out together, pipelined on every server at once; round r + 1 starts once round r is
  // decided (a write refused MOVED or TRY_AGAIN is routed again alone first), so the writes of
  // one key are applied in the order given even when some of them are redirected.
  std::map<std::string_view, size_t> seen;
  std::vector<std::vector<size_t>> rounds;
  for (size_t i = 0; i < n; ++i) {
    BatchOp& op = ops[i];
    op.status = Status();
    if (op.key.empty()) {
      op.status = Status(Code::kInvalidArgument, "empty key");
    } else if (op.type == BatchOp::Type::kGet) {
      if (op.result == nullptr) {
        op.status = Status(Code::kInvalidArgument, "BatchOp::result is null for a GET");
      } else {
        gets.push_back(i);
        get_keys.push_back(op.key);
      }
    } else if (op.type == BatchOp::Type::kPut || op.type == BatchOp::Type::kDelete) {
      const size_t r = seen[op.key]++;
      if (rounds.size() <= r) rounds.resize(r + 1);
      rounds[r].push_back(i);
    } else {
      op.status = Status(Code::kInvalidArgument, "unknown BatchOp::type");
    }
  }
  if (!gets.empty()) {
    std::vector<std::string> values;
    std::vector<Status> statuses;
    (void)MultiGet(get_keys, &values, &statuses);
    for (size_t k = 0; k < gets.size(); ++k) {
      BatchOp& op = ops[gets[k]];
      op.status = std::move(statuses[k]);
      if (op.status.ok()) op.result->swap(values[k]);
    }
  }
  for (const std::vector<size_t>& round : rounds) ExecuteWrites(ops, round);
  return Status::Ok();
}

void ClusterRouter::ExecuteWrites(BatchOp* ops, const std::vector<size_t>& round) {
  std::shared_ptr<const cluster::SlotMap> map = (Map(), map_);  // held across the calls
  struct Job {
    uint32_t id;
    ClientImpl* c;
    WriteBatch w;
    std::optional<FailoverWatch> watch;
    Status failed;
  };
  std::map<uint16_t, std::unique_ptr<Job>> jobs;  // by owner index
  std::vector<size_t> single;                     // routed alone (Route)
  for (size_t i : round) {
    const uint32_t slot = map->SlotOf(ops[i].key);
    const uint16_t o = map->OwnerIndex(slot);
    if (o == cluster::kUnassigned) {
      single.push_back(i);
      continue;
    }
    auto it = jobs.find(o);
    if (it == jobs.end()) {
      Status s;
      ClientImpl* c = ConnectionTo(*map, o, &s, slot);
      if (c == nullptr) {
        single.push_back(i);  // Route refreshes the map or says why
        continue;
      }
      auto j = std::make_unique<Job>();
      j->id = map->servers()[o].id;
      j->c = c;
      j->w.ops = ops;
      // A write at a cut-off primary: its wait ends once the map gives this slot to another
      // server (failover moves all of a server's primaries); the writes in flight are then
      // "outcome unknown", as a single write's.
      if (map->replicas() > 1)
        j->watch.emplace(watcher_.get(), c, slot, j->id, map->epoch(), kAbandonAfterMs);
      it = jobs.emplace(o, std::move(j)).first;
    }
    Job& j = *it->second;
    Status check = j.c->CheckOp(ops[i]);
    if (!check.ok()) {
      ops[i].status = check;
      continue;
    }
    j.w.writes.push_back(i);
  }
  for (auto& [o, j] : jobs) {
    Status s = j->c->PostWrites(&j->w);
    if (!s.ok()) j->failed = s;
  }
  // Each server's replies in turn, one at a time, its next writes posted as they come.
  for (bool any = true; any;) {
    any = false;
    for (auto& [o, j] : jobs) {
      if (!j->failed.ok() || j->w.done()) continue;
      any = true;
      Status s = j->c->TakeWrite(&j->w);
      if (s.ok()) s = j->c->PostWrites(&j->w);
      if (!s.ok()) j->failed = s;
    }
  }
  for (auto& [o, j] : jobs) {
    if (j->watch && j->watch->abandoned()) ++abandoned_waits_;
    j->watch.reset();
    if (!j->failed.ok() || j->c->broken()) {
      j->c->FailWrites(&j->w, j->failed.ok() ? Status(Code::kConnectionLost, "broken") : j->failed);
      Drop(j->id);  // the next use opens a new connection
    }
    for (size_t i : j->w.writes) {
      const Code code = ops[i].status.code();
      if (code == Code::kMoved || code == Code::kTryAgain) {  // not applied: routed again
        ++redirects_;
        single.push_back(i);
      }
    }
  }
  std::sort(single.begin(), single.end());  // the order given (one write per key a round)
  for (size_t i : single)
    ops[i].status =
        ops[i].type == BatchOp::Type::kPut ? Put(ops[i].key, ops[i].value) : Delete(ops[i].key);
}

}  // namespace rkv
