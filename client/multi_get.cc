// SPDX-License-Identifier: Apache-2.0
// MultiGet: GETs of many keys with their READs posted together, on the same lean terms as the
// single-key path in get_path.cc (no locks, no system calls beyond posting and polling; the
// only allocation is in the caller's vectors). Per batch of up to kMaxBatch keys:
//   round 1: both candidate buckets of every key (one READ per key);
//   round 2: every target (heap block, overflow slot or block) of every key whose buckets named
//            any, together, as many keys as fit the buffer's block and overflow areas;
// A key with a cached location (client/location_cache.h) reads that instead of its buckets, in
// round 1 with the others, and is decided there when it verifies (cached_read.cc's rule);
// then whatever is left (an entry torn or changed between the rounds, targets that did not fit)
// finishes through the single-key attempt loop.
// Every key's status says what happened to it: OK, NOT_FOUND, an error of its own (bad key,
// retries exhausted), or, when the connection fails, that failure for every key not yet decided.
#include "client/client_impl.h"
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
  const wire::OpenReply& h = conn_->hello();
  auto fail_rest = [&](size_t from, const Status& why) {
    for (size_t i = from; i < keys.size(); ++i)
      if ((*statuses)[i].code() == Code::kConnectionLost) (*statuses)[i] = why;
    return why;
  };
  ReadPlan plan(h.region_size);
  for (size_t start = 0; start < keys.size(); start += Connection::kMaxBatch) {
    const size_t n = std::min<size_t>(Connection::kMaxBatch, keys.size() - start);
    layout::KeyHash kh[Connection::kMaxBatch];
    enum Next : uint8_t { kDone, kSecond, kSingle, kCached };
    Next next[Connection::kMaxBatch];
    layout::EntryLocation loc[Connection::kMaxBatch];
    int first_op[Connection::kMaxBatch] = {};
    plan.Clear();
    for (size_t i = 0; i < n; ++i) {
      Status& st = (*statuses)[start + i];
      next[i] = kDone;
      Status check = CheckKey(keys[start + i]);
      if (!check.ok()) {
        st = check;
        continue;
      }
      ++counters_.gets;
      kh[i] = layout::HashKey(keys[start + i], h.hash_seed, h.num_buckets);
      if (cache_.Lookup(kh[i].hash, &loc[i])) {
        const ReadPlan::Mark mark = plan.mark();
        ReadPlan::Result r = plan.AddCached(loc[i]);
        if (r == ReadPlan::Result::kAdded) {
          next[i] = kCached;
          first_op[i] = mark.n;
          continue;
        }
        plan.Rewind(mark);
      }
      // A miss is counted where the key is decided from its buckets (a key that falls back to
      // ReadKey is counted there): once per key.
      next[i] = kSecond;
      if (plan.AddBuckets(int(i), uint64_t(kh[i].bucket[0]) * h.bucket_size) !=
          ReadPlan::Result::kAdded)
        next[i] = kSingle;  // cannot happen (ReadPlan checks the geometry): read it alone
    }
    if (plan.size() > 0) {
      s = RoundTrip(plan.ops(), plan.size());
      if (!s.ok()) return fail_rest(start, s);
    }

    // Keys read through their cached location: decided, or read alone (ReadKey).
    for (size_t i = 0; i < n; ++i) {
      if (next[i] != kCached) continue;
      std::string_view key = keys[start + i];
      const uint8_t* anchor = conn_->buf() + plan.op(first_op[i]).local_offset;
      const uint8_t* block =
          loc[i].has_block() ? conn_->buf() + plan.op(first_op[i] + 1).local_offset : nullptr;
      layout::FoundValue v;
      layout::Target follow;
      layout::EntryLocation now;
      switch (
          layout::ProbeCached(loc[i], anchor, block, key, kh[i], h.hash_seed, &v, &follow, &now)) {
        case layout::CachedOutcome::kFound:
          v.AssignTo(&(*values)[start + i]);
          (*statuses)[start + i] = Status::Ok();
          ++counters_.cache_hits;
          if (now.kind != loc[i].kind) cache_.Insert(kh[i].hash, now);
          next[i] = kDone;
          break;
        case layout::CachedOutcome::kFollow:  // ReadKey reads the slot again and follows it
          next[i] = kSingle;
          break;
        case layout::CachedOutcome::kMiss:  // ReadKey then misses the cache (and counts it)
          cache_.Erase(kh[i].hash);
          next[i] = kSingle;
          break;
      }
    }

    // Decide from the buckets; plan the second round for keys with targets.
    Probe probe[Connection::kMaxBatch];
    plan.Clear();
    for (size_t i = 0; i < n; ++i) {
      if (next[i] != kSecond) continue;
      std::string_view key = keys[start + i];
      Status& st = (*statuses)[start + i];
      const uint8_t* b = conn_->buf() + Connection::kBucketArea + 2 * i * kBucketSize;
      Probe& p = probe[i];
      p = layout::ProbeBuckets(b, b + kBucketSize, key, kh[i], h.hash_seed);
      if (p.outcome == Probe::kFound) {
        cache_.Insert(kh[i].hash,
                      layout::LocationOfFound(p, -1, uint64_t(kh[i].bucket[0]) * h.bucket_size));
        (*values)[start + i].assign(p.value);
        st = Status::Ok();
        next[i] = kDone;
        ++counters_.cache_misses;
        continue;
      }
      if (p.outcome == Probe::kAbsent) {
        st = Status(Code::kNotFound, "");
        next[i] = kDone;
        ++counters_.cache_misses;
        continue;
      }
      next[i] = kSingle;
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
      next[i] = kSecond;
      first_op[i] = mark.n;
    }

    if (plan.size() > 0) {
      s = RoundTrip(plan.ops(), plan.size());
      if (!s.ok()) return fail_rest(start, s);
      for (size_t i = 0; i < n; ++i) {
        if (next[i] != kSecond) continue;
        const Probe& p = probe[i];
        bool found = false, changed = p.torn;
        for (int t = 0; t < p.target_count && !found; ++t) {
          layout::FoundValue v;
          switch (layout::ProbeTarget(conn_->buf() + plan.op(first_op[i] + t).local_offset,
                                      p.targets[t], keys[start + i], h.hash_seed, &v)) {
            case layout::TargetOutcome::kFound: {
              v.AssignTo(&(*values)[start + i]);
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
          (*statuses)[start + i] = Status::Ok();
          next[i] = kDone;
          ++counters_.cache_misses;
        } else if (changed) {
          ++counters_.checksum_retries;
          next[i] = kSingle;
        } else {
          (*statuses)[start + i] = Status(Code::kNotFound, "");
          next[i] = kDone;
          ++counters_.cache_misses;
        }
      }
    }
    for (size_t i = 0; i < n; ++i) {
      if (next[i] != kSingle) continue;
      Status& st = (*statuses)[start + i];
      st = ReadKey(keys[start + i], &(*values)[start + i]);
      if (st.code() == Code::kConnectionLost || st.code() == Code::kTimeout)
        return fail_rest(start + i + 1, st);
    }
  }
  return Status::Ok();
}

}  // namespace rkv
