#include "server/table.h"

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

bool Table::Holds(const Probe& p, std::string_view key) const {
  if (p.outcome == Probe::kFoundInline) return true;
  if (p.outcome != Probe::kIndirect) return false;
  std::string_view k, v;  // the slot matched the key's hash: compare the full key in the block
  return DecodeBlock(base_ + p.slot.block_offset, p.slot.block_size, geo_.seed, p.slot, &k, &v) &&
         k == key;
}

Table::Location Table::Locate(std::string_view key, const KeyHash& kh) const {
  Location loc;
  for (uint32_t b : kh.bucket) {
    uint8_t* slots = bucket(b) + kSlotSize;
    for (uint32_t i = 0; i < kSlotsPerBucket - 1; ++i) {
      Probe p = ProbeSlots(slots + i * kSlotSize, 1, key, kh, geo_.seed);
      if (Holds(p, key)) {
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
      uint64_t ref = LoadU64(hdr + 8 * r);
      if (ref == 0 || RefFingerprint(ref) != kh.fingerprint) continue;
      uint8_t* s = overflow_slot(RefIndex(ref));
      Probe p = ProbeSlots(s, 1, key, kh, geo_.seed);
      if (!Holds(p, key)) continue;
      loc.found = true;
      loc.slot = s;
      loc.ref = hdr + 8 * r;
      loc.overflow_index = RefIndex(ref);
      loc.view = p.slot;
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

void Table::ReleaseEntry(const SlotView& view) {
  if (view.kind == kIndirect) heap_.Free(view.block_offset, view.block_size);
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

  if (loc.found) {  // Update in place: the key keeps its slot.
    Status s = BuildEntry(key, value, kh, image);
    if (!s.ok()) return s;
    WriteSlot(loc.slot, image);
    ReleaseEntry(loc.view);
    return Status::Ok();
  }

  // Insert: the less loaded candidate bucket with a free slot.
  uint8_t* target = nullptr;
  int best_free = 0;
  for (uint32_t b : kh.bucket) {
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
  uint8_t* ref_word = nullptr;
  uint32_t ovf = 0;
  if (target == nullptr) {  // Both buckets full: overflow slot, referenced from a header.
    int best_refs = kRefsPerBucket + 1;
    for (uint32_t b : kh.bucket) {
      uint8_t* hdr = bucket(b);
      int used = 0;
      uint8_t* free_word = nullptr;
      for (uint32_t r = 0; r < kRefsPerBucket; ++r) {
        if (LoadU64(hdr + 8 * r) != 0)
          ++used;
        else if (!free_word)
          free_word = hdr + 8 * r;
      }
      if (free_word && used < best_refs) {
        best_refs = used;
        ref_word = free_word;
      }
    }
    if (ref_word == nullptr)
      return Status(Code::kTableFull, "both candidate buckets and their overflow refs are full");
    {
      MutexLock l(&overflow_mu_);
      if (overflow_free_.empty()) return Status(Code::kTableFull, "overflow area is full");
      ovf = overflow_free_.back();
      overflow_free_.pop_back();
    }
    target = overflow_slot(ovf);
  }
  Status s = BuildEntry(key, value, kh, image);
  if (!s.ok()) {
    if (ref_word) {
      MutexLock l(&overflow_mu_);
      overflow_free_.push_back(ovf);
    }
    return s;
  }
  WriteSlot(target, image);
  if (ref_word) {
    __atomic_store_n(reinterpret_cast<uint64_t*>(ref_word), MakeRef(kh.fingerprint, ovf),
                     __ATOMIC_RELEASE);
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
  if (loc.ref) __atomic_store_n(reinterpret_cast<uint64_t*>(loc.ref), 0, __ATOMIC_RELEASE);
  uint8_t zero[kSlotSize] = {};
  WriteSlot(loc.slot, zero);
  ReleaseEntry(loc.view);
  if (loc.ref) {
    MutexLock l(&overflow_mu_);
    overflow_free_.push_back(loc.overflow_index);
    overflow_used_.fetch_sub(1, std::memory_order_relaxed);
  }
  entries_.fetch_sub(1, std::memory_order_relaxed);
  return Status::Ok();
}

Status Table::Get(std::string_view key, std::string* value) const {
  if (key.empty() || key.size() > wire::kMaxKeySize) return Status(Code::kNotFound, "");
  KeyHash kh = HashKey(key, geo_.seed, geo_.num_buckets);
  StripeLock lock(&stripes_[kh.bucket[0] % kStripes], &stripes_[kh.bucket[1] % kStripes]);
  Location loc = Locate(key, kh);
  if (!loc.found) return Status(Code::kNotFound, "");
  if (loc.view.kind == kInline) {
    value->assign(loc.view.value);
  } else {
    std::string_view k, v;
    if (!DecodeBlock(base_ + loc.view.block_offset, loc.view.block_size, geo_.seed, loc.view, &k,
                     &v))
      return Status(Code::kIoError, "corrupt block");
    value->assign(v);
  }
  return Status::Ok();
}

}  // namespace rkv
