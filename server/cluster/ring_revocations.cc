// SPDX-License-Identifier: Apache-2.0
#include "server/cluster/ring_revocations.h"

#include <set>

#include "common/wire.h"

namespace rkv::cluster {
namespace {

uint32_t PrimaryId(const SlotMap& m, uint32_t slot) {
  const ServerEntry* e = m.Owner(slot, 0);
  return e != nullptr ? e->id : wire::kNoOwner;
}

bool Backs(const SlotMap& m, uint32_t slot, uint32_t me) {
  for (uint16_t r = 1; r < m.replicas(); ++r) {
    const ServerEntry* e = m.Owner(slot, r);
    if (e != nullptr && e->id == me) return true;
  }
  return false;
}

}  // namespace

std::vector<uint32_t> RingWritersToRevoke(const SlotMap* before, const SlotMap& after,
                                          uint32_t me) {
  std::set<uint32_t> writers;
  if (before == nullptr || after.epoch() != before->epoch() + 1 ||
      after.num_slots() != before->num_slots() || after.replicas() != before->replicas()) {
    for (const ServerEntry& e : after.servers()) writers.insert(e.id);
    if (before != nullptr)
      for (const ServerEntry& e : before->servers()) writers.insert(e.id);
  } else {
    for (uint32_t slot = 0; slot < after.num_slots(); ++slot) {
      const bool was = Backs(*before, slot, me), is = Backs(after, slot, me);
      if (!was && !is) continue;
      const uint32_t p0 = PrimaryId(*before, slot), p1 = PrimaryId(after, slot);
      if (p0 == p1 && was == is) continue;
      writers.insert(p0);
      writers.insert(p1);
    }
  }
  writers.erase(me);
  writers.erase(wire::kNoOwner);
  return std::vector<uint32_t>(writers.begin(), writers.end());
}

}  // namespace rkv::cluster
