// SPDX-License-Identifier: Apache-2.0
// Ownership words: one 8-byte word per hash slot in a cluster server's registered region (after
// the table), read by clients in the same doorbell as a GET's entry (docs/cluster.md,
// "Ownership words"; the argument in docs/design.md, "Reads while slots move").
//
// Word (little-endian u64): bits 63..16 the map epoch at which this server took the slot,
// bits 15..8 the state, bits 7..0 zero. States: NOT_OWNED (0; every word starts so), OWNED (1),
// MOVING (2: still this server's, its writes paused while it is handed over), IMPORTING (3: a
// migration is copying the slot to this server; not yet its), BACKUP (4: this server holds a
// replica the slot's primary keeps in sync; clients never read it), PROMOTING (5: this server's
// after a failover, but not yet readable or writable: docs/design.md, "Replicas and failover"). A
// server writes a word with one aligned 8-byte store (a reader sees the old word or the new one).
// The rule a reader applies (Readable): an entry READ posted before the word's READ, on the
// same QP, may be returned only if the word is OWNED or MOVING at an epoch no newer than the
// reader's map; otherwise the reader re-reads the map and asks the owner it names.
// Thread safety: pure functions.
#ifndef RKV_COMMON_CLUSTER_OWNERSHIP_WORD_H_
#define RKV_COMMON_CLUSTER_OWNERSHIP_WORD_H_

#include <cstdint>

namespace rkv::cluster {

// kImporting (3): a migration is copying the slot here; neither readable nor writable by clients.
// kBackup (4): a replica (docs/cluster.md, "Replication"): written by the primary only.
enum class SlotState : uint8_t {
  kNotOwned = 0,
  kOwned = 1,
  kMoving = 2,
  kImporting = 3,
  kBackup = 4,
  kPromoting = 5  // a promoted backup until its fence passed: neither readable nor writable
};
inline constexpr uint64_t kMaxWordEpoch = (uint64_t{1} << 48) - 1;

inline uint64_t OwnerWord(uint64_t epoch, SlotState state) {
  return (epoch << 16) | (uint64_t(state) << 8);
}
inline uint64_t WordEpoch(uint64_t word) { return word >> 16; }
inline SlotState WordState(uint64_t word) { return SlotState((word >> 8) & 0xff); }
// Whether a GET may return what it read before reading `word`, for a client whose map has
// epoch `map_epoch`.
inline bool Readable(uint64_t word, uint64_t map_epoch) {
  const SlotState st = WordState(word);
  return (word & 0xff) == 0 && (st == SlotState::kOwned || st == SlotState::kMoving) &&
         WordEpoch(word) <= map_epoch;
}
const char* SlotStateName(SlotState s);

}  // namespace rkv::cluster

#endif  // RKV_COMMON_CLUSTER_OWNERSHIP_WORD_H_
