// SPDX-License-Identifier: Apache-2.0
#include "server/store/heap.h"

#include <glog/logging.h>

#include <algorithm>
#include <thread>

// Why the reserve suffices (the cleaner can always move the tail block).
// K = kMaxBlock, R = kReserve = 2K. The free space is [head, end) + [begin, tail) when the log
// does not wrap (head > tail), else the one run [head, tail). A record never straddles end, so a
// block of s bytes that does not fit in [head, end) is preceded by a padding record [head, end)
// of pad < s <= K bytes (kept in the log as dead until the tail passes it).
//  (a) If free >= 2K, a block of s <= K fits: either in [head, end), or after padding in
//      [begin, tail), whose size is free - pad > 2K - K = K >= s.
//  (b) Free space shrinks below R only by a Mover's allocation: TryAllocate succeeds only if at
//      least R stays free (padding included), frees do not change the log, and reclaiming only
//      adds free space. After a move the cleaner reclaims the moved (now dead) tail record at
//      once, so a move costs net only its padding. After that padding the head has wrapped
//      (head <= tail) and free >= 2K - pad > K in one contiguous run [head, tail); no further
//      padding can happen until the tail passes end, which reclaims that padding and restores
//      free >= 2K. In between, moves need no padding and fit in the run (> K >= s).
// So outside a Mover call: used == 0, or free >= R, or the log wraps and free > K (Validate
// checks this), and AllocateForMove always fits.
//
// The full condition. kFull <=> live + s + R + K > capacity (kFullSlack = R + K = 3K <= 4K).
// Conversely, when live + s + R + K <= capacity, cleaning one lap makes TryAllocate(s) succeed:
// once the tail has passed every record that was in the log, the log holds only live blocks and
// at most one padding, and a padding in the log means the log wraps, so the new block needs no
// padding of its own. Hence log + (padding of the new block) <= live + K - 8, and
// free - padding - s >= capacity - live - K - s >= R. Without concurrent writers MakeRoom
// therefore never gives up (it stops after one lap of tail movement, kBusy, only if concurrent
// writers keep taking the room it makes).

#define RKV_NO_TSA RKV_TSA(no_thread_safety_analysis)

namespace rkv {
namespace {

// BasicLockable view of a Mutex for std::condition_variable_any. The analysis cannot follow the
// condition variable's unlock/relock; the caller holds the Mutex before and after the wait.
class LockableMutex {
 public:
  explicit LockableMutex(Mutex* mu) : mu_(mu) {}
  void lock() RKV_NO_TSA { mu_->Lock(); }
  void unlock() RKV_NO_TSA { mu_->Unlock(); }

 private:
  Mutex* const mu_;
};

// Cleaning beyond the request (so that the next few PUTs need no MakeRoom): aim for this much
// more free space, but advance the tail by at most kBatchBudget bytes for it and never wait for
// a pending block for it.
constexpr uint64_t kCleanAhead = Heap::kMaxBlock;
constexpr uint64_t kBatchBudget = 4 * kCleanAhead;
// Dead bytes reclaimed per step (a bitmap scan of 1/512 as many words) before re-checking.
constexpr uint64_t kReclaimStep = 1 << 20;

}  // namespace

const char* Heap::ResultName(Result r) {
  switch (r) {
    case Result::kOk:
      return "OK";
    case Result::kNeedsRoom:
      return "NEEDS_ROOM";
    case Result::kFull:
      return "FULL";
    case Result::kBusy:
      return "BUSY";
  }
  return "?";
}

Heap::Heap(uint64_t begin, uint64_t end, std::chrono::milliseconds pending_wait)
    : begin_((begin + kAlign - 1) & ~uint64_t{kAlign - 1}),
      end_(std::max(begin_, end & ~uint64_t{kAlign - 1})),
      pending_wait_(pending_wait),
      head_(begin_),
      tail_(begin_) {
  const uint64_t words = (capacity() / kAlign + 63) / 64;
  MutexLock l(&mu_);
  start_bits_.assign(words, 0);
  alloc_bits_.assign(words, 0);
}

void Heap::set_mover(Mover mover) {
  MutexLock l(&clean_mu_);
  mover_ = std::move(mover);
}

void Heap::ClearRange(std::vector<uint64_t>* bits, uint64_t from, uint64_t to) {
  if (from >= to) return;
  const uint64_t wf = from >> 6, wt = (to - 1) >> 6;
  const uint64_t mask_from = ~0ull << (from & 63);
  const uint64_t mask_to = ~0ull >> (63 - ((to - 1) & 63));
  if (wf == wt) {
    (*bits)[wf] &= ~(mask_from & mask_to);
    return;
  }
  (*bits)[wf] &= ~mask_from;
  std::fill(bits->begin() + static_cast<ptrdiff_t>(wf + 1),
            bits->begin() + static_cast<ptrdiff_t>(wt), 0);
  (*bits)[wt] &= ~mask_to;
}

uint64_t Heap::FindSet(const std::vector<uint64_t>& bits, uint64_t from, uint64_t to) {
  if (from >= to) return to;
  uint64_t w = from >> 6;
  uint64_t word = bits[w] & (~0ull << (from & 63));
  for (;;) {
    if (word) return std::min(to, (w << 6) + static_cast<uint64_t>(__builtin_ctzll(word)));
    if (++w << 6 >= to) return to;
    word = bits[w];
  }
}

uint64_t Heap::PaddingFor(uint64_t size) const {
  if (used_ == 0) return size <= capacity() ? 0 : kNone;  // head == tail == begin
  if (!Wrapped()) {                                       // free: [head, end) + [begin, tail)
    if (head_ + size <= end_) return 0;
    return begin_ + size <= tail_ ? end_ - head_ : kNone;
  }
  return head_ + size <= tail_ ? 0 : kNone;  // free: [head, tail)
}

bool Heap::Fits(uint64_t size, uint64_t extra) const {
  const uint64_t pad = PaddingFor(size);
  return pad != kNone && FreeBytes() >= pad + size + kReserve + extra;
}

uint64_t Heap::Append(uint64_t size, uint64_t pad) {
  if (pad > 0) {  // a dead padding record [head, end); the block goes to begin
    const uint64_t g = Granule(head_);
    ClearRange(&start_bits_, g, Granule(end_));
    SetBit(&start_bits_, g);
    used_ += pad;
    head_ = begin_;
  }
  const uint64_t offset = head_;
  const uint64_t g = Granule(offset);
  // Start bits of reclaimed records may remain in free space; a new record clears its range.
  ClearRange(&start_bits_, g, g + size / kAlign);
  SetBit(&start_bits_, g);
  SetBit(&alloc_bits_, g);
  head_ += size;
  if (head_ == end_) head_ = begin_;
  used_ += size;
  live_ += size;
  pending_.insert(offset);
  return offset;
}

Heap::Result Heap::TryAllocate(uint32_t bytes, uint64_t* offset) {
  if (bytes == 0 || bytes > kMaxBlock) return Result::kFull;
  const uint64_t size = RoundUp(bytes);
  MutexLock l(&mu_);
  if (FullFor(size)) return Result::kFull;
  if (!Fits(size, 0)) return Result::kNeedsRoom;
  *offset = Append(size, PaddingFor(size));
  return Result::kOk;
}

bool Heap::AllocateForMove(uint32_t bytes, uint64_t* offset) {
  const uint64_t size = RoundUp(bytes);
  MutexLock l(&mu_);
  CHECK(moving_offset_ != kNone && std::this_thread::get_id() == mover_thread_)
      << "AllocateForMove outside a Mover call";
  CHECK(!move_allocated_) << "AllocateForMove called twice in one Mover call";
  CHECK_LE(size, moving_size_) << "AllocateForMove larger than the block being moved";
  const uint64_t pad = PaddingFor(size);
  if (pad == kNone) return false;  // the reserve argument (top of this file) is broken
  move_allocated_ = true;
  ++moves_;
  moved_bytes_ += size;
  *offset = Append(size, pad);
  return true;
}

bool Heap::InLog(uint64_t offset) const {
  if (used_ == 0 || offset < begin_ || offset >= end_ || (offset - begin_) % kAlign != 0)
    return false;
  if (!Wrapped()) return offset >= tail_ && offset < head_;
  return offset >= tail_ || offset < head_;
}

uint64_t Heap::LogEndFrom(uint64_t offset) const {
  if (!Wrapped()) return head_;
  return offset >= tail_ ? end_ : head_;
}

uint64_t Heap::RecordSize(uint64_t offset) const {
  const uint64_t g = Granule(offset);
  const uint64_t next = FindSet(start_bits_, g + 1, Granule(LogEndFrom(offset)));
  return (next - g) * kAlign;
}

void Heap::Commit(uint64_t offset) {
  MutexLock l(&mu_);
  CHECK_EQ(pending_.erase(offset), 1u) << "Commit of a block that is not pending: " << offset;
  if (cleaners_waiting_ > 0) pending_cv_.notify_all();
}

void Heap::Free(uint64_t offset, uint32_t bytes) {
  const uint64_t size = RoundUp(bytes);
  MutexLock l(&mu_);
  CHECK(InLog(offset) && TestBit(alloc_bits_, Granule(offset)))
      << "Free of a block that is not allocated: " << offset;
  CHECK_EQ(RecordSize(offset), size) << "Free with the wrong size at " << offset;
  ClearBit(&alloc_bits_, Granule(offset));
  live_ -= size;
  if (pending_.erase(offset) > 0 && cleaners_waiting_ > 0) pending_cv_.notify_all();
}

bool Heap::Retire(uint64_t offset) {
  MutexLock l(&mu_);
  CHECK(InLog(offset) && TestBit(alloc_bits_, Granule(offset)) && pending_.count(offset) == 0)
      << "Retire of a block that is not committed: " << offset;
  // The cleaner picks a Mover's block under mu_ and sets moving_offset_ in the same critical
  // section, so either it sees this block pending (and waits for Free) or we see it moving.
  if (offset == moving_offset_) return false;
  pending_.insert(offset);
  return true;
}

bool Heap::IsLive(uint64_t offset) const {
  MutexLock l(&mu_);
  return InLog(offset) && TestBit(alloc_bits_, Granule(offset)) && pending_.count(offset) == 0;
}

bool Heap::IsPending(uint64_t offset) const {
  MutexLock l(&mu_);
  return pending_.count(offset) > 0;
}

uint64_t Heap::ReclaimDead(uint64_t limit) {
  uint64_t reclaimed = 0;
  while (used_ > 0 && reclaimed < limit) {
    const uint64_t stop = std::min(Wrapped() ? end_ : head_, tail_ + (limit - reclaimed));
    const uint64_t to = begin_ + FindSet(alloc_bits_, Granule(tail_), Granule(stop)) * kAlign;
    reclaimed += to - tail_;
    used_ -= to - tail_;
    tail_ = to == end_ ? begin_ : to;
    if (used_ == 0) {
      head_ = tail_ = begin_;
      break;
    }
    if (to < stop) break;  // an allocated block is at the tail
  }
  return reclaimed;
}

void Heap::WaitForCommitOrFree(std::chrono::steady_clock::time_point deadline) {
  ++cleaners_waiting_;
  ++pending_waits_;
  LockableMutex lockable(&mu_);
  pending_cv_.wait_until(lockable, deadline);
  --cleaners_waiting_;
}

Heap::Result Heap::MakeRoom(uint32_t bytes) {
  if (bytes == 0 || bytes > kMaxBlock) return Result::kFull;
  MutexLock clean(&clean_mu_);
  mu_.Lock();
  ++clean_calls_;
  const Result r = Clean(RoundUp(bytes));
  mu_.Unlock();
  return r;
}

Heap::Result Heap::MakeRoomAndAllocate(uint32_t bytes, uint64_t* offset) {
  if (bytes == 0 || bytes > kMaxBlock) return Result::kFull;
  const uint64_t size = RoundUp(bytes);
  MutexLock clean(&clean_mu_);
  mu_.Lock();
  ++clean_calls_;
  Result r = Clean(size);
  if (r == Result::kOk) {
    if (Fits(size, 0)) {
      *offset = Append(size, PaddingFor(size));
    } else {
      r = Result::kBusy;  // cannot happen: Clean returned with the room under mu_
    }
  }
  mu_.Unlock();
  return r;
}

Heap::Result Heap::Clean(uint64_t size) {
  const auto deadline = std::chrono::steady_clock::now() + pending_wait_;
  uint64_t advanced = 0;  // tail movement in this call: one lap at most
  uint64_t batch = 0;     // tail movement after the request already fit
  for (;;) {
    if (FullFor(size)) return Result::kFull;
    const bool fits = Fits(size, 0);
    if (fits && (batch >= kBatchBudget || Fits(size, kCleanAhead))) return Result::kOk;
    if (used_ == 0 || advanced > capacity()) return fits ? Result::kOk : Result::kBusy;
    const uint64_t g = Granule(tail_);
    uint64_t reclaimed = 0;
    if (!TestBit(alloc_bits_, g)) {  // dead block or padding
      reclaimed = ReclaimDead(kReclaimStep);
    } else if (pending_.count(tail_) > 0) {  // being written or moved: wait for Commit or Free
      if (fits || std::chrono::steady_clock::now() >= deadline)
        return fits ? Result::kOk : Result::kBusy;
      WaitForCommitOrFree(deadline);
    } else {  // committed: the owner moves it to the head and frees it
      CHECK(mover_) << "Heap::MakeRoom needs a Mover (set_mover) to move a live block";
      const uint64_t offset = tail_;
      const uint64_t record = RecordSize(offset);
      moving_offset_ = offset;
      moving_size_ = static_cast<uint32_t>(record);
      move_allocated_ = false;
      mover_thread_ = std::this_thread::get_id();
      mu_.Unlock();
      mover_(offset, static_cast<uint32_t>(record));
      mu_.Lock();
      moving_offset_ = kNone;
      // Only the cleaner advances the tail, so nothing can have reused the block meanwhile.
      CHECK(tail_ == offset && !TestBit(alloc_bits_, g))
          << "the Mover returned and the block at " << offset << " is still allocated";
      reclaimed = ReclaimDead(kReclaimStep);  // at once: see "Why the reserve suffices"
    }
    advanced += reclaimed;
    if (fits) batch += reclaimed;
  }
}

uint64_t Heap::live_bytes() const {
  MutexLock l(&mu_);
  return live_;
}

uint64_t Heap::log_bytes() const {
  MutexLock l(&mu_);
  return used_;
}

uint64_t Heap::moves() const {
  MutexLock l(&mu_);
  return moves_;
}

uint64_t Heap::moved_bytes() const {
  MutexLock l(&mu_);
  return moved_bytes_;
}

uint64_t Heap::clean_calls() const {
  MutexLock l(&mu_);
  return clean_calls_;
}

uint64_t Heap::pending_waits() const {
  MutexLock l(&mu_);
  return pending_waits_;
}

uint64_t Heap::pending_blocks() const {
  MutexLock l(&mu_);
  return pending_.size();
}

std::string Heap::Validate() const {
  MutexLock l(&mu_);
  const uint64_t cap = capacity();
  if (head_ < begin_ || head_ >= std::max(end_, begin_ + 1) || tail_ < begin_ ||
      tail_ >= std::max(end_, begin_ + 1) || (head_ - begin_) % kAlign || (tail_ - begin_) % kAlign)
    return "head or tail outside the heap or unaligned";
  if (used_ > cap) return "log longer than the heap";
  if (used_ == 0 && (head_ != begin_ || tail_ != begin_)) return "empty log not reset";
  if (used_ != 0 && used_ % cap != (head_ + cap - tail_) % cap)
    return "log length " + std::to_string(used_) + " disagrees with head and tail";
  uint64_t live = 0;
  const uint64_t granules = cap / kAlign;
  for (uint64_t g = FindSet(alloc_bits_, 0, granules); g < granules;
       g = FindSet(alloc_bits_, g + 1, granules)) {
    const uint64_t offset = begin_ + g * kAlign;
    if (!InLog(offset)) return "allocated bit outside the log at " + std::to_string(offset);
    if (!TestBit(start_bits_, g)) return "allocated bit without start bit";
    const uint64_t size = RecordSize(offset);
    if (size > kMaxBlock) return "allocated block larger than kMaxBlock";
    live += size;
  }
  if (live != live_)
    return "live bytes " + std::to_string(live_) + " but blocks hold " + std::to_string(live);
  if (live_ > used_) return "more live bytes than log bytes";
  for (uint64_t p : pending_)
    if (!InLog(p) || !TestBit(alloc_bits_, Granule(p))) return "pending block not allocated";
  if (moving_offset_ == kNone && used_ > 0 && FreeBytes() < kReserve &&
      !(Wrapped() && FreeBytes() > kMaxBlock))
    return "free space " + std::to_string(FreeBytes()) + " below the reserve";
  return "";
}

}  // namespace rkv
