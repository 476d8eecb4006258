// SPDX-License-Identifier: Apache-2.0
// MultiGet: GETs of many keys with their READs posted together, on the same lean terms as the
// single-key path in get_path.cc (no locks, no system calls beyond posting and polling; the
// only allocation is in the caller's vectors). Per batch of up to kMaxBatch keys:
//   round 1: both candidate buckets of every key (one READ per key), posted by StartBatch;
//   round 2: every target (heap block, overflow slot or block) of every key whose buckets named
//            any, together, as many keys as fit the buffer's block and overflow areas;
// A key with a cached location (client/location_cache.h) reads that instead of its buckets, in
// round 1 with the others, and is decided there when it verifies (cached_read.cc's rule);
// then whatever is left (an entry torn or changed between the rounds, targets that did not fit)
// finishes through the single-key attempt loop (FinishBatch does all of this once round 1 is
// in). A cluster MultiGet starts a batch on every server before it finishes any
// (cluster_router_batch.cc).
// Every key's status says what happened to it: OK, NOT_FOUND, an error of its own (bad key,
// retries exhausted), or, when the connection fails, that failure for every key not yet decided.
#include "client/client_impl.h"
#include "client/multi_get_batch.h"
#include "client/read_plan.h"

namespace rkv {

using layout::kBucketSize;
using layout::Probe;

Status ClientImpl::MultiGet(const std::vector<std::string_view>& keys,
                            std::vector<std::string>* values, std::vector<Status>* statuses) {
  values->resize(keys.size());
  Status s = Usable();
  // Until a key is decided its status is the reason it was not: set to the failure if any.
  statuses->assign(keys.size(),
                   s.ok() ? Status(Code::kConnectionLost, "not read: MultiGet stopped early") : s);
  if (!s.ok()) return s;
  MultiGetBatch b;
  for (size_t start = 0; start < keys.size(); start += Connection::kMaxBatch) {
    const size_t n = std::min<size_t>(Connection::kMaxBatch, keys.size() - start);
    s = StartBatch(keys.data() + start, n, &b, statuses->data() + start);
    if (s.ok())
      s = FinishBatch(keys.data() + start, &b, values->data() + start, statuses->data() + start);
    if (!s.ok()) {
      for (size_t i = start; i < keys.size(); ++i)
        if ((*statuses)[i].code() == Code::kConnectionLost) (*statuses)[i] = s;
      return s;
    }
  }
  return Status::Ok();
}

Status ClientImpl::StartBatch(const std::string_view* keys, size_t n, MultiGetBatch* b,
                              Status* statuses) {
  b->n = n;
  b->posted = false;
  Status s = Usable();
  if (!s.ok()) return s;
  if (n > Connection::kMaxBatch)
    return Status(Code::kInvalidArgument, "a MultiGet batch holds at most 16 keys");
  const wire::OpenReply& h = conn_->hello();
  ReadPlan& plan = b->plan.emplace(h.region_size);
  for (size_t i = 0; i < n; ++i) {
    b->next[i] = MultiGetBatch::kDone;
    Status check = CheckKey(keys[i]);
    if (!check.ok()) {
      statuses[i] = check;
      continue;
    }
    ++counters_.gets;
    b->kh[i] = layout::HashKey(keys[i], h.hash_seed, h.num_buckets);
    if (cache_.Lookup(b->kh[i].hash, &b->loc[i])) {
      const ReadPlan::Mark mark = plan.mark();
      ReadPlan::Result r = plan.AddCached(b->loc[i]);
      if (r == ReadPlan::Result::kAdded) {
        b->next[i] = MultiGetBatch::kCached;
        b->first_op[i] = mark.n;
        continue;
      }
      plan.Rewind(mark);
    }
    // A miss is counted where the key is decided from its buckets (a key that falls back to
    // ReadKey is counted there): once per key.
    b->next[i] = MultiGetBatch::kSecond;
    if (plan.AddBuckets(int(i), uint64_t(b->kh[i].bucket[0]) * h.bucket_size) !=
        ReadPlan::Result::kAdded)
      b->next[i] = MultiGetBatch::kSingle;  // cannot happen (ReadPlan checks the geometry)
  }
  if (plan.size() == 0) return Status::Ok();
  s = PostRound(plan.ops(), plan.size());
  b->posted = s.ok();
  return s;
}

Status ClientImpl::FinishBatch(const std::string_view* keys, MultiGetBatch* b, std::string* values,
                               Status* statuses) {
  const wire::OpenReply& h = conn_->hello();
  const size_t n = b->n;
  if (!b->plan) return Status(Code::kInvalidArgument, "FinishBatch without StartBatch");
  ReadPlan& plan = *b->plan;
  MultiGetBatch::Next* next = b->next;
  const layout::KeyHash* kh = b->kh;
  int* first_op = b->first_op;
  if (b->posted) {
    b->posted = false;
    Status s = WaitRound();
    if (!s.ok()) return s;
  }
  // Keys read through their cached location: decided, or read alone (ReadKey).
  for (size_t i = 0; i < n; ++i) {
    if (next[i] != MultiGetBatch::kCached) continue;
    std::string_view key = keys[i];
    const uint8_t* anchor = conn_->buf() + plan.op(first_op[i]).local_offset;
    const uint8_t* block =
        b->loc[i].has_block() ? conn_->buf() + plan.op(first_op[i] + 1).local_offset : nullptr;
    layout::FoundValue v;
    layout::Target follow;
    layout::EntryLocation now;
    switch (
        layout::ProbeCached(b->loc[i], anchor, block, key, kh[i], h.hash_seed, &v, &follow, &now)) {
      case layout::CachedOutcome::kFound:
        v.AssignTo(&values[i]);
        statuses[i] = Status::Ok();
        ++counters_.cache_hits;
        if (now.kind != b->loc[i].kind) cache_.Insert(kh[i].hash, now);
        next[i] = MultiGetBatch::kDone;
        break;
      case layout::CachedOutcome::kFollow:  // ReadKey reads the slot again and follows it
        next[i] = MultiGetBatch::kSingle;
        break;
      case layout::CachedOutcome::kMiss:  // ReadKey then misses the cache (and counts it)
        cache_.Erase(kh[i].hash);
        next[i] = MultiGetBatch::kSingle;
        break;
    }
  }

  // Decide from the buckets; plan the second round for keys with targets.
  Probe probe[Connection::kMaxBatch];
  plan.Clear();
  for (size_t i = 0; i < n; ++i) {
    if (next[i] != MultiGetBatch::kSecond) continue;
    std::string_view key = keys[i];
    Status& st = statuses[i];
    const uint8_t* pair = conn_->buf() + Connection::kBucketArea + 2 * i * kBucketSize;
    Probe& p = probe[i];
    p = layout::ProbeBuckets(pair, pair + kBucketSize, key, kh[i], h.hash_seed);
    if (p.outcome == Probe::kFound) {
      cache_.Insert(kh[i].hash,
                    layout::LocationOfFound(p, -1, uint64_t(kh[i].bucket[0]) * h.bucket_size));
      values[i].assign(p.value);
      st = Status::Ok();
      next[i] = MultiGetBatch::kDone;
      ++counters_.cache_misses;
      continue;
    }
    if (p.outcome == Probe::kAbsent) {
      st = Status(Code::kNotFound, "");
      next[i] = MultiGetBatch::kDone;
      ++counters_.cache_misses;
      continue;
    }
    next[i] = MultiGetBatch::kSingle;
    if (p.outcome == Probe::kTorn) continue;
    // All of this key's targets in round 2, or none (the single-key loop reads them, and
    // reports a target outside the region).
    const ReadPlan::Mark mark = plan.mark();
    bool planned = true;
    for (int t = 0; t < p.target_count && planned; ++t)
      planned = plan.AddTarget(p.targets[t]) == ReadPlan::Result::kAdded;
    if (!planned) {
      plan.Rewind(mark);
      continue;
    }
    next[i] = MultiGetBatch::kSecond;
    first_op[i] = mark.n;
  }

  if (plan.size() > 0) {
    Status s = RoundTrip(plan.ops(), plan.size());
    if (!s.ok()) return s;
    for (size_t i = 0; i < n; ++i) {
      if (next[i] != MultiGetBatch::kSecond) continue;
      const Probe& p = probe[i];
      bool found = false, changed = p.torn;
      for (int t = 0; t < p.target_count && !found; ++t) {
        layout::FoundValue v;
        switch (layout::ProbeTarget(conn_->buf() + plan.op(first_op[i] + t).local_offset,
                                    p.targets[t], keys[i], h.hash_seed, &v)) {
          case layout::TargetOutcome::kFound: {
            v.AssignTo(&values[i]);
            found = true;
            layout::EntryLocation at =
                layout::LocationOfFound(p, t, uint64_t(kh[i].bucket[0]) * h.bucket_size);
            if (layout::EntryLocationFits(at, conn_->geometry(), Connection::kBlockAreaSize))
              cache_.Insert(kh[i].hash, at);
            break;
          }
          case layout::TargetOutcome::kChanged:
            changed = true;
            break;
          case layout::TargetOutcome::kNotThis:
            break;
        }
      }
      if (found) {
        statuses[i] = Status::Ok();
        next[i] = MultiGetBatch::kDone;
        ++counters_.cache_misses;
      } else if (changed) {
        ++counters_.checksum_retries;
        next[i] = MultiGetBatch::kSingle;
      } else {
        statuses[i] = Status(Code::kNotFound, "");
        next[i] = MultiGetBatch::kDone;
        ++counters_.cache_misses;
      }
    }
  }
  for (size_t i = 0; i < n; ++i) {
    if (next[i] != MultiGetBatch::kSingle) continue;
    Status& st = statuses[i];
    st = ReadKey(keys[i], &values[i]);
    if (st.code() == Code::kConnectionLost || st.code() == Code::kTimeout) return st;
  }
  return Status::Ok();
}

}  // namespace rkv
