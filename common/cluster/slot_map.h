// SPDX-License-Identifier: Apache-2.0
// SlotMap: which server owns each hash slot of a cluster, at which configuration epoch, as kept
// in etcd under the cluster's prefix (docs/cluster.md, "The slot map"). Servers check
// ownership with it; clients route keys with it.
//
// A key's slot: the top log2(num_slots) bits of XXH3-64 of the key seeded with the cluster's
// slot seed (a value chosen at `cluster init`, unrelated to any table's bucket hash seed, so
// slots and buckets are independent). num_slots is a power of two.
// Encoding (etcd value; little-endian, fixed-width; docs/cluster.md): a 48-byte header, then
// num_servers 72-byte server entries, then num_slots x replicas 16-bit owners (an index into
// the server table; kUnassigned: none). The header's XXH3-64 checksum covers the whole value
// with the checksum field read as zero. Decode checks every field (magic, version, sizes, counts,
// owners, addresses, checksum): the bytes come from etcd, which any process with access may write.
// Thread safety: a value type; const methods may be called from any thread.
#ifndef RKV_COMMON_CLUSTER_SLOT_MAP_H_
#define RKV_COMMON_CLUSTER_SLOT_MAP_H_

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "rkv/status.h"

namespace rkv::cluster {

inline constexpr uint32_t kSlotMapMagic = 0x4d4b5652;  // "RVKM" little-endian
inline constexpr uint16_t kSlotMapVersion = 1;
inline constexpr uint32_t kMaxSlots = 65536;
inline constexpr uint32_t kMaxServers = 1024;
inline constexpr uint16_t kMaxReplicas = 3;
inline constexpr uint16_t kUnassigned = 0xffff;
inline constexpr size_t kMaxAddressBytes = 64;

// One server of the map: its cluster-wide id (never reused) and the address clients dial.
struct ServerEntry {
  uint32_t id = 0;
  std::string host;  // 1..64 printable bytes (an IP address or a name)
  uint16_t port = 0;
  bool operator==(const ServerEntry& o) const {
    return id == o.id && host == o.host && port == o.port;
  }
};

class SlotMap {
 public:
  SlotMap() = default;
  // An empty map: no servers, every slot unassigned. num_slots: a power of two, 1..kMaxSlots;
  // replicas: 1..kMaxReplicas.
  [[nodiscard]] static Status Create(uint32_t num_slots, uint16_t replicas, uint64_t slot_seed,
                                     SlotMap* out);

  // The slot of a key (any map with this seed and slot count gives the same).
  uint32_t SlotOf(std::string_view key) const { return SlotOf(key, slot_seed_, num_slots_); }
  static uint32_t SlotOf(std::string_view key, uint64_t slot_seed, uint32_t num_slots);

  uint64_t epoch() const { return epoch_; }
  void set_epoch(uint64_t e) { epoch_ = e; }
  uint32_t num_slots() const { return num_slots_; }
  uint16_t replicas() const { return replicas_; }
  uint64_t slot_seed() const { return slot_seed_; }
  const std::vector<ServerEntry>& servers() const { return servers_; }

  // Adds a server (or finds it: same id) and returns its index; kUnassigned when the table is
  // full or the entry is invalid (empty or too long host, port 0, a different entry with the
  // same id).
  uint16_t AddServer(const ServerEntry& s);
  // Index of the server with this id, or kUnassigned.
  uint16_t IndexOf(uint32_t id) const;
  // The server owning `slot` as replica r (0: the primary), or null when unassigned.
  const ServerEntry* Owner(uint32_t slot, uint16_t r = 0) const;
  uint16_t OwnerIndex(uint32_t slot, uint16_t r = 0) const;
  // Sets slot's replica r to server index `server` (kUnassigned clears it). False if out of
  // range, or if the server already holds another replica of the slot.
  bool Assign(uint32_t slot, uint16_t r, uint16_t server);
  // Slots whose primary is server index `server`.
  uint32_t SlotsOwnedBy(uint16_t server) const;

  void Encode(std::string* out) const;
  [[nodiscard]] static Status Decode(std::string_view bytes, SlotMap* out);

 private:
  uint64_t epoch_ = 0;
  uint64_t slot_seed_ = 0;
  uint32_t num_slots_ = 0;
  uint16_t replicas_ = 1;
  std::vector<ServerEntry> servers_;
  std::vector<uint16_t> owners_;  // num_slots_ x replicas_, slot-major
};

}  // namespace rkv::cluster

#endif  // RKV_COMMON_CLUSTER_SLOT_MAP_H_
