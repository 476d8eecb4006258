// SPDX-License-Identifier: Apache-2.0
#include "server/store/table.h"

#include <glog/logging.h>
#include <sys/random.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstring>

#include "common/table/lookup.h"
#include "common/wire.h"

namespace rkv {

using namespace layout;

namespace {
// A block's mask (layout.h): unpredictable to clients, so drawn from the kernel's CSPRNG,
// 64 masks per getrandom call per thread.
uint64_t NewMask() {
  thread_local uint64_t buf[64];
  thread_local size_t left = 0;
  if (left == 0) {
    size_t got = 0;
    while (got < sizeof buf) {
      ssize_t n = getrandom(reinterpret_cast<uint8_t*>(buf) + got, sizeof buf - got, 0);
      if (n < 0 && errno == EINTR) continue;
      PCHECK(n > 0) << "getrandom";
      got += size_t(n);
    }
    left = 64;
  }
  uint64_t m = buf[--left];
  return m != 0 ? m : 0x9e3779b97f4a7c15ull;  // 0 would leave the bytes plain
}

class StripeLock {
 public:
  StripeLock(std::mutex* a, std::mutex* b)
      : a_(std::min(a, b)), b_(a == b ? nullptr : std::max(a, b)) {
    a_->lock();
    if (b_) b_->lock();
  }
  ~StripeLock() {
    if (b_) b_->unlock();
    a_->unlock();
  }

 private:
  std::mutex* a_;
  std::mutex* b_;
};
}  // namespace

Table::Table(uint8_t* base, const Geometry& geometry)
    : base_(base), geo_(geometry), heap_(geometry.heap_offset, geometry.region_size) {
  // The whole region, heap too: free heap space is kept zero (ClearBlock), and a block is
  // written only over its own bytes, so nothing that was in this memory before can be read.
  std::memset(base_, 0, geo_.region_size);
  overflow_free_.reserve(geo_.overflow_slots);
  for (uint32_t i = geo_.overflow_slots; i > 0; --i) overflow_free_.push_back(i - 1);
  heap_.set_mover([this](uint64_t offset, uint32_t size) { MoveBlock(offset, size); });
}

void Table::WriteSlot(uint8_t* dst, const uint8_t* image) {
  // Readers verify the checksum, so a reader overlapping this copy sees a torn slot and retries.
  std::memcpy(dst, image, kSlotSize);
  std::atomic_thread_fence(std::memory_order_release);
}

void Table::StoreRef(uint8_t* dst, const Ref& ref) {
  // Two aligned 8-byte stores. A reader may see the new word0 with the old word1 (or the
  // reverse): the version in word1 then does not match the target and the reader retries.
  __atomic_store_n(reinterpret_cast<uint64_t*>(dst), RefWord0(ref), __ATOMIC_RELEASE);
  __atomic_store_n(reinterpret_cast<uint64_t*>(dst + 8), RefWord1(ref), __ATOMIC_RELEASE);
}

Table::Location Table::Locate(std::string_view key, const KeyHash& kh) const {
  // The caller holds the key's stripes, so every slot, ref and target that may hold the key is
  // stable: nothing here can be torn.
  Location loc;
  for (uint32_t b : kh.bucket) {
    uint8_t* slots = bucket(b) + kSlotSize;
    for (uint32_t i = 0; i < kSlotsPerBucket - 1; ++i) {
      uint8_t* slot = slots + i * kSlotSize;
      uint16_t key_size;
      std::memcpy(&key_size, slot + 18, 2);
      if (slot[16] == kEmpty || slot[17] != kh.tag || key_size != key.size()) continue;
      SlotView v;
      CHECK(DecodeSlot(slot, geo_.seed, &v) == SlotState::kValid) << "torn slot under its lock";
      FoundValue value;
      if (v.kind == kInline) {
        if (v.key != key) continue;  // another key with this tag and size
        value = FoundValue{v.value, 0, 0};
      } else if (v.key_hash != kh.hash || v.key_size != key.size()) {
        continue;
      } else {
        BlockView b;
        CHECK(DecodeBlock(base_ + v.block_offset, v.block_size, geo_.seed, v.version, v.key_size,
                          v.value_size, &b))
            << "heap block does not match its slot";
        if (!b.KeyIs(key)) continue;  // another key with this 64-bit hash
        value = b.Value();
      }
      loc.found = true;
      loc.slot = slot;
      loc.view = v;
      loc.value = value;
      return loc;
    }
  }
  for (uint32_t b : kh.bucket) {
    uint8_t* hdr = bucket(b);
    for (uint32_t r = 0; r < kRefsPerBucket; ++r) {
      Ref ref = DecodeRef(hdr + kRefSize * r);
      if (ref.type == Ref::kUnused || ref.tag != kh.tag) continue;
      CHECK_LE(ref.offset + ref.length, geo_.region_size) << "overflow ref outside the region";
      Target t{};
      t.kind = ref.type == Ref::kSlot ? Target::kRefSlot : Target::kRefBlock;
      t.offset = ref.offset;
      t.length = ref.length;
      t.version = ref.version;
      TargetOutcome o = ProbeTarget(base_ + ref.offset, t, key, geo_.seed, &loc.value);
      CHECK(o != TargetOutcome::kChanged) << "overflow ref does not match its target";
      if (o != TargetOutcome::kFound) continue;
      loc.found = true;
      loc.ref = hdr + kRefSize * r;
      loc.ref_value = ref;
      if (ref.type == Ref::kSlot) {
        loc.slot = base_ + ref.offset;
        CHECK(DecodeSlot(loc.slot, geo_.seed, &loc.view) == SlotState::kValid);
      }
      return loc;
    }
  }
  return loc;
}

Status Table::AllocateBlock(uint32_t bytes, uint64_t* offset, Room* room) {
  if (room->block != kNoBlock && room->block_bytes == bytes) {  // made for this Put by cleaning
    *offset = room->block;
    room->block = kNoBlock;
    return Status::Ok();
  }
  switch (heap_.TryAllocate(bytes, offset)) {
    case Heap::Result::kOk:
      return Status::Ok();
    case Heap::Result::kNeedsRoom:
      room->need = bytes;
      return Status(Code::kTableFull, "value heap needs cleaning");
    default:
      return Status(Code::kTableFull, "value heap is full (" + std::to_string(heap_.live_bytes()) +
                                          " of " + std::to_string(heap_.capacity()) +
                                          " bytes hold live blocks)");
  }
}

void Table::CommitBlock(uint64_t block) {
  if (block != kNoBlock) heap_.Commit(block);
}

Status Table::BuildEntry(std::string_view key, std::string_view value, const KeyHash& kh,
                         uint8_t* image, uint64_t* block, Room* room) {
  *block = kNoBlock;
  if (FitsInline(key.size(), value.size())) {
    uint64_t version = next_version_.fetch_add(1, std::memory_order_relaxed);
    EncodeInlineSlot(image, geo_.seed, version, key, value);
    return Status::Ok();
  }
  const uint32_t bytes = BlockBytes(key.size(), value.size());
  uint64_t off;
  Status s = AllocateBlock(bytes, &off, room);
  if (!s.ok()) return s;
  uint64_t version = next_version_.fetch_add(1, std::memory_order_relaxed);
  EncodeBlock(base_ + off, geo_.seed, version, key, value, NewMask());
  std::atomic_thread_fence(std::memory_order_release);
  EncodeIndirectSlot(image, geo_.seed, version, kh.hash, static_cast<uint32_t>(key.size()),
                     static_cast<uint32_t>(value.size()), off, RoundBlock(bytes));
  *block = off;
  return Status::Ok();
}

Status Table::BuildOverflowEntry(std::string_view key, std::string_view value, const KeyHash& kh,
                                 Ref* ref, uint64_t* block, Room* room) {
  *block = kNoBlock;
  ref->tag = kh.tag;
  uint32_t index;
  if (FitsInline(key.size(), value.size()) && AllocateOverflowSlot(&index)) {
    uint64_t version = next_version_.fetch_add(1, std::memory_order_relaxed);
    alignas(64) uint8_t image[kSlotSize];
    EncodeInlineSlot(image, geo_.seed, version, key, value);
    WriteSlot(overflow_slot(index), image);
    ref->type = Ref::kSlot;
    ref->offset = geo_.overflow_slot_offset(index);
    ref->length = kSlotSize;
    ref->version = version;
    return Status::Ok();
  }
  // A larger entry (or a small one once the overflow slots run out) is its own heap block,
  // which the ref points at directly: one READ, like an overflow slot.
  const uint32_t bytes = BlockBytes(key.size(), value.size());
  uint64_t off;
  Status s = AllocateBlock(bytes, &off, room);
  if (!s.ok()) return s;
  uint64_t version = next_version_.fetch_add(1, std::memory_order_relaxed);
  EncodeBlock(base_ + off, geo_.seed, version, key, value, NewMask());
  std::atomic_thread_fence(std::memory_order_release);
  ref->type = Ref::kBlock;
  ref->offset = off;
  ref->length = RoundBlock(bytes);
  ref->version = version;
  *block = off;
  return Status::Ok();
}

bool Table::AllocateOverflowSlot(uint32_t* index) {
  MutexLock l(&overflow_mu_);
  if (overflow_free_.empty()) return false;
  *index = overflow_free_.back();
  overflow_free_.pop_back();
  return true;
}

void Table::FreeOverflowSlot(uint32_t index) {
  MutexLock l(&overflow_mu_);
  overflow_free_.push_back(index);
}

void Table::ClearBlock(uint64_t offset, uint32_t bytes) {
  // Readers that followed a pointer to this block before it was unpublished see a bad checksum
  // (a mix of the block's bytes and zeros verifies only if it is the block unchanged, with
  // probability 2^-64 otherwise; all zeros has version 0, which no entry has) and retry.
  std::memset(base_ + offset, 0, Heap::RoundUp(bytes));
}

void Table::ReleaseBlock(uint64_t offset, uint32_t bytes) {
  // Unpublished under the key's stripes. Cleared before Free: once freed, the cleaner may
  // reclaim the bytes and hand them to a new block, whose bytes a late clear would destroy.
  // Retire keeps the cleaner's Mover off the block while it is cleared; if the Mover already
  // has it (it may be reading the key without our locks), MoveBlock clears it instead.
  if (clear_freed_ && heap_.Retire(offset)) ClearBlock(offset, bytes);
  heap_.Free(offset, bytes);
}

void Table::ReleaseEntry(const Location& loc) {
  if (loc.view.kind == kIndirect) ReleaseBlock(loc.view.block_offset, loc.view.block_size);
  if (!loc.ref) return;
  if (loc.ref_value.type == Ref::kSlot) {
    uint8_t zero[kSlotSize] = {};
    WriteSlot(loc.slot, zero);
    FreeOverflowSlot(
        static_cast<uint32_t>((loc.ref_value.offset - geo_.overflow_offset) / kSlotSize));
  } else {
    ReleaseBlock(loc.ref_value.offset, loc.ref_value.length);
  }
}

uint8_t* Table::FreeRefWord(const KeyHash& kh) const {
  uint8_t* best = nullptr;
  uint32_t best_used = kRefsPerBucket + 1;
  for (uint32_t b : kh.bucket) {
    uint8_t* hdr = bucket(b);
    uint32_t used = 0;
    uint8_t* free_ref = nullptr;
    for (uint32_t r = 0; r < kRefsPerBucket; ++r) {
      if (DecodeRef(hdr + kRefSize * r).type != Ref::kUnused)
        ++used;
      else if (!free_ref)
        free_ref = hdr + kRefSize * r;
    }
    if (free_ref && used < best_used) {
      best_used = used;
      best = free_ref;
    }
  }
  return best;
}

Status Table::LogPut(std::string_view key, std::string_view value, uint64_t block,
                     const Ref* overflow) {
  if (log_ == nullptr) return Status::Ok();
  Status s = log_->LogPut(key, value);
  if (s.ok()) return s;
  // Not logged, so never published: give back what the build reserved (nothing was visible),
  // cleared (the block is pending: no Mover reads it).
  if (block != kNoBlock) {
    if (clear_freed_) ClearBlock(block, BlockBytes(key.size(), value.size()));
    heap_.Free(block, BlockBytes(key.size(), value.size()));
  }
  if (overflow != nullptr && overflow->type == Ref::kSlot) {
    uint8_t zero[kSlotSize] = {};
    WriteSlot(base_ + overflow->offset, zero);
    FreeOverflowSlot(static_cast<uint32_t>((overflow->offset - geo_.overflow_offset) / kSlotSize));
  }
  return s;
}

void Table::CollectBucket(uint32_t b, std::vector<std::pair<std::string, std::string>>* out) const {
  // Every writer of a key for which `b` is a candidate holds this stripe, and so does the
  // cleaner when it moves such a key's block: under it the bucket and its targets are stable.
  std::lock_guard<std::mutex> lock(stripes_[b % kStripes]);
  const uint8_t* hdr = bucket(b);
  const uint8_t* slots = hdr + kSlotSize;
  auto add_block = [&](const BlockView& bv) {
    std::string k, v;
    FoundValue{bv.key, bv.mask, 0}.AssignTo(&k);
    bv.Value().AssignTo(&v);
    out->emplace_back(std::move(k), std::move(v));
  };
  for (uint32_t i = 0; i < kSlotsPerBucket - 1; ++i) {
    const uint8_t* slot = slots + i * kSlotSize;
    if (slot[16] == kEmpty) continue;
    SlotView v;
    CHECK(DecodeSlot(slot, geo_.seed, &v) == SlotState::kValid) << "torn slot under its lock";
    if (v.kind == kInline) {
      out->emplace_back(std::string(v.key), std::string(v.value));
      continue;
    }
    BlockView bv;
    CHECK(DecodeBlock(base_ + v.block_offset, v.block_size, geo_.seed, v.version, v.key_size,
                      v.value_size, &bv))
        << "heap block does not match its slot";
    add_block(bv);
  }
  for (uint32_t r = 0; r < kRefsPerBucket; ++r) {
    Ref ref = DecodeRef(hdr + kRefSize * r);
    if (ref.type == Ref::kUnused) continue;
    CHECK_LE(ref.offset + ref.length, geo_.region_size) << "overflow ref outside the region";
    if (ref.type == Ref::kSlot) {
      SlotView v;
      CHECK(DecodeSlot(base_ + ref.offset, geo_.seed, &v) == SlotState::kValid &&
            v.kind == kInline && v.version == ref.version)
          << "overflow ref does not match its slot";
      out->emplace_back(std::string(v.key), std::string(v.value));
    } else {
      BlockView bv;
      CHECK(DecodeRefBlock(base_ + ref.offset, ref.length, geo_.seed, ref.version, &bv))
          << "overflow ref does not match its block";
      add_block(bv);
    }
  }
}

layout::EntryLocation Table::LocationOf(const Location& loc) const {
  using layout::EntryLocation;
  if (!loc.found) return {};
  if (!loc.ref) {
    const uint64_t slot = static_cast<uint64_t>(loc.slot - base_);
    if (loc.view.kind == kInline) return EntryLocation{slot, 0, 0, EntryLocation::kSlotInline};
    return EntryLocation{slot, loc.view.block_offset,
                         BlockBytes(loc.view.key_size, loc.view.value_size),
                         EntryLocation::kSlotIndirect};
  }
  const uint64_t header = static_cast<uint64_t>(loc.ref - base_) / kBucketSize * kBucketSize;
  return EntryLocation{
      header, loc.ref_value.offset, loc.ref_value.length,
      loc.ref_value.type == Ref::kSlot ? EntryLocation::kOverflowSlot : EntryLocation::kRefBlock};
}

Status Table::CheckEntry(std::string_view key, std::string_view value) {
  if (key.empty()) return Status(Code::kInvalidArgument, "empty key");
  if (key.size() > wire::kMaxKeySize)
    return Status(Code::kTooLarge, "key of " + std::to_string(key.size()) + " bytes exceeds " +
                                       std::to_string(wire::kMaxKeySize));
  if (value.size() > wire::kMaxValueSize)
    return Status(Code::kTooLarge, "value of " + std::to_string(value.size()) + " bytes exceeds " +
                                       std::to_string(wire::kMaxValueSize));
  return Status::Ok();
}

Status Table::Put(std::string_view key, std::string_view value, layout::EntryLocation* where) {
  Status bad = CheckEntry(key, value);
  if (!bad.ok()) return bad;
  if (log_ != nullptr) {
    Status ready = log_->Ready();
    if (!ready.ok()) return ready;
  }
  const KeyHash kh = HashKey(key, geo_.seed, geo_.num_buckets);
  // When the heap must clean, the cleaning allocates this Put's block (MakeRoomAndAllocate), so
  // other writers cannot take the room; a bounded number of attempts within a deadline (a worker
  // thread runs this Put), then TABLE_FULL with the reason.
  constexpr int kAttempts = 32;
  constexpr auto kDeadline = std::chrono::seconds(10);
  const auto start = std::chrono::steady_clock::now();
  Room room;
  for (int attempt = 1;; ++attempt) {
    room.need = 0;
    Status s;
    {
      StripeLock lock(&stripes_[kh.bucket[0] % kStripes], &stripes_[kh.bucket[1] % kStripes]);
      s = PutLocked(key, value, kh, &room);
      if (s.ok() && where != nullptr) *where = LocationOf(Locate(key, kh));
    }
    if (room.block != kNoBlock) {  // made for an attempt that did not need it: never written
      heap_.Free(room.block, room.block_bytes);
      room.block = kNoBlock;
    }
    if (room.need == 0) return s;
    Heap::Result r = heap_.MakeRoomAndAllocate(room.need, &room.block);
    if (r == Heap::Result::kOk) room.block_bytes = room.need;
    if (r == Heap::Result::kFull)
      return Status(Code::kTableFull, "value heap is full (" + std::to_string(heap_.live_bytes()) +
                                          " of " + std::to_string(heap_.capacity()) +
                                          " bytes hold live blocks)");
    if (attempt < kAttempts && std::chrono::steady_clock::now() - start < kDeadline) continue;
    if (room.block != kNoBlock) heap_.Free(room.block, room.block_bytes);
    return Status(Code::kTableFull, "value heap busy: cleaning did not make room for this PUT in " +
                                        std::to_string(kAttempts) +
                                        " attempts or 10 s (blocks being written at "
                                        "the log's tail)");
  }
}

Status Table::PutLocked(std::string_view key, std::string_view value, const KeyHash& kh,
                        Room* room) {
  Location loc = Locate(key, kh);
  alignas(64) uint8_t image[kSlotSize];
  uint64_t block;

  // Update: the key keeps its place (bucket slot or overflow ref); only what it points at changes.
  if (loc.found && !loc.ref) {
    Status s = BuildEntry(key, value, kh, image, &block, room);
    if (!s.ok()) return s;
    s = LogPut(key, value, block, nullptr);
    if (!s.ok()) return s;
    WriteSlot(loc.slot, image);
    CommitBlock(block);
    ReleaseEntry(loc);
    return Status::Ok();
  }
  if (loc.found && loc.ref_value.type == Ref::kSlot && FitsInline(key.size(), value.size())) {
    // Rewrite the overflow slot, then the ref's version: a reader in between sees a version
    // mismatch and retries.
    Status s = BuildEntry(key, value, kh, image, &block, room);
    if (!s.ok()) return s;
    s = LogPut(key, value, block, nullptr);
    if (!s.ok()) return s;
    WriteSlot(loc.slot, image);
    Ref r = loc.ref_value;
    r.version = LoadU64(image + 8);
    StoreRef(loc.ref, r);
    return Status::Ok();
  }
  if (loc.found) {  // new target (block, or slot for a value that shrank), then the ref
    Ref r;
    Status s = BuildOverflowEntry(key, value, kh, &r, &block, room);
    if (!s.ok()) return s;
    s = LogPut(key, value, block, &r);
    if (!s.ok()) return s;
    StoreRef(loc.ref, r);
    CommitBlock(block);
    ReleaseEntry(loc);
    return Status::Ok();
  }

  // Insert: the less loaded candidate bucket with a free slot; a tie goes to a bucket picked by
  // a bit of the key's hash (random tie-breaking balances adjacent candidates better).
  uint8_t* target = nullptr;
  int best_free = 0;
  const bool flip = TieBit(kh.hash);
  for (uint32_t b : {kh.bucket[flip], kh.bucket[!flip]}) {
    uint8_t* slots = bucket(b) + kSlotSize;
    int free_count = 0;
    uint8_t* first_free = nullptr;
    for (uint32_t i = 0; i < kSlotsPerBucket - 1; ++i) {
      if (slots[i * kSlotSize + 16] == kEmpty) {
        if (!first_free) first_free = slots + i * kSlotSize;
        ++free_count;
      }
    }
    if (free_count > best_free) {
      best_free = free_count;
      target = first_free;
    }
  }
  if (target) {
    Status s = BuildEntry(key, value, kh, image, &block, room);
    if (!s.ok()) return s;
    s = LogPut(key, value, block, nullptr);
    if (!s.ok()) return s;
    WriteSlot(target, image);
    CommitBlock(block);
  } else {  // Both buckets full: an overflow entry, published through a header ref.
    uint8_t* ref_word = FreeRefWord(kh);
    if (ref_word == nullptr)
      return Status(Code::kTableFull, "both candidate buckets and their overflow refs are full");
    Ref r;
    Status s = BuildOverflowEntry(key, value, kh, &r, &block, room);
    if (!s.ok()) return s;
    s = LogPut(key, value, block, &r);
    if (!s.ok()) return s;
    StoreRef(ref_word, r);
    CommitBlock(block);
    overflow_used_.fetch_add(1, std::memory_order_relaxed);
  }
  entries_.fetch_add(1, std::memory_order_relaxed);
  return Status::Ok();
}

void Table::MoveBlock(uint64_t offset, uint32_t size) {
  // The block is the heap's tail: nobody can reuse its bytes until this returns, so its header
  // and key can be read before taking the key's locks. It was committed (published) and may have
  // been freed since; under the key's locks IsLive decides.
  const uint8_t* blk = base_ + offset;
  uint32_t ks, vs;
  std::memcpy(&ks, blk + 16, 4);
  std::memcpy(&vs, blk + 20, 4);
  if (ks == 0 || ks > wire::kMaxKeySize || vs > wire::kMaxValueSize ||
      RoundBlock(BlockBytes(ks, vs)) != size) {
    CHECK(!heap_.IsLive(offset)) << "live heap block at " << offset << " has a bad header";
    if (clear_freed_) ClearBlock(offset, size);
    return;
  }
  uint64_t mask;
  std::memcpy(&mask, blk + 24, 8);
  std::string key_buf;  // the key is stored masked (layout.h)
  FoundValue{std::string_view(reinterpret_cast<const char*>(blk) + kBlockHeaderSize, ks), mask, 0}
      .AssignTo(&key_buf);
  const std::string_view key(key_buf);
  const KeyHash kh = HashKey(key, geo_.seed, geo_.num_buckets);
  StripeLock lock(&stripes_[kh.bucket[0] % kStripes], &stripes_[kh.bucket[1] % kStripes]);
  if (!heap_.IsLive(offset)) {  // freed by its writer meanwhile, uncleared (Heap::Retire)
    if (clear_freed_) ClearBlock(offset, size);
    return;
  }
  Location loc = Locate(key, kh);
  const bool by_ref =
      loc.found && loc.ref && loc.ref_value.type == Ref::kBlock && loc.ref_value.offset == offset;
  const bool by_slot =
      loc.found && !by_ref && loc.view.kind == kIndirect && loc.view.block_offset == offset;
  CHECK(by_ref || by_slot) << "live heap block at " << offset << " is not its key's entry";
  uint64_t to;
  CHECK(heap_.AllocateForMove(size, &to)) << "heap reserve exhausted while moving a block";
  // Same bytes, same version: a reader of the old or the new copy gets the same value.
  std::memcpy(base_ + to, blk, BlockBytes(ks, vs));
  std::atomic_thread_fence(std::memory_order_release);
  if (by_ref) {
    Ref r = loc.ref_value;
    r.offset = to;
    StoreRef(loc.ref, r);
  } else {
    alignas(64) uint8_t image[kSlotSize];
    const SlotView& v = loc.view;
    EncodeIndirectSlot(image, geo_.seed, v.version, v.key_hash, v.key_size, v.value_size, to,
                       v.block_size);
    WriteSlot(loc.slot, image);
  }
  heap_.Commit(to);
  // The old copy is unpublished: clear it before it is freed (the cleaner reclaims it as soon as
  // this returns). A reader still following the old pointer sees a bad checksum and retries.
  if (clear_freed_) ClearBlock(offset, size);
  heap_.Free(offset, size);
}

Status Table::Delete(std::string_view key) {
  if (key.empty()) return Status(Code::kInvalidArgument, "empty key");
  if (key.size() > wire::kMaxKeySize) return Status(Code::kNotFound, "");
  if (log_ != nullptr) {
    Status ready = log_->Ready();
    if (!ready.ok()) return ready;
  }
  KeyHash kh = HashKey(key, geo_.seed, geo_.num_buckets);
  StripeLock lock(&stripes_[kh.bucket[0] % kStripes], &stripes_[kh.bucket[1] % kStripes]);
  Location loc = Locate(key, kh);
  if (!loc.found) return Status(Code::kNotFound, "");
  if (log_ != nullptr) {  // on stable storage (as the fsync mode promises) before it is seen
    Status s = log_->LogDelete(key);
    if (!s.ok()) return s;
  }
  if (loc.ref) {  // unpublish first; ReleaseEntry then clears and frees the target
    __atomic_store_n(reinterpret_cast<uint64_t*>(loc.ref), 0, __ATOMIC_RELEASE);
    __atomic_store_n(reinterpret_cast<uint64_t*>(loc.ref + 8), 0, __ATOMIC_RELEASE);
    overflow_used_.fetch_sub(1, std::memory_order_relaxed);
  } else {
    uint8_t zero[kSlotSize] = {};
    WriteSlot(loc.slot, zero);
  }
  ReleaseEntry(loc);
  entries_.fetch_sub(1, std::memory_order_relaxed);
  return Status::Ok();
}

Status Table::Get(std::string_view key, std::string* value) const {
  if (key.empty() || key.size() > wire::kMaxKeySize) return Status(Code::kNotFound, "");
  KeyHash kh = HashKey(key, geo_.seed, geo_.num_buckets);
  StripeLock lock(&stripes_[kh.bucket[0] % kStripes], &stripes_[kh.bucket[1] % kStripes]);
  Location loc = Locate(key, kh);
  if (!loc.found) return Status(Code::kNotFound, "");
  loc.value.AssignTo(value);
  return Status::Ok();
}

}  // namespace rkv
