// SPDX-License-Identifier: Apache-2.0
// Table: the server-side writer of the hash table that clients read with one-sided READs.
//
// The table lives in memory the caller owns (the registered region); Table formats it and then
// is its only writer. Layout and the reader-safety argument: common/table/layout.h, docs/design.md.
// An entry keeps its place (bucket slot, or overflow ref) once written: an update rewrites it
// in place (a value too big to be inline goes to a fresh heap block first), so a reader that
// misses a key can only be racing with an insert or delete of that same key. Heap blocks do
// move: the heap's cleaner (server/store/heap.h) calls MoveBlock, which copies a live block (same
// bytes, same version) and repoints its slot or ref under the key's locks.
// Overflow slots hold inline entries only.
// Nothing left to read: the bytes of a key or value that stop being live are zeroed before
// their memory can be handed out again: a deleted slot or overflow slot is zeroed as it is
// unpublished (an updated one is overwritten whole), and a heap block that is unpublished
// (delete, update, the old copy of a move) or abandoned (a PUT the log refused) is zeroed
// before the heap may reuse it. So free heap space always holds zeros, and a scan of the region
// finds only live entries (and, for microseconds, blocks between unpublish and clear). Readers
// that race a clear see a bad checksum and retry (docs/design.md, "Nothing left to read").
// Thread safety: Put/Delete/Get may be called from any number of threads. Writers of a key lock
// the stripes of its two candidate buckets (ascending order); the overflow free list and the
// heap have their own mutexes. Lock order: heap cleaner -> stripes -> heap, overflow list. A Put
// never asks the heap to clean while it holds stripes. Readers (remote) take no lock.
#ifndef RKV_SERVER_TABLE_H_
#define RKV_SERVER_TABLE_H_

#include <atomic>
#include <cstdint>
#include <mutex>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "common/mutex.h"
#include "common/table/entry_location.h"
#include "common/table/layout.h"
#include "common/table/lookup.h"
#include "rkv/status.h"
#include "server/store/heap.h"
#include "server/write_log.h"

namespace rkv {

class Table {
 public:
  // Formats [base, base + geometry.region_size): zeroes all of it. `base` must outlive the Table.
  Table(uint8_t* base, const layout::Geometry& geometry);
  Table(const Table&) = delete;
  Table& operator=(const Table&) = delete;

  // OK, TOO_LARGE (key > 1 KiB or value > 64 KiB), TABLE_FULL, INVALID_ARGUMENT (empty key).
  // On OK, `where` (if not null) is where the entry was published, as the PUT reply reports it
  // (a hint for the client's location cache, exact when the write took effect).
  Status Put(std::string_view key, std::string_view value, layout::EntryLocation* where = nullptr);
  // The size checks Put makes (a replicated write is checked before it goes to the backups).
  [[nodiscard]] static Status CheckEntry(std::string_view key, std::string_view value);
  // OK or NOT_FOUND.
  Status Delete(std::string_view key);
  // Local read through the same lookup rules as the client (for tests and tools).
  Status Get(std::string_view key, std::string* value) const;
  // Every write from now on is recorded in `log` before it is published (server/write_log.h);
  // a write the log refuses fails with the log's status and changes nothing. nullptr: no log
  // (memory-only, and start-up replay). Call before writers start; `log` must outlive them.
  void SetWriteLog(WriteLog* log) { log_ = log; }
  // Appends the (key, value) of every entry of bucket `b` to *out, consistently per entry (under
  // the bucket's stripe lock, held only for the copy). A snapshot scans the buckets 0..num_buckets
  // (the last home bucket's second candidate too); an entry deleted and re-inserted into its other
  // bucket meanwhile may be seen twice (its log records after the scan's start fix the order on
  // replay).
  void CollectBucket(uint32_t b, std::vector<std::pair<std::string, std::string>>* out) const;

  const layout::Geometry& geometry() const { return geo_; }
  uint64_t entries() const { return entries_.load(std::memory_order_relaxed); }
  uint64_t overflow_entries() const { return overflow_used_.load(std::memory_order_relaxed); }
  uint64_t entry_capacity() const { return geo_.entry_capacity(); }
  uint64_t heap_bytes_in_use() const { return heap_.live_bytes(); }
  uint64_t heap_capacity() const { return heap_.capacity(); }
  const Heap& heap() const { return heap_; }
  // For the cost measurement only (tests/clearing_test.cc): false stops clearing freed heap
  // blocks (slots are still zeroed as they are unpublished). Call before writers start.
  void set_clear_freed_blocks_for_testing(bool on) { clear_freed_ = on; }

 private:
  static constexpr uint32_t kStripes = 1024;
  struct Location {
    bool found = false;
    uint8_t* slot = nullptr;   // entries in a bucket or an overflow slot: the slot
    uint8_t* ref = nullptr;    // overflow entries: the header ref that points at it
    layout::Ref ref_value;     // ... and its value
    layout::SlotView view;     // slot entries: the decoded slot
    layout::FoundValue value;  // the value as stored
  };
  Location Locate(std::string_view key, const layout::KeyHash& kh) const;
  // The cacheable location of a found entry (entry_location.h).
  layout::EntryLocation LocationOf(const Location& loc) const;
  // A Put's dealings with the heap across its attempts: `need` is set when the heap must clean
  // first (then the attempt changed nothing); `block` is a block the cleaning allocated for
  // this Put (block_bytes long), used by the next attempt instead of a new allocation.
  struct Room {
    uint32_t need = 0;
    uint64_t block = ~uint64_t{0};
    uint32_t block_bytes = 0;
  };
  // Put under the key's stripes (see Room); Put cleans without the locks and retries.
  Status PutLocked(std::string_view key, std::string_view value, const layout::KeyHash& kh,
                   Room* room);
  // A pending heap block for an entry of this size, or TABLE_FULL (with *room set if cleaning
  // can help).
  Status AllocateBlock(uint32_t bytes, uint64_t* offset, Room* room);
  // The heap cleaner's mover: relocates the live block at `offset` (see server/store/heap.h).
  void MoveBlock(uint64_t offset, uint32_t size);
  uint8_t* bucket(uint32_t b) const { return base_ + geo_.bucket_offset(b); }
  uint8_t* overflow_slot(uint32_t i) const { return base_ + geo_.overflow_slot_offset(i); }
  // Builds a slot image; a value that is not inline goes to a new heap block first. *block is
  // the new block's offset (to Commit after the image is published), or kNoBlock.
  Status BuildEntry(std::string_view key, std::string_view value, const layout::KeyHash& kh,
                    uint8_t* image, uint64_t* block, Room* room);
  // Overflow entries: writes the target (an overflow slot for an inline entry, a heap block
  // otherwise) and fills *ref; the caller publishes the ref, then commits *block.
  Status BuildOverflowEntry(std::string_view key, std::string_view value, const layout::KeyHash& kh,
                            layout::Ref* ref, uint64_t* block, Room* room);
  void CommitBlock(uint64_t block);
  static constexpr uint64_t kNoBlock = ~uint64_t{0};
  // Records a built PUT in the log (if any); on failure undoes the build (`block`, and the
  // overflow slot of `overflow` if it is one) and returns the log's status.
  Status LogPut(std::string_view key, std::string_view value, uint64_t block,
                const layout::Ref* overflow);
  // Frees what an entry held (its heap block; for overflow entries also its slot), cleared. The
  // entry must be unpublished already (under the key's stripes).
  void ReleaseEntry(const Location& loc);
  // Clears and frees the unpublished committed block at `offset` (see Heap::Retire).
  void ReleaseBlock(uint64_t offset, uint32_t bytes);
  // Zeroes the block's bytes (rounded up to the heap's unit).
  void ClearBlock(uint64_t offset, uint32_t bytes);
  uint8_t* FreeRefWord(const layout::KeyHash& kh) const;
  [[nodiscard]] bool AllocateOverflowSlot(uint32_t* index);
  void FreeOverflowSlot(uint32_t index);
  static void WriteSlot(uint8_t* dst, const uint8_t* image);
  static void StoreRef(uint8_t* dst, const layout::Ref& ref);

  uint8_t* const base_;
  const layout::Geometry geo_;
  Heap heap_;
  // Writer locks per bucket stripe; a key's two stripes are taken in address order
  // (StripeLock), which the static analysis cannot follow through the array.
  mutable std::mutex stripes_[kStripes];
  Mutex overflow_mu_;
  std::vector<uint32_t> overflow_free_ GUARDED_BY(overflow_mu_);
  WriteLog* log_ = nullptr;
  bool clear_freed_ = true;
  std::atomic<uint64_t> next_version_{1};
  std::atomic<uint64_t> entries_{0};
  std::atomic<uint64_t> overflow_used_{0};
};

}  // namespace rkv

#endif  // RKV_SERVER_TABLE_H_
