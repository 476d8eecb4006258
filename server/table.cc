#include "server/table.h"

#include <glog/logging.h>

#include <algorithm>
#include <cstring>

#include "common/lookup.h"
#include "common/wire.h"

namespace rkv {

using namespace layout;

namespace {
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
  std::memset(base_, 0, geo_.heap_offset);
  overflow_free_.reserve(geo_.overflow_slots);
  for (uint32_t i = geo_.overflow_slots; i > 0; --i) overflow_free_.push_back(i - 1);
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

bool Table::Holds(const Probe& p, std::string_view key, std::string_view* value) const {
  if (p.outcome == Probe::kFound) {
    *value = p.value;
    return true;
  }
  if (p.outcome != Probe::kIndirect) return false;
  std::string_view k;  // the slot matched the key's hash: compare the full key in the block
  return DecodeBlock(base_ + p.slot.block_offset, p.slot.block_size, geo_.seed, p.slot, &k,
                     value) &&
         k == key;
}

Table::Location Table::Locate(std::string_view key, const KeyHash& kh) const {
  Location loc;
  for (uint32_t b : kh.bucket) {
    uint8_t* slots = bucket(b) + kSlotSize;
    for (uint32_t i = 0; i < kSlotsPerBucket - 1; ++i) {
      Probe p = ProbeSlots(slots + i * kSlotSize, 1, key, kh, geo_.seed);
      if (Holds(p, key, &loc.value)) {
        loc.found = true;
        loc.slot = slots + i * kSlotSize;
        loc.view = p.slot;
        return loc;
      }
    }
  }
  for (uint32_t b : kh.bucket) {
    uint8_t* hdr = bucket(b);
    for (uint32_t r = 0; r < kRefsPerBucket; ++r) {
      Ref ref = DecodeRef(hdr + kRefSize * r);
      if (ref.type == Ref::kUnused || ref.fingerprint != kh.fingerprint) continue;
      CHECK_LE(ref.offset + ref.length, geo_.region_size) << "overflow ref outside the region";
      Probe p = ProbeRef(base_ + ref.offset, ref, key, kh, geo_.seed);
      CHECK_NE(p.outcome, Probe::kTorn) << "overflow ref does not match its target";
      if (!Holds(p, key, &loc.value)) continue;
      loc.found = true;
      loc.ref = hdr + kRefSize * r;
      loc.ref_value = ref;
      if (ref.type == Ref::kSlot) {
        loc.slot = base_ + ref.offset;
        loc.view = p.slot;
      }
      return loc;
    }
  }
  return loc;
}

Status Table::BuildEntry(std::string_view key, std::string_view value, const KeyHash& kh,
                         uint8_t* image) {
  uint64_t version = next_version_.fetch_add(1, std::memory_order_relaxed);
  if (FitsInline(key.size(), value.size())) {
    EncodeInlineSlot(image, geo_.seed, version, key, value);
    return Status::Ok();
  }
  uint64_t off;
  uint32_t size;
  if (!heap_.Allocate(BlockBytes(key.size(), value.size()), &off, &size))
    return Status(Code::kTableFull, "value heap is full");
  EncodeBlock(base_ + off, geo_.seed, version, key, value);
  std::atomic_thread_fence(std::memory_order_release);
  EncodeIndirectSlot(image, geo_.seed, version, kh.hash, static_cast<uint32_t>(key.size()),
                     static_cast<uint32_t>(value.size()), off, size);
  return Status::Ok();
}

Status Table::BuildOverflowEntry(std::string_view key, std::string_view value, const KeyHash& kh,
                                 Ref* ref) {
  uint64_t version = next_version_.fetch_add(1, std::memory_order_relaxed);
  ref->fingerprint = kh.fingerprint;
  ref->version = static_cast<uint32_t>(version);
  uint32_t index;
  if (FitsInline(key.size(), value.size()) && AllocateOverflowSlot(&index)) {
    alignas(64) uint8_t image[kSlotSize];
    EncodeInlineSlot(image, geo_.seed, version, key, value);
    WriteSlot(overflow_slot(index), image);
    ref->type = Ref::kSlot;
    ref->offset = geo_.overflow_slot_offset(index);
    ref->length = kSlotSize;
    return Status::Ok();
  }
  // A larger entry (or a small one once the overflow slots run out) is its own heap block,
  // which the ref points at directly: one READ, like an overflow slot.
  uint64_t off;
  uint32_t size;
  if (!heap_.Allocate(BlockBytes(key.size(), value.size()), &off, &size))
    return Status(Code::kTableFull, "value heap is full");
  EncodeBlock(base_ + off, geo_.seed, version, key, value);
  std::atomic_thread_fence(std::memory_order_release);
  ref->type = Ref::kBlock;
  ref->offset = off;
  ref->length = BlockBytes(key.size(), value.size());
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

void Table::ReleaseEntry(const Location& loc) {
  if (loc.view.kind == kIndirect) heap_.Free(loc.view.block_offset, loc.view.block_size);
  if (!loc.ref) return;
  if (loc.ref_value.type == Ref::kSlot) {
    uint8_t zero[kSlotSize] = {};
    WriteSlot(loc.slot, zero);
    FreeOverflowSlot(
        static_cast<uint32_t>((loc.ref_value.offset - geo_.overflow_offset) / kSlotSize));
  } else {
    heap_.Free(loc.ref_value.offset, Heap::BlockSizeFor(loc.ref_value.length));
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

Status Table::Put(std::string_view key, std::string_view value) {
  if (key.empty()) return Status(Code::kInvalidArgument, "empty key");
  if (key.size() > wire::kMaxKeySize)
    return Status(Code::kTooLarge, "key of " + std::to_string(key.size()) + " bytes exceeds " +
                                       std::to_string(wire::kMaxKeySize));
  if (value.size() > wire::kMaxValueSize)
    return Status(Code::kTooLarge, "value of " + std::to_string(value.size()) + " bytes exceeds " +
                                       std::to_string(wire::kMaxValueSize));
  KeyHash kh = HashKey(key, geo_.seed, geo_.num_buckets);
  StripeLock lock(&stripes_[kh.bucket[0] % kStripes], &stripes_[kh.bucket[1] % kStripes]);
  Location loc = Locate(key, kh);
  alignas(64) uint8_t image[kSlotSize];

  // Update: the key keeps its place (bucket slot or overflow ref); only what it points at changes.
  if (loc.found && !loc.ref) {
    Status s = BuildEntry(key, value, kh, image);
    if (!s.ok()) return s;
    WriteSlot(loc.slot, image);
    ReleaseEntry(loc);
    return Status::Ok();
  }
  if (loc.found && loc.ref_value.type == Ref::kSlot && FitsInline(key.size(), value.size())) {
    // Rewrite the overflow slot, then the ref's version: a reader in between sees a version
    // mismatch and retries.
    Status s = BuildEntry(key, value, kh, image);
    if (!s.ok()) return s;
    WriteSlot(loc.slot, image);
    Ref r = loc.ref_value;
    r.version = static_cast<uint32_t>(LoadU64(image + 8));
    StoreRef(loc.ref, r);
    return Status::Ok();
  }
  if (loc.found) {  // new target (block, or slot for a value that shrank), then the ref
    Ref r;
    Status s = BuildOverflowEntry(key, value, kh, &r);
    if (!s.ok()) return s;
    StoreRef(loc.ref, r);
    ReleaseEntry(loc);
    return Status::Ok();
  }

  // Insert: the less loaded candidate bucket with a free slot; a tie goes to a bucket picked by
  // a bit of the key's hash (random tie-breaking balances adjacent candidates better).
  uint8_t* target = nullptr;
  int best_free = 0;
  const bool flip = (kh.hash >> 8) & 1;
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
    Status s = BuildEntry(key, value, kh, image);
    if (!s.ok()) return s;
    WriteSlot(target, image);
  } else {  // Both buckets full: an overflow entry, published through a header ref.
    uint8_t* ref_word = FreeRefWord(kh);
    if (ref_word == nullptr)
      return Status(Code::kTableFull, "both candidate buckets and their overflow refs are full");
    Ref r;
    Status s = BuildOverflowEntry(key, value, kh, &r);
    if (!s.ok()) return s;
    StoreRef(ref_word, r);
    overflow_used_.fetch_add(1, std::memory_order_relaxed);
  }
  entries_.fetch_add(1, std::memory_order_relaxed);
  return Status::Ok();
}

Status Table::Delete(std::string_view key) {
  if (key.empty()) return Status(Code::kInvalidArgument, "empty key");
  if (key.size() > wire::kMaxKeySize) return Status(Code::kNotFound, "");
  KeyHash kh = HashKey(key, geo_.seed, geo_.num_buckets);
  StripeLock lock(&stripes_[kh.bucket[0] % kStripes], &stripes_[kh.bucket[1] % kStripes]);
  Location loc = Locate(key, kh);
  if (!loc.found) return Status(Code::kNotFound, "");
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
  value->assign(loc.value);
  return Status::Ok();
}

}  // namespace rkv
