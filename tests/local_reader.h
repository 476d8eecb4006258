// SPDX-License-Identifier: Apache-2.0
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

// One GET attempt. copy == false probes the region in place (single-threaded tests); copy ==
// true first copies the buckets and then every target (one memcpy each, like an RDMA READ),
// so a reader racing writers sees what a client would. `between` runs between the two rounds
// (tests put delays there). kRetry means the client would re-read.
template <typename Between>
LocalReadResult ReadOnce(const uint8_t* region, const layout::Geometry& geo, std::string_view key,
                         bool copy, Between between) {
  LocalReadResult r;
  const layout::KeyHash kh = layout::HashKey(key, geo.seed, geo.num_buckets);
  alignas(64) uint8_t copied[2 * layout::kBucketSize];
  const uint8_t* b = region + geo.bucket_offset(kh.bucket[0]);
  if (copy) b = static_cast<const uint8_t*>(std::memcpy(copied, b, sizeof copied));
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
  between();
  r.round_trips = 2;
  bool changed = p.torn;
  std::vector<uint8_t> target;
  for (int i = 0; i < p.target_count; ++i) {
    const layout::Target& t = p.targets[i];
    if (t.offset + t.length > geo.region_size) {  // the client reports PROTOCOL_ERROR
      changed = true;
      continue;
    }
    const uint8_t* bytes = region + t.offset;
    if (copy) {
      target.assign(bytes, bytes + t.length);
      bytes = target.data();
    }
    layout::FoundValue v;
    switch (layout::ProbeTarget(bytes, t, key, geo.seed, &v)) {
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

// In place, single-threaded (see the contract above).
inline LocalReadResult LocalRead(const uint8_t* region, const layout::Geometry& geo,
                                 std::string_view key) {
  return ReadOnce(region, geo, key, false, [] {});
}
// The way a NIC serves it, for readers racing writers.
template <typename Between>
LocalReadResult NicRead(const uint8_t* region, const layout::Geometry& geo, std::string_view key,
                        Between between) {
  return ReadOnce(region, geo, key, true, between);
}

}  // namespace rkv::testing

#endif  // RKV_TESTS_LOCAL_READER_H_
