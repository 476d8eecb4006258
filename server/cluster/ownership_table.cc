// SPDX-License-Identifier: Apache-2.0
#include "server/cluster/ownership_table.h"

#include <thread>
#include <utility>

#include "common/cluster/slot_map.h"
#include "common/wire.h"

namespace rkv::cluster {

OwnershipTable::OwnershipTable(uint64_t* words, uint32_t num_slots, uint64_t slot_seed)
    : words_(words),
      num_slots_(num_slots),
      slot_seed_(slot_seed),
      inflight_(new std::atomic<uint32_t>[num_slots]),
      tracked_(new std::atomic<uint8_t>[num_slots]),
      handover_(new std::atomic<uint8_t>[num_slots]),
      ring_loss_(new std::atomic<uint8_t>[num_slots]),
      reclaiming_(new std::atomic<uint32_t>[num_slots]),
      importer_(new std::atomic<uint32_t>[num_slots]),
      ticket_(new std::atomic<uint64_t>[num_slots]),
      fence_ns_(new std::atomic<int64_t>[num_slots]),
      seq_(new std::atomic<uint64_t>[num_slots]),
      digest_(new std::atomic<uint64_t>[num_slots]),
      last_(new LastWriteRecord[num_slots]),
      last_mu_(new std::mutex[kLastStripes]) {
  for (uint32_t i = 0; i < num_slots; ++i) {
    inflight_[i].store(0);
    tracked_[i].store(0);
    handover_[i].store(0);
    ring_loss_[i].store(0);
    reclaiming_[i].store(0);
    importer_[i].store(0);
    ticket_[i].store(0);
    fence_ns_[i].store(0);
    seq_[i].store(0);
    digest_[i].store(0);
  }
}

void OwnershipTable::SetLastWrite(uint32_t slot, uint64_t digest, std::string_view key,
                                  uint32_t sender) {
  std::lock_guard<std::mutex> l(last_mu_[slot % kLastStripes]);
  last_[slot].has = true;
  last_[slot].sender = sender;
  last_[slot].digest = digest;
  last_[slot].key.assign(key);
}

void OwnershipTable::ClearLastWrite(uint32_t slot) {
  std::lock_guard<std::mutex> l(last_mu_[slot % kLastStripes]);
  last_[slot] = LastWriteRecord{};
}

bool OwnershipTable::LastWrite(uint32_t slot, uint64_t* digest, std::string* key,
                               uint32_t* sender) const {
  std::lock_guard<std::mutex> l(last_mu_[slot % kLastStripes]);
  if (sender != nullptr) *sender = last_[slot].sender;
  *digest = last_[slot].digest;
  *key = last_[slot].key;
  return last_[slot].has;
}

bool OwnershipTable::BeginImports(const std::vector<uint32_t>& slots,
                                  const std::vector<uint64_t>& words, uint32_t qp_num,
                                  ImportBegun* begun) {
  MutexLock l(&import_mu_);
  *begun = ImportBegun();
  if (slots.size() != words.size()) return false;
  for (size_t i = 0; i < slots.size(); ++i)
    if (slots[i] >= num_slots_ || Word(slots[i]) != words[i]) return false;
  begun->slots = slots;
  begun->words = words;
  for (size_t i = 0; i < slots.size(); ++i) {
    const uint32_t slot = slots[i];
    begun->prev_importer.push_back(importer_[slot].load());
    begun->prev_ticket.push_back(ticket_[slot].load());
    // The connection and ticket before the word: a migration write or purge batch that sees
    // IMPORTING sees them too.
    importer_[slot].store(qp_num);
    ticket_[slot].store(++imports_);
    begun->tickets.push_back(imports_);
    if (CompareAndSet(slot, words[i], OwnerWord(WordEpoch(words[i]), SlotState::kImporting)))
      continue;
    // A map applied since the check (Apply stores words without this lock): undo them all.
    UndoLocked(*begun);
    *begun = ImportBegun();
    return false;
  }
  return true;
}

void OwnershipTable::UndoImports(const ImportBegun& begun) {
  MutexLock l(&import_mu_);
  UndoLocked(begun);
}

void OwnershipTable::UndoLocked(const ImportBegun& b) {
  for (size_t i = 0; i < b.tickets.size(); ++i) {
    const uint32_t slot = b.slots[i];
    if (ticket_[slot].load() != b.tickets[i]) continue;  // taken over since: not ours to undo
    (void)CompareAndSet(slot, OwnerWord(WordEpoch(b.words[i]), SlotState::kImporting), b.words[i]);
    importer_[slot].store(b.prev_importer[i]);
    ticket_[slot].store(b.prev_ticket[i]);
  }
}

bool OwnershipTable::BeginImportWrite(uint32_t slot, uint32_t qp_num) {
  inflight_[slot].fetch_add(1, std::memory_order_seq_cst);
  if (WordState(Word(slot)) == SlotState::kImporting && importer_[slot].load() == qp_num)
    return true;
  EndWrite(slot);
  return false;
}

bool OwnershipTable::BeginPurge(uint32_t slot, uint64_t ticket) {
  inflight_[slot].fetch_add(1, std::memory_order_seq_cst);
  if (WordState(Word(slot)) == SlotState::kImporting && ticket_[slot].load() == ticket) return true;
  EndWrite(slot);
  return false;
}

bool OwnershipTable::DropImport(uint32_t slot, uint64_t ticket, uint64_t word, uint64_t released) {
  MutexLock l(&import_mu_);
  if (slot >= num_slots_ || ticket == 0 || ticket_[slot].load() != ticket ||
      WordState(word) != SlotState::kImporting)
    return false;
  if (!CompareAndSet(slot, word, released)) return false;
  ticket_[slot].store(0);
  return true;
}

void OwnershipTable::SetHandingOver(const std::vector<uint32_t>& slots, bool on) {
  for (uint32_t s : slots)
    if (s < num_slots_) handover_[s].store(on ? 1 : 0);
}

void OwnershipTable::Track(const std::vector<uint32_t>& slots, bool on) {
  for (uint32_t s : slots)
    if (s < num_slots_) tracked_[s].store(on ? 1 : 0, std::memory_order_seq_cst);
  if (!on) {
    MutexLock l(&dirty_mu_);
    dirty_.clear();
    dirty_overflow_ = false;
  }
}

void OwnershipTable::MarkDirty(std::string_view key) {
  MutexLock l(&dirty_mu_);
  if (dirty_.size() >= kMaxDirty && dirty_.count(std::string(key)) == 0) {
    dirty_overflow_ = true;
    return;
  }
  dirty_.emplace(key);
}

void OwnershipTable::TakeDirty(std::vector<std::string>* out, bool* overflowed) {
  out->clear();
  MutexLock l(&dirty_mu_);
  out->reserve(dirty_.size());
  for (auto it = dirty_.begin(); it != dirty_.end();)
    out->push_back(std::move(dirty_.extract(it++).value()));
  *overflowed = dirty_overflow_;
  dirty_overflow_ = false;
}

uint32_t OwnershipTable::SlotOf(std::string_view key) const {
  return SlotMap::SlotOf(key, slot_seed_, num_slots_);
}

bool OwnershipTable::BeginWrite(uint32_t slot, uint64_t* word) {
  inflight_[slot].fetch_add(1, std::memory_order_seq_cst);
  *word = Word(slot);
  if (WordState(*word) == SlotState::kOwned) {
    const int64_t fence = fence_ns_[slot].load();
    if ((fence == 0 || std::chrono::steady_clock::now().time_since_epoch().count() >= fence) &&
        reclaiming_[slot].load(std::memory_order_seq_cst) == 0)
      return true;
    *word = OwnerWord(WordEpoch(*word), SlotState::kMoving);
  }
  inflight_[slot].fetch_sub(1, std::memory_order_seq_cst);
  return false;
}

bool OwnershipTable::BeginReplicaWrite(uint32_t slot, uint64_t* word) {
  inflight_[slot].fetch_add(1, std::memory_order_seq_cst);
  *word = Word(slot);
  if (WordState(*word) == SlotState::kBackup &&
      reclaiming_[slot].load(std::memory_order_seq_cst) == 0)
    return true;
  if (WordState(*word) == SlotState::kBackup)  // still being freed: asked again
    *word = OwnerWord(WordEpoch(*word), SlotState::kNotOwned);
  inflight_[slot].fetch_sub(1, std::memory_order_seq_cst);
  return false;
}

bool OwnershipTable::BeginReclaim(uint32_t slot, uint64_t word) {
  reclaiming_[slot].fetch_add(1, std::memory_order_seq_cst);
  inflight_[slot].fetch_add(1, std::memory_order_seq_cst);
  if (Word(slot) == word) return true;
  EndReclaim(slot);
  return false;
}

void OwnershipTable::EndReclaim(uint32_t slot) {
  inflight_[slot].fetch_sub(1, std::memory_order_seq_cst);
  reclaiming_[slot].fetch_sub(1, std::memory_order_seq_cst);
}

bool OwnershipTable::Resume(uint32_t slot) {
  uint64_t w = Word(slot);
  return (WordState(w) == SlotState::kMoving || WordState(w) == SlotState::kNotOwned) &&
         __atomic_compare_exchange_n(&words_[slot], &w, OwnerWord(WordEpoch(w), SlotState::kOwned),
                                     false, __ATOMIC_SEQ_CST, __ATOMIC_SEQ_CST);
}

bool OwnershipTable::WaitIdle(uint32_t slot, std::chrono::steady_clock::time_point deadline) const {
  while (inflight_[slot].load(std::memory_order_seq_cst) != 0) {
    if (std::chrono::steady_clock::now() >= deadline) return false;
    std::this_thread::sleep_for(std::chrono::microseconds(100));
  }
  return true;
}

void OwnershipTable::FenceWrites(uint32_t slot, std::chrono::steady_clock::time_point until) {
  fence_ns_[slot].store(int64_t(until.time_since_epoch().count()));
}

uint32_t OwnershipTable::CountState(SlotState st) const {
  uint32_t n = 0;
  for (uint32_t i = 0; i < num_slots_; ++i) n += WordState(Word(i)) == st;
  return n;
}

bool OwnershipTable::Pause(uint32_t slot, std::chrono::steady_clock::time_point deadline) {
  // OWNED -> MOVING only: a word a map change released meanwhile stays released.
  uint64_t w = Word(slot);
  while (WordState(w) != SlotState::kMoving) {
    if (WordState(w) != SlotState::kOwned) return false;
    if (__atomic_compare_exchange_n(&words_[slot], &w, OwnerWord(WordEpoch(w), SlotState::kMoving),
                                    false, __ATOMIC_SEQ_CST, __ATOMIC_SEQ_CST))
      break;
  }
  while (inflight_[slot].load(std::memory_order_seq_cst) != 0) {
    if (std::chrono::steady_clock::now() >= deadline) return false;
    std::this_thread::sleep_for(std::chrono::microseconds(100));
  }
  return true;
}

uint32_t OwnershipTable::CountOwned() const {
  uint32_t n = 0;
  for (uint32_t i = 0; i < num_slots_; ++i) {
    const SlotState st = WordState(Word(i));
    if (st == SlotState::kOwned || st == SlotState::kMoving || st == SlotState::kPromoting) ++n;
  }
  return n;
}

void OwnershipTable::SetRouting(uint64_t epoch, std::vector<uint32_t> owner_ids) {
  MutexLock l(&mu_);
  routing_epoch_ = epoch;
  owner_ids_ = std::move(owner_ids);
}

void OwnershipTable::Route(uint32_t slot, uint64_t* epoch, uint32_t* owner_id) const {
  MutexLock l(&mu_);
  *epoch = routing_epoch_;
  *owner_id = slot < owner_ids_.size() ? owner_ids_[slot] : wire::kNoOwner;
}

}  // namespace rkv::cluster
