// SPDX-License-Identifier: Apache-2.0
#include "common/cluster/slot_map.h"

#include <xxhash.h>

#include <cstring>

#include "common/cluster/le_bytes.h"

namespace rkv::cluster {
namespace {

// Header: magic u32 | version u16 | replicas u16 | checksum u64 | epoch u64 | slot_seed u64 |
// num_slots u32 | num_servers u32 | reserved u64 (0).
constexpr size_t kHeaderBytes = 48;
constexpr size_t kChecksumAt = 8;  // XXH3-64 of the whole value, this field read as zero
// Server entry: id u32 | port u16 | host_len u8 | reserved u8 (0) | host[64] (zero padded).
constexpr size_t kServerBytes = 72;
static_assert(kServerBytes == 8 + kMaxAddressBytes, "server entry layout");
constexpr uint64_t kSlotSalt = 0x736c6f742d6d6170ULL;  // "slot-map": slots never reuse the seed

bool PowerOfTwo(uint32_t n) { return n != 0 && (n & (n - 1)) == 0; }
int Log2(uint32_t n) {
  int b = 0;
  while ((uint32_t{1} << b) < n) ++b;
  return b;
}
bool ValidHost(std::string_view h) {
  if (h.empty() || h.size() > kMaxAddressBytes) return false;
  for (char c : h)
    if (c <= 0x20 || c >= 0x7f) return false;
  return true;
}
Status Bad(const std::string& why) { return Status(Code::kProtocolError, "slot map: " + why); }

}  // namespace

Status SlotMap::Create(uint32_t num_slots, uint16_t replicas, uint64_t slot_seed, SlotMap* out) {
  if (!PowerOfTwo(num_slots) || num_slots > kMaxSlots)
    return Status(Code::kInvalidArgument, "slots must be a power of two, 1.." +
                                              std::to_string(kMaxSlots) + ", not " +
                                              std::to_string(num_slots));
  if (replicas < 1 || replicas > kMaxReplicas)
    return Status(Code::kInvalidArgument, "replicas must be 1.." + std::to_string(kMaxReplicas));
  SlotMap m;
  m.num_slots_ = num_slots;
  m.replicas_ = replicas;
  m.slot_seed_ = slot_seed;
  m.owners_.assign(size_t(num_slots) * replicas, kUnassigned);
  *out = std::move(m);
  return Status::Ok();
}

uint32_t SlotMap::SlotOf(std::string_view key, uint64_t slot_seed, uint32_t num_slots) {
  if (num_slots <= 1) return 0;
  const uint64_t h = XXH3_64bits_withSeed(key.data(), key.size(), slot_seed ^ kSlotSalt);
  return uint32_t(h >> (64 - Log2(num_slots)));
}

uint16_t SlotMap::AddServer(const ServerEntry& s) {
  if (!ValidHost(s.host) || s.port == 0) return kUnassigned;
  const uint16_t at = IndexOf(s.id);
  if (at != kUnassigned) return servers_[at] == s ? at : kUnassigned;
  if (servers_.size() >= kMaxServers) return kUnassigned;
  servers_.push_back(s);
  return uint16_t(servers_.size() - 1);
}

uint16_t SlotMap::IndexOf(uint32_t id) const {
  for (size_t i = 0; i < servers_.size(); ++i)
    if (servers_[i].id == id) return uint16_t(i);
  return kUnassigned;
}

uint16_t SlotMap::OwnerIndex(uint32_t slot, uint16_t r) const {
  if (slot >= num_slots_ || r >= replicas_) return kUnassigned;
  return owners_[size_t(slot) * replicas_ + r];
}

const ServerEntry* SlotMap::Owner(uint32_t slot, uint16_t r) const {
  const uint16_t i = OwnerIndex(slot, r);
  return i == kUnassigned ? nullptr : &servers_[i];
}

bool SlotMap::Assign(uint32_t slot, uint16_t r, uint16_t server) {
  if (slot >= num_slots_ || r >= replicas_) return false;
  if (server != kUnassigned && server >= servers_.size()) return false;
  if (server != kUnassigned)  // a slot's replicas are distinct servers (Decode checks it too)
    for (uint16_t other = 0; other < replicas_; ++other)
      if (other != r && OwnerIndex(slot, other) == server) return false;
  owners_[size_t(slot) * replicas_ + r] = server;
  return true;
}

uint32_t SlotMap::SlotsOwnedBy(uint16_t server) const {
  uint32_t n = 0;
  for (uint32_t s = 0; s < num_slots_; ++s) n += OwnerIndex(s, 0) == server;
  return n;
}

void SlotMap::Encode(std::string* out) const {
  out->clear();
  out->reserve(kHeaderBytes + servers_.size() * kServerBytes + owners_.size() * 2);
  AppendLE(out, kSlotMapMagic, 4);
  AppendLE(out, kSlotMapVersion, 2);
  AppendLE(out, replicas_, 2);
  AppendLE(out, 0, 8);  // checksum, below
  AppendLE(out, epoch_, 8);
  AppendLE(out, slot_seed_, 8);
  AppendLE(out, num_slots_, 4);
  AppendLE(out, uint32_t(servers_.size()), 4);
  AppendLE(out, 0, 8);
  for (const ServerEntry& s : servers_) {
    AppendLE(out, s.id, 4);
    AppendLE(out, s.port, 2);
    AppendLE(out, s.host.size(), 1);
    AppendLE(out, 0, 1);
    std::string host = s.host;
    host.resize(kMaxAddressBytes, '\0');
    out->append(host);
  }
  for (uint16_t o : owners_) AppendLE(out, o, 2);
  const uint64_t sum = ChecksumWithFieldZeroed(*out, kChecksumAt);
  for (int i = 0; i < 8; ++i) (*out)[kChecksumAt + size_t(i)] = char((sum >> (8 * i)) & 0xff);
}

Status SlotMap::Decode(std::string_view in, SlotMap* out) {
  if (in.size() < kHeaderBytes)
    return Bad(std::to_string(in.size()) + " bytes, shorter than its header");
  if (GetLE(in, 0, 4) != kSlotMapMagic) return Bad("not a slot map (bad magic)");
  const uint64_t version = GetLE(in, 4, 2);
  if (version != kSlotMapVersion)
    return Bad("version " + std::to_string(version) + ", this build reads " +
               std::to_string(kSlotMapVersion));
  const uint64_t replicas = GetLE(in, 6, 2), num_slots = GetLE(in, 32, 4),
                 servers = GetLE(in, 36, 4);
  if (replicas < 1 || replicas > kMaxReplicas) return Bad("bad replica count");
  if (num_slots > kMaxSlots || !PowerOfTwo(uint32_t(num_slots))) return Bad("bad slot count");
  if (servers > kMaxServers) return Bad("more than " + std::to_string(kMaxServers) + " servers");
  if (GetLE(in, 40, 8) != 0) return Bad("reserved header bytes are not zero");
  const size_t want = kHeaderBytes + servers * kServerBytes + num_slots * replicas * 2;
  if (in.size() != want)
    return Bad(std::to_string(in.size()) + " bytes where its counts say " + std::to_string(want));
  if (ChecksumWithFieldZeroed(in, kChecksumAt) != GetLE(in, kChecksumAt, 8))
    return Bad("checksum mismatch (corrupt or torn)");
  SlotMap m;
  m.replicas_ = uint16_t(replicas);
  m.num_slots_ = uint32_t(num_slots);
  m.epoch_ = GetLE(in, 16, 8);
  m.slot_seed_ = GetLE(in, 24, 8);
  size_t at = kHeaderBytes;
  for (uint64_t i = 0; i < servers; ++i, at += kServerBytes) {
    ServerEntry s;
    s.id = uint32_t(GetLE(in, at, 4));
    s.port = uint16_t(GetLE(in, at + 4, 2));
    const size_t len = size_t(GetLE(in, at + 6, 1));
    if (GetLE(in, at + 7, 1) != 0 || len == 0 || len > kMaxAddressBytes)
      return Bad("server entry " + std::to_string(i) + " malformed");
    s.host.assign(in.data() + at + 8, len);
    for (size_t p = len; p < kMaxAddressBytes; ++p)
      if (in[at + 8 + p] != '\0') return Bad("server entry " + std::to_string(i) + " padding");
    if (!ValidHost(s.host) || s.port == 0 || m.IndexOf(s.id) != kUnassigned)
      return Bad("server entry " + std::to_string(i) + " invalid or duplicated");
    m.servers_.push_back(std::move(s));
  }
  m.owners_.resize(size_t(num_slots * replicas));
  for (size_t i = 0; i < m.owners_.size(); ++i, at += 2) {
    const uint16_t o = uint16_t(GetLE(in, at, 2));
    if (o != kUnassigned && o >= servers) return Bad("slot owner names no server");
    m.owners_[i] = o;
  }
  // A slot's replicas are distinct servers.
  for (uint32_t s = 0; s < m.num_slots_; ++s)
    for (uint16_t a = 0; a < m.replicas_; ++a)
      for (uint16_t b = uint16_t(a + 1); b < m.replicas_; ++b)
        if (m.OwnerIndex(s, a) != kUnassigned && m.OwnerIndex(s, a) == m.OwnerIndex(s, b))
          return Bad("slot " + std::to_string(s) + " has one server twice");
  *out = std::move(m);
  return Status::Ok();
}

}  // namespace rkv::cluster
