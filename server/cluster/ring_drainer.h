// SPDX-License-Identifier: Apache-2.0
// RingDrainer: a backup's log rings (docs/replication-rings.md) and the thread that applies
// their records. Every complete record of every ring is handed, in ring order, to the apply
// function, which checks it and applies it exactly as a REPLICATE that arrived then
// (RpcExecutor's replication code) and says:
//   kApplied  done (also a resend of the last number, taken without a change): consumed;
//   kWait     not now (its slot's previous number is in another ring of the same writer, not
//             read yet; or its BACKUP slot is freeing entries for a moment): the ring waits,
//             the others go on. A head that waited kStuckHeadMs gets a last try (ApplyFn's
//             last_try), where it must not wait again: refused (a kWait then counts so);
//   kRefused  never (a record its writer could not validly have written): consumed, counted,
//             and every ring of its writer revoked, so the writer's next WRITE fails and its
//             writes go two-sided, where they are checked on arrival.
//   kKept     not now (the apply function in this server marks and refuses instead: kept
//             stays for other apply functions and the tests), and its writer was told so
//             (the table has no room: the record was
//             acknowledged already, so it is never dropped): the ring waits behind it, every
//             ring of its writer is revoked (its writes go two-sided, where a refusal is
//             precise), and it is tried again on every pass until it applies. Counted.
// A complete but malformed head (ReplicaRing::malformed_head), or a head of an open ring that
// stayed incomplete for kStuckHeadMs, is refused the same way without reaching the apply
// function; nothing after it in its ring is read.
// Passes over the rings repeat until none moves. A writer posts a slot's record n + 1 only
// after the WRITE of n completed, so n has the smaller order and is applied first, also by a
// backup that takes whatever number comes first (a new backup, one kept by a failover);
// records of one order's neighbourhood that were in flight together are of other slots.
// Who drains: the thread (Start), which sleeps between empty passes (1 ms doubling to 10 ms;
// woken at once by Add and Stop); and whoever must see every placed record applied first
// (Drain): a two-sided REPLICATE or QUERY, a promotion, and the map's revocation
// (RevokeWriters: before a map that changes a writer's role is applied, its rings are revoked,
// so the NIC places nothing more, then drained under the map still applied).
// Bounds: at most kMaxRings rings (Add refuses more); a ring is freed once revoked and drained.
// Thread safety: every method from any thread; one mutex serialises the rings and the apply
// function (which must not call back into this object).
// Ownership: owns the rings (shared with nobody after Add); the apply function is borrowed
// for this object's lifetime. The destructor stops the thread and revokes every ring without
// applying anything more.
#ifndef RKV_SERVER_CLUSTER_RING_DRAINER_H_
#define RKV_SERVER_CLUSTER_RING_DRAINER_H_

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

#include "rkv/status.h"
#include "server/cluster/replica_ring.h"

namespace rkv::cluster {

class RingDrainer {
 public:
  enum class Outcome { kApplied, kWait, kRefused, kKept };
  // `last_try`: the record has been waiting kStuckHeadMs (every earlier call for it said
  // kWait): the function must not wait again (a kWait then counts as kRefused). A correct
  // writer's record waits only for a predecessor in another of its rings, found on the next
  // pass; one that still waits is out of step, and its ring would hold its memory forever.
  using ApplyFn =
      std::function<Outcome(const ReplicaRing& ring, const RingRecordView& record, bool last_try)>;
  static constexpr size_t kMaxRings = 64;  // 64 MiB pinned at the default ring size
  // One writer (one primary) holds at most this many: a peer cannot take every ring.
  static constexpr size_t kMaxRingsPerWriter = 16;
  // An open ring whose head stays incomplete this long is taken as malformed (rule 8: its
  // writer died or stalled mid-WRITE; that record was never acknowledged): its writer's rings
  // are revoked, and on a revoked ring an incomplete head is the end. SetStuckHeadMs: tests.
  // A complete head that waits this long gets its last try (ApplyFn).
  static constexpr int kStuckHeadMs = 5000;
  void SetStuckHeadMs(int ms) { stuck_head_ms_ = ms; }
  // How often the thread asks the headroom function while it holds rings.
  static constexpr int kHeadroomEveryMs = 100;
  static constexpr int kMinSleepUs = 1000;
  static constexpr int kMaxSleepUs = 10000;
  static constexpr uint32_t kAnyWriter = 0;  // server ids start at 1
  static constexpr size_t kBatch = 256;      // records the thread applies per lock hold

  // `headroom(for_grant, ring_bytes)` (may be empty: always): whether this backup's table
  // has room enough that the records its rings may hold (ring_bytes: every ring's size, the
  // one to be granted included) will fit. Asked by Add with for_grant true (no ring granted
  // without it) and by the thread every kHeadroomEveryMs while rings exist with for_grant
  // false (a looser bound: hysteresis, so rings do not flap): without it every ring is
  // revoked (drained, freed), so the writers' next writes go two-sided, where a full table
  // refuses them visibly (TABLE_FULL) instead of after their acknowledgement. Called under
  // the lock: it must be cheap and must not call back.
  using HeadroomFn = std::function<bool(bool for_grant, size_t ring_bytes)>;
  explicit RingDrainer(ApplyFn apply, HeadroomFn headroom = nullptr);
  ~RingDrainer();
  RingDrainer(const RingDrainer&) = delete;
  RingDrainer& operator=(const RingDrainer&) = delete;

  // Takes a granted ring; *id names it for RevokeRing, *epoch (may be null) is the epoch
  // published in it: the grant's, which its writer must have applied before it writes.
  // kBusy at kMaxRings, or kMaxRingsPerWriter of its writer; kUnavailable while a map is
  // being applied, before the first map, while EndMap said no, or without headroom (ask
  // again later).
  // `before` (may be empty) runs under the lock once the ring is accepted, before any other
  // thread can see it (its window's bind: a revocation cannot overtake it); its failure
  // refuses the ring (destroyed: revoked, with nothing of `before`'s in flight).
  [[nodiscard]] Status Add(std::unique_ptr<ReplicaRing> ring, uint64_t* id,
                           uint64_t* epoch = nullptr,
                           const std::function<Status()>& before = nullptr);
  // Revokes one ring (its link closed): it is drained to its end, then freed. Unknown ids are
  // ignored (already freed).
  void RevokeRing(uint64_t id);
  // Revokes every ring of these writers, then drains.
  void RevokeWriters(const std::vector<uint32_t>& writers);
  void RevokeAll();
  // Applies every record that can be applied now; returns how many were consumed.
  size_t Drain();
  // The same for `writer`'s rings only, and at most as many records as its rings can hold
  // (a writer that never stops cannot keep the caller here): before a two-sided REPLICATE
  // from it is checked.
  size_t DrainWriter(uint32_t writer);
  // Whether Add would take a ring of `writer` now (a hint for a grant: checked before the
  // memory is allocated and registered, so a refusal costs nothing; Add decides).
  bool Accepting(uint32_t writer);
  // True while a ring of `writer` holds a complete record not consumed yet (one waiting).
  bool HasRecords(uint32_t writer);
  // True while a revoked ring of `writer` (kAnyWriter: of anyone) is not freed yet (it holds a
  // record that waits or was kept): a promotion of a slot `writer` was deposed from waits for it.
  bool HasRevoked(uint32_t writer);
  // A map is being applied (ClusterNode::Apply): from BeginMap, which revokes `writers` and
  // drains, to EndMap, Add refuses new rings, so none is granted at the old epoch after the
  // revocation (rule 3). EndMap publishes the epoch applied completely in every ring's control
  // block (rule 1), and in every ring added later, from its grant on; with `grants` false
  // (this server holds a role it does not serve: rule 2) Add refuses rings until an EndMap
  // allows them again.
  void BeginMap(const std::vector<uint32_t>& writers);
  void EndMap(uint64_t epoch, bool grants);
  size_t rings();

  void Start();
  void Stop();
  // Stops the thread, revokes every ring and frees them without applying anything more; Add
  // refuses from then on (the server stops: its connections' PDs go next). The destructor's.
  void Close();

  uint64_t applied() const { return applied_.load(std::memory_order_relaxed); }
  uint64_t refused() const { return refused_.load(std::memory_order_relaxed); }
  uint64_t kept() const { return kept_.load(std::memory_order_relaxed); }
  // Records that waited (ApplyFn said kWait) before they were applied or refused.
  uint64_t waited() const { return waited_.load(std::memory_order_relaxed); }
  // Times the thread revoked every ring because the headroom function said no.
  uint64_t headroom_revocations() const { return headroom_revocations_.load(); }

 private:
  // At most `max` records, of `writer`'s rings only unless kAnyWriter.
  size_t DrainLocked(uint32_t writer = kAnyWriter, size_t max = SIZE_MAX);
  void RevokeWriterLocked(uint32_t writer);
  void Loop();

  // The thread's headroom check (under mu_): revokes every ring when it says no.
  void CheckHeadroomLocked();

  const ApplyFn apply_;
  const HeadroomFn headroom_;
  size_t RingBytesLocked() const;
  std::atomic<int> stuck_head_ms_{kStuckHeadMs};
  std::chrono::steady_clock::time_point next_headroom_{};  // guarded by mu_
  std::mutex mu_;
  std::map<uint64_t, std::unique_ptr<ReplicaRing>> rings_;  // guarded by mu_
  uint64_t next_id_ = 1;                                    // guarded by mu_
  uint64_t epoch_ = 0;                                      // guarded by mu_: the epoch published
  bool in_map_ = false;  // guarded by mu_: between BeginMap and EndMap
  bool grants_ = false;  // guarded by mu_: EndMap's; none before the first map
  std::condition_variable cv_;
  bool stop_ = false;  // guarded by mu_
  bool kick_ = false;  // guarded by mu_: a ring was added
  std::thread thread_;
  std::atomic<uint64_t> applied_{0}, refused_{0}, kept_{0}, waited_{0}, headroom_revocations_{0};
};

}  // namespace rkv::cluster

#endif  // RKV_SERVER_CLUSTER_RING_DRAINER_H_
