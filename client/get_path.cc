// SPDX-License-Identifier: Apache-2.0
// The GET path: one-sided READs only. No allocation (values are assigned into the caller's
// string), no locks, no system calls beyond posting and polling (and, in a wait that passed
// Connection::kBusyPollMs, a sleep between polls: a failure, not a round trip).
// First the key's cached location, if the client has met the key (cached_read.cc): one round
// trip of 128 B (an inline entry) or 128 B plus the value's block. Otherwise, or if that does
// not verify, the bucket pair: 1 round trip for an inline entry or an absent key (both candidate
// buckets, which are adjacent, are read by one 2 KiB READ); 2 for a value in the heap or an
// entry in the overflow area (an overflow ref points straight at an overflow slot or at a heap
// block). Every target the buckets name is read in that second round trip (as many as the
// buffer areas hold), so crafted hash collisions cost READs, never a wrong answer
// (common/table/lookup.h).
#include "client/client_impl.h"
#include "client/read_plan.h"

namespace rkv {

using layout::kBucketSize;
using layout::Probe;

Status ClientImpl::PostRound(const Connection::ReadOp* ops, int n) {
  if (owner_check_) return PostOwnedRound(ops, n);
  counters_.reads_posted += n;
  for (int i = 0; i < n; ++i) counters_.bytes_read += ops[i].length;
  ++counters_.round_trips;
  return conn_->PostReads(ops, n);
}

Status ClientImpl::WaitRound() {
  Status s = conn_->WaitReads();
  if (s.ok() && owner_check_) s = CheckOwnerWords();
  return s;
}

ClientImpl::Step ClientImpl::ReadTargets(const Probe& probe, std::string_view key,
                                         std::string* value, Status* result, int* found) {
  bool changed = probe.torn;
  ReadPlan plan(conn_->hello().region_size);
  int next = 0;
  while (next < probe.target_count) {
    plan.Clear();
    int first = next;
    for (; next < probe.target_count; ++next) {
      ReadPlan::Result r = plan.AddTarget(probe.targets[next]);
      if (r == ReadPlan::Result::kInvalid) {
        *result = Status(Code::kProtocolError, "entry points outside the server's region");
        return Step::kDone;
      }
      if (r == ReadPlan::Result::kNoRoom) break;
    }
    *result = RoundTrip(plan.ops(), plan.size());
    if (!result->ok()) return Step::kDone;
    for (int i = 0; i < plan.size(); ++i) {
      layout::FoundValue v;
      switch (layout::ProbeTarget(conn_->buf() + plan.op(i).local_offset, probe.targets[first + i],
                                  key, conn_->hello().hash_seed, &v)) {
        case layout::TargetOutcome::kFound:
          v.AssignTo(value);
          *result = Status::Ok();
          *found = first + i;
          return Step::kDone;
        case layout::TargetOutcome::kChanged:
          changed = true;
          break;
        case layout::TargetOutcome::kNotThis:
          break;
      }
    }
  }
  if (changed) return Step::kRetry;  // a slot or target that may hold the key was changing
  *result = Status(Code::kNotFound, "");
  return Step::kDone;
}

ClientImpl::Step ClientImpl::Resolve(const Probe& probe, uint64_t pair, std::string_view key,
                                     const layout::KeyHash& kh, std::string* value,
                                     Status* result) {
  switch (probe.outcome) {
    case Probe::kFound:
      value->assign(probe.value);
      *result = Status::Ok();
      cache_.Insert(kh.hash, layout::LocationOfFound(probe, -1, pair));
      return Step::kDone;
    case Probe::kAbsent:
      *result = Status(Code::kNotFound, "");
      return Step::kDone;
    case Probe::kTorn:
      return Step::kRetry;
    case Probe::kFollow: {
      int found = -1;
      Step step = ReadTargets(probe, key, value, result, &found);
      if (found >= 0) {
        layout::EntryLocation loc = layout::LocationOfFound(probe, found, pair);
        if (layout::EntryLocationFits(loc, conn_->geometry(), Connection::kBlockAreaSize))
          cache_.Insert(kh.hash, loc);
      }
      return step;
    }
  }
  return Step::kRetry;
}

Status ClientImpl::Get(std::string_view key, std::string* value) {
  Status s = Usable();
  if (s.ok()) s = CheckKey(key);
  if (!s.ok()) return s;
  ++counters_.gets;
  return ReadKey(key, value);
}

Status ClientImpl::ReadKey(std::string_view key, std::string* value) {
  Status s;
  const wire::OpenReply& h = conn_->hello();
  const layout::KeyHash kh = layout::HashKey(key, h.hash_seed, h.num_buckets);
  if (ReadCached(key, kh, value, &s) == Step::kDone) return s;
  const uint8_t* b = conn_->buf() + Connection::kBucketArea;
  // Both candidates (home bucket and the next) in one READ.
  const uint64_t pair = uint64_t(kh.bucket[0]) * h.bucket_size;
  const Connection::ReadOp op{Connection::kBucketArea, pair, 2 * kBucketSize};
  for (int attempt = 0; attempt <= options_.max_get_retries; ++attempt) {
    s = RoundTrip(&op, 1);
    if (!s.ok()) return s;
    Probe p = layout::ProbeBuckets(b, b + kBucketSize, key, kh, h.hash_seed);
    if (Resolve(p, pair, key, kh, value, &s) == Step::kDone) return s;
    ++counters_.checksum_retries;
  }
  return Status(Code::kRetriesExhausted, "GET saw a torn or changing entry on " +
                                             std::to_string(options_.max_get_retries + 1) +
                                             " consecutive reads (key under constant rewrite?)");
}

}  // namespace rkv
