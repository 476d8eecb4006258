// LocalRead: the client's GET decision procedure (client/get_path.cc) run over a region in local
// memory, for tests of the table's layout: probe both buckets, then decide every target.
// Thread safety: pure over the bytes given. It reads live memory in place (it checksums bytes and
// then reads them again), so it is not a model of a NIC's READ under concurrent writers: tests
// that race writers must copy the bytes first.
#ifndef RKV_TESTS_LOCAL_READER_H_
#define RKV_TESTS_LOCAL_READER_H_

#include <cstring>
#include <string>
#include <string_view>
#include <vector>

#include "common/table/layout.h"
#include "common/table/lookup.h"

namespace rkv::testing {

struct LocalReadResult {
  enum Outcome { kFound, kAbsent, kRetry } outcome = kAbsent;
  std::string value;
  int round_trips = 0;     // bucket READ + one for the targets, if any
  bool via_ref = false;    // found through an overflow ref
  int slots_verified = 0;  // checksums the slot filter let through
};

inline LocalReadResult LocalRead(const uint8_t* region, const layout::Geometry& geo,
                                 std::string_view key) {
  LocalReadResult r;
  const layout::KeyHash kh = layout::HashKey(key, geo.seed, geo.num_buckets);
  const uint8_t* b = region + geo.bucket_offset(kh.bucket[0]);
  layout::Probe p = layout::ProbeBuckets(b, b + layout::kBucketSize, key, kh, geo.seed);
  r.round_trips = 1;
  r.slots_verified = p.slots_verified;
  if (p.outcome == layout::Probe::kFound) {
    r.outcome = LocalReadResult::kFound;
    r.value.assign(p.value);
    return r;
  }
  if (p.outcome != layout::Probe::kFollow) {
    r.outcome =
        p.outcome == layout::Probe::kTorn ? LocalReadResult::kRetry : LocalReadResult::kAbsent;
    return r;
  }
  r.round_trips = 2;
  bool changed = p.torn;
  for (int i = 0; i < p.target_count; ++i) {
    const layout::Target& t = p.targets[i];
    if (t.offset + t.length > geo.region_size) {
      changed = true;
      continue;
    }
    layout::FoundValue v;
    switch (layout::ProbeTarget(region + t.offset, t, key, geo.seed, &v)) {
      case layout::TargetOutcome::kFound:
        r.outcome = LocalReadResult::kFound;
        v.AssignTo(&r.value);
        r.via_ref = t.kind != layout::Target::kSlotBlock;
        return r;
      case layout::TargetOutcome::kChanged:
        changed = true;
        break;
      case layout::TargetOutcome::kNotThis:
        break;
    }
  }
  r.outcome = changed ? LocalReadResult::kRetry : LocalReadResult::kAbsent;
  return r;
}

// One GET attempt the way a NIC serves it: the buckets and then every target are COPIED out of
// the region (one memcpy each, like an RDMA READ) before they are probed, so a reader racing
// writers sees what a client would. `between` runs between the two copies (tests put delays
// there). kRetry means the client would re-read.
template <typename Between>
LocalReadResult NicRead(const uint8_t* region, const layout::Geometry& geo, std::string_view key,
                        Between between) {
  LocalReadResult r;
  const layout::KeyHash kh = layout::HashKey(key, geo.seed, geo.num_buckets);
  alignas(64) uint8_t buckets[2 * layout::kBucketSize];
  std::memcpy(buckets, region + geo.bucket_offset(kh.bucket[0]), sizeof buckets);
  layout::Probe p = layout::ProbeBuckets(buckets, buckets + layout::kBucketSize, key, kh, geo.seed);
  r.round_trips = 1;
  if (p.outcome == layout::Probe::kFound) {
    r.outcome = LocalReadResult::kFound;
    r.value.assign(p.value);
    return r;
  }
  if (p.outcome != layout::Probe::kFollow) {
    r.outcome =
        p.outcome == layout::Probe::kTorn ? LocalReadResult::kRetry : LocalReadResult::kAbsent;
    return r;
  }
  between();
  r.round_trips = 2;
  bool changed = p.torn;
  std::vector<uint8_t> copy;
  for (int i = 0; i < p.target_count; ++i) {
    const layout::Target& t = p.targets[i];
    if (t.offset + t.length > geo.region_size) {
      r.outcome = LocalReadResult::kRetry;  // the client reports PROTOCOL_ERROR
      r.value = "target outside the region";
      return r;
    }
    copy.assign(region + t.offset, region + t.offset + t.length);
    layout::FoundValue v;
    switch (layout::ProbeTarget(copy.data(), t, key, geo.seed, &v)) {
      case layout::TargetOutcome::kFound:
        r.outcome = LocalReadResult::kFound;
        v.AssignTo(&r.value);
        r.via_ref = t.kind != layout::Target::kSlotBlock;
        return r;
      case layout::TargetOutcome::kChanged:
        changed = true;
        break;
      case layout::TargetOutcome::kNotThis:
        break;
    }
  }
  r.outcome = changed ? LocalReadResult::kRetry : LocalReadResult::kAbsent;
  return r;
}

}  // namespace rkv::testing

#endif  // RKV_TESTS_LOCAL_READER_H_
