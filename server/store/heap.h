// SPDX-License-Identifier: Apache-2.0
// Heap: the allocator for out-of-place value blocks inside the registered region, a circular log
// with tail cleaning (compaction).
//
// What for: the table stores every entry too big to be inline as one block (24-byte header + key
// + value, at most kMaxBlock bytes) at an offset this heap hands out. Blocks are appended at the
// log's head; the cleaner reclaims the log's tail, moving a live tail block to the head through
// the owner's Mover. Clients read blocks with one-sided READs and verify checksum, version and
// key, so a block may be moved: a moved copy keeps its bytes and version (the same value), and a
// reader that followed a stale pointer sees another version or a bad checksum and retries.
//
// Guarantees: allocation unit 8 bytes (waste <= 7 bytes per block, < 5.2% for blocks >= 129 B).
// After any history of allocations and frees, a request for s bytes is refused as full (kFull)
// only when live_bytes() + RoundUp(s) + kFullSlack > capacity(), kFullSlack = 3 * kMaxBlock:
// fragmentation never makes the heap say full. Cleaning work is amortized: MakeRoom moves live
// tail blocks only until the request fits (plus at most a small batch), so bytes moved per byte
// allocated is about live/free at the tail; a long pass happens only when the heap is nearly full.
//
// Block states: pending (allocated, not yet published by the owner; or retired: unpublished
// again, its bytes being cleared by the owner), committed (published: the Mover may be asked to
// move it), dead (freed; its bytes stay in the log until the tail passes). Free of a pending
// block is allowed (a failed PUT, a retired block). Nothing in the heap clears bytes; an owner
// that wants freed bytes cleared (the table does: nothing deleted is left to read) clears a
// committed block between Retire and Free, a pending one before Free, and a block its Mover
// finds freed (below), so every byte outside allocated blocks holds what the owner cleared it
// to.
//
// Layout: the heap covers region offsets [begin, end) (begin rounded up and end rounded down to
// a multiple of 8). Records (blocks, or padding up to `end` when a block does not fit before the
// wrap) lie contiguously from the tail to the head, wrapping at end back to begin; a record
// never straddles end. Free space is the run from head to tail. Per-record metadata lives in
// server memory only, never in the region clients read: a start-of-record bit and an allocated
// bit per 8-byte granule (two bitmaps, capacity/32 bytes in all) and the set of pending offsets.
//
// Invariants (checked by Validate()): live_bytes() = sum of the rounded sizes of allocated
// (pending or committed) blocks <= log_bytes() <= capacity(); allocated bits are set only at
// record starts inside the log; every pending offset is allocated; outside a Mover call at
// least kReserve bytes are free, or the free space is one contiguous run of at least kMaxBlock
// (see heap.cc, "Why the reserve suffices").
//
// Thread safety: every public method may be called from any thread. State is behind one Mutex
// (mu_); cleaning is serialized by clean_mu_. Lock order: clean_mu_ -> the owner's locks (taken
// inside the Mover) -> mu_. The heap never holds mu_ while calling the Mover. Callers must not
// call MakeRoom while holding locks the Mover takes, or while they hold a pending block.
// Ownership: the heap owns only its metadata; the region's bytes belong to the owner, and the
// heap never reads or writes them.
#ifndef RKV_SERVER_HEAP_H_
#define RKV_SERVER_HEAP_H_

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <string>
#include <thread>
#include <unordered_set>
#include <vector>

#include "common/mutex.h"

namespace rkv {

class Heap {
 public:
  // Largest block: 24-byte header + 1024-byte key + 65536-byte value.
  static constexpr uint32_t kMaxBlock =
      32 + 1024 + 65536;  // layout::BlockBytes of the largest entry
  static constexpr uint32_t kAlign = 8;
  // Free bytes TryAllocate leaves behind: the cleaner can always move the tail block.
  static constexpr uint64_t kReserve = 2 * uint64_t{kMaxBlock};
  // kFull <=> live_bytes() + RoundUp(bytes) + kFullSlack > capacity() (reserve + one padding).
  static constexpr uint64_t kFullSlack = kReserve + kMaxBlock;

  enum class Result {
    kOk,         // TryAllocate: *offset is a new pending block. MakeRoom: TryAllocate would fit.
    kNeedsRoom,  // TryAllocate only: call MakeRoom (without the Mover's locks), then retry.
    kFull,       // live bytes leave no room for this size, whatever is cleaned (or size invalid).
    kBusy,       // MakeRoom only: waited too long for a pending tail block, or lapped the log
                 // while concurrent writers took the room; may succeed later.
  };
  static const char* ResultName(Result r);

  // Moves the committed block [offset, offset + size) (size = its rounded size). Called by
  // MakeRoom on the cleaning thread without mu_ held. The block is the log's tail, so its bytes
  // cannot be reused before the Mover returns (it may read the key before locking). The Mover
  // must: take the owner's locks under which the block's owner publishes and frees it; if
  // !IsLive(offset), return (freed meanwhile, untouched: its owner's Retire returned false, so
  // the Mover clears it if the owner clears freed bytes; nobody else writes or reuses it before
  // the Mover returns); otherwise AllocateForMove(size, &to) (succeeds by the reserve argument;
  // at most once per call), copy the bytes, publish `to` in place of `offset`, Commit(to),
  // (clear `offset`,) Free(offset, size). While the Mover runs, nobody else writes the block's
  // bytes (owners that Retire it get false). On return the block at `offset` must be dead; a
  // live one is a broken invariant (CHECK).
  using Mover = std::function<void(uint64_t offset, uint32_t size)>;

  // `pending_wait`: how long one MakeRoom call waits in total for pending tail blocks.
  Heap(uint64_t begin, uint64_t end,
       std::chrono::milliseconds pending_wait = std::chrono::milliseconds(1000));
  Heap(const Heap&) = delete;
  Heap& operator=(const Heap&) = delete;

  // Set once before the first MakeRoom that finds a live tail block.
  void set_mover(Mover mover);

  // The bytes a block of `bytes` (<= kMaxBlock) takes: rounded up to kAlign.
  static constexpr uint32_t RoundUp(uint32_t bytes) { return (bytes + kAlign - 1) & ~(kAlign - 1); }

  // The PUT path, called under the owner's locks; never cleans or waits beyond mu_. kOk (with
  // *offset a new pending block of RoundUp(bytes) bytes) only if, after the allocation and the
  // padding it may need, at least kReserve bytes stay free. bytes must be in [1, kMaxBlock]
  // (else kFull).
  [[nodiscard]] Result TryAllocate(uint32_t bytes, uint64_t* offset);
  // Cleans the tail until TryAllocate(bytes) would succeed (and, if cheap, about kMaxBlock
  // more): kOk, kFull, or kBusy. Other writers may take the room before the caller retries
  // TryAllocate, so callers retry a bounded number of times. Serialized on clean_mu_; waits at
  // most pending_wait in total for pending tail blocks; moves at most one lap of the log.
  [[nodiscard]] Result MakeRoom(uint32_t bytes);
  // MakeRoom, then (kOk) allocates the block in the same critical section: *offset is a new
  // pending block for the caller, so writers that did not clean cannot take the room first.
  [[nodiscard]] Result MakeRoomAndAllocate(uint32_t bytes, uint64_t* offset);
  // Only from inside the Mover, for the block it was called with (size <= that block's size);
  // may use the reserve. The new block is pending: Commit it once published, or Free it.
  // False only if the reserve argument is broken.
  [[nodiscard]] bool AllocateForMove(uint32_t bytes, uint64_t* offset);
  // Publishes the pending block at `offset` (CHECK: it is pending).
  void Commit(uint64_t offset);
  // Frees the pending or committed block at `offset`; `bytes` is its requested or rounded size
  // (CHECK: a block of that rounded size is allocated there).
  void Free(uint64_t offset, uint32_t bytes);
  // For owners that clear freed bytes: the committed block at `offset` has just been unpublished
  // (under the locks the Mover takes). True: it is pending again, so the cleaner waits for it
  // instead of handing it to the Mover; clear its bytes, then Free it. False: a Mover call is
  // working on this very block (it may be reading the block's key without the owner's locks):
  // Free it without touching its bytes; the Mover finds it freed and clears it. CHECK: the
  // block is committed.
  [[nodiscard]] bool Retire(uint64_t offset);
  // True if a committed block starts at `offset`.
  [[nodiscard]] bool IsLive(uint64_t offset) const;
  [[nodiscard]] bool IsPending(uint64_t offset) const;

  uint64_t begin() const { return begin_; }
  uint64_t end() const { return end_; }
  uint64_t capacity() const { return end_ - begin_; }
  uint64_t live_bytes() const;                            // pending + committed, rounded
  uint64_t bytes_in_use() const { return live_bytes(); }  // alias (older name)
  uint64_t log_bytes() const;                             // tail..head, dead and padding too
  uint64_t moves() const;                                 // blocks moved (AllocateForMove)
  uint64_t moved_bytes() const;
  uint64_t clean_calls() const;    // MakeRoom calls
  uint64_t pending_waits() const;  // times MakeRoom waited for a pending tail block
  uint64_t pending_blocks() const;

  // Checks every invariant by scanning the metadata (O(capacity / 512) words): "" if they hold,
  // else what is wrong. For tests.
  [[nodiscard]] std::string Validate() const;

 private:
  static constexpr uint64_t kNone = ~uint64_t{0};

  bool Wrapped() const REQUIRES(mu_) { return used_ > 0 && head_ <= tail_; }
  uint64_t FreeBytes() const REQUIRES(mu_) { return capacity() - used_; }
  // Padding the next allocation of `size` needs (0 if none), or kNone if it does not fit at all.
  uint64_t PaddingFor(uint64_t size) const REQUIRES(mu_);
  // Appends a pending block of `size` (after padding `pad`); returns its offset.
  uint64_t Append(uint64_t size, uint64_t pad) REQUIRES(mu_);
  // Would TryAllocate(size) succeed now, even with `extra` more bytes reserved?
  bool Fits(uint64_t size, uint64_t extra) const REQUIRES(mu_);
  bool FullFor(uint64_t size) const REQUIRES(mu_) { return live_ + size + kFullSlack > capacity(); }
  // End of the contiguous part of the log that contains `offset` (head or end).
  uint64_t LogEndFrom(uint64_t offset) const REQUIRES(mu_);
  uint64_t RecordSize(uint64_t offset) const REQUIRES(mu_);
  bool InLog(uint64_t offset) const REQUIRES(mu_);
  // Advances the tail over dead records (at most about `limit` bytes); returns bytes reclaimed.
  uint64_t ReclaimDead(uint64_t limit) REQUIRES(mu_);
  Result Clean(uint64_t size) REQUIRES(clean_mu_, mu_);
  void WaitForCommitOrFree(std::chrono::steady_clock::time_point deadline) REQUIRES(mu_);

  uint64_t Granule(uint64_t offset) const { return (offset - begin_) / kAlign; }
  static bool TestBit(const std::vector<uint64_t>& bits, uint64_t g) {
    return (bits[g >> 6] >> (g & 63)) & 1;
  }
  static void SetBit(std::vector<uint64_t>* bits, uint64_t g) {
    (*bits)[g >> 6] |= 1ull << (g & 63);
  }
  static void ClearBit(std::vector<uint64_t>* bits, uint64_t g) {
    (*bits)[g >> 6] &= ~(1ull << (g & 63));
  }
  static void ClearRange(std::vector<uint64_t>* bits, uint64_t from, uint64_t to);
  // First set bit in [from, to), or `to`.
  static uint64_t FindSet(const std::vector<uint64_t>& bits, uint64_t from, uint64_t to);

  const uint64_t begin_, end_;
  const std::chrono::milliseconds pending_wait_;

  Mutex clean_mu_;  // one cleaner at a time; taken before mu_
  Mover mover_ GUARDED_BY(clean_mu_);

  mutable Mutex mu_;
  std::condition_variable_any pending_cv_;  // signalled (with mu_) when a pending block resolves
  uint64_t head_ GUARDED_BY(mu_);
  uint64_t tail_ GUARDED_BY(mu_);
  uint64_t used_ GUARDED_BY(mu_) = 0;                     // bytes from tail to head
  uint64_t live_ GUARDED_BY(mu_) = 0;                     // rounded bytes of allocated blocks
  std::vector<uint64_t> start_bits_ GUARDED_BY(mu_);      // a record starts at this granule
  std::vector<uint64_t> alloc_bits_ GUARDED_BY(mu_);      // an allocated block starts here
  std::unordered_set<uint64_t> pending_ GUARDED_BY(mu_);  // one per in-flight PUT or move
  uint64_t moving_offset_ GUARDED_BY(mu_) = kNone;        // the block a Mover call is moving
  uint32_t moving_size_ GUARDED_BY(mu_) = 0;
  bool move_allocated_ GUARDED_BY(mu_) = false;
  std::thread::id mover_thread_ GUARDED_BY(mu_);  // the thread running the Mover
  uint32_t cleaners_waiting_ GUARDED_BY(mu_) = 0;
  uint64_t moves_ GUARDED_BY(mu_) = 0;
  uint64_t moved_bytes_ GUARDED_BY(mu_) = 0;
  uint64_t clean_calls_ GUARDED_BY(mu_) = 0;
  uint64_t pending_waits_ GUARDED_BY(mu_) = 0;
};

}  // namespace rkv

#endif  // RKV_SERVER_HEAP_H_
