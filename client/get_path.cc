// The GET path: one-sided READs only. No allocation (values are assigned into the caller's
// string), no locks, no system calls beyond posting and polling.
// Round trips: 1 for an inline entry or an absent key (both candidate buckets, which are
// adjacent, are read by one 2 KiB READ); 2 for a value in the heap or an entry in the overflow area
// (an overflow ref points straight at an overflow slot or at a heap block).
#include "client/client_impl.h"

namespace rkv {

using layout::kBucketSize;
using layout::kSlotSize;
using layout::Probe;

Status ClientImpl::RoundTrip(const Connection::ReadOp* ops, int n) {
  Status s = conn_->PostReads(ops, n);
  if (s.ok()) s = conn_->WaitReads(n);
  counters_.reads_posted += n;
  ++counters_.round_trips;
  return s;
}

ClientImpl::Step ClientImpl::ReadIndirect(const layout::SlotView& slot, std::string_view key,
                                          std::string* value, Status* result) {
  uint32_t len = layout::BlockBytes(slot.key_size, slot.value_size);
  if (slot.block_offset + len > conn_->hello().region_size ||
      len > Connection::kSendArea - Connection::kBlockArea) {
    *result = Status(Code::kProtocolError, "entry points outside the server's region");
    return Step::kDone;
  }
  Connection::ReadOp op{Connection::kBlockArea, slot.block_offset, len};
  *result = RoundTrip(&op, 1);
  if (!result->ok()) return Step::kDone;
  std::string_view k, v;
  if (!layout::DecodeBlock(conn_->buf() + Connection::kBlockArea, len, conn_->hello().hash_seed,
                           slot, &k, &v))
    return Step::kRetry;  // block rewritten or reused since we read the slot
  if (k != key) {
    *result = Status(Code::kNotFound, "");  // 64-bit hash collision with another long key
    return Step::kDone;
  }
  value->assign(v);
  *result = Status::Ok();
  return Step::kDone;
}

ClientImpl::Step ClientImpl::Resolve(const Probe& probe, std::string_view key,
                                     const layout::KeyHash& kh, std::string* value,
                                     Status* result) {
  switch (probe.outcome) {
    case Probe::kFound:
      value->assign(probe.value);
      *result = Status::Ok();
      return Step::kDone;
    case Probe::kIndirect:
      return ReadIndirect(probe.slot, key, value, result);
    case Probe::kAbsent:
      *result = Status(Code::kNotFound, "");
      return Step::kDone;
    case Probe::kTorn:
      return Step::kRetry;
    case Probe::kOverflow:
      return ReadRefs(probe, key, kh, value, result);
  }
  return Step::kRetry;
}

ClientImpl::Step ClientImpl::ReadRefs(const Probe& probe, std::string_view key,
                                      const layout::KeyHash& kh, std::string* value,
                                      Status* result) {
  // A ref carries only the low 32 bits of its entry's version. Ref and target read more than a
  // second apart could, in theory, meet a version that wrapped (2^32 writes): re-read instead.
  constexpr auto kMaxRefAge = std::chrono::seconds(1);
  const wire::ServerHello& h = conn_->hello();
  bool torn = false;
  int next = 0;
  while (next < probe.ref_count) {
    // One round trip: every slot ref and at most one block ref (the block area holds one).
    Connection::ReadOp ops[layout::kMaxOverflowCandidates];
    const layout::Ref* refs[layout::kMaxOverflowCandidates];
    int n = 0;
    bool block = false;
    for (; next < probe.ref_count; ++next) {
      const layout::Ref& r = probe.refs[next];
      bool is_block = r.type == layout::Ref::kBlock;
      uint32_t len = is_block ? r.length : kSlotSize;
      if (r.offset + len > h.region_size ||
          (is_block && len > Connection::kSendArea - Connection::kBlockArea)) {
        torn = true;  // a torn ref: its words came from different writes
        continue;
      }
      if (is_block && block) break;
      block |= is_block;
      ops[n] = {
          is_block ? Connection::kBlockArea : Connection::kOverflowArea + uint64_t(n) * kSlotSize,
          r.offset, len};
      refs[n++] = &r;
    }
    if (n == 0) break;
    *result = RoundTrip(ops, n);
    if (!result->ok()) return Step::kDone;
    if (std::chrono::steady_clock::now() - attempt_start_ > kMaxRefAge) return Step::kRetry;
    for (int i = 0; i < n; ++i) {
      Probe p =
          layout::ProbeRef(conn_->buf() + ops[i].local_offset, *refs[i], key, kh, h.hash_seed);
      if (p.outcome == Probe::kFound || p.outcome == Probe::kIndirect)
        return Resolve(p, key, kh, value, result);
      torn |= p.outcome == Probe::kTorn;
    }
  }
  if (torn) return Step::kRetry;
  *result = Status(Code::kNotFound, "");
  return Step::kDone;
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
  const wire::ServerHello& h = conn_->hello();
  const layout::KeyHash kh = layout::HashKey(key, h.hash_seed, h.num_buckets);
  const uint8_t* b = conn_->buf() + Connection::kBucketArea;
  // Both candidates (home bucket and the next) in one READ.
  const Connection::ReadOp op{Connection::kBucketArea, uint64_t(kh.bucket[0]) * h.bucket_size,
                              2 * kBucketSize};
  for (int attempt = 0; attempt <= options_.max_get_retries; ++attempt) {
    attempt_start_ = std::chrono::steady_clock::now();
    s = RoundTrip(&op, 1);
    if (!s.ok()) return s;
    Probe p = layout::ProbeBuckets(b, b + kBucketSize, key, kh, h.hash_seed);
    if (Resolve(p, key, kh, value, &s) == Step::kDone) return s;
    ++counters_.checksum_retries;
  }
  return Status(Code::kRetriesExhausted, "GET saw a torn or changing entry on " +
                                             std::to_string(options_.max_get_retries + 1) +
                                             " consecutive reads (key under constant rewrite?)");
}

}  // namespace rkv
