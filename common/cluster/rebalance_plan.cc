// SPDX-License-Identifier: Apache-2.0
#include "common/cluster/rebalance_plan.h"

#include <algorithm>
#include <map>

namespace rkv::cluster {

Status AddLiveServer(SlotMap* map, const ServerEntry& e, uint16_t* index) {
  *index = map->AddServer(e);
  if (*index != kUnassigned) return Status::Ok();
  return Status(Code::kInvalidArgument,
                "server " + std::to_string(e.id) + " (" + e.host + ":" + std::to_string(e.port) +
                    ") cannot enter the map (table full, or its id names another address)");
}

Status PlanRebalance(const SlotMap& map, const std::vector<ServerEntry>& live, uint32_t remove,
                     RebalancePlan* out) {
  out->assigned = map;
  out->moves.clear();
  SlotMap& m = out->assigned;
  // Takers: live servers other than the one being removed, by index in the map, in id order.
  std::vector<uint16_t> takers;
  std::map<uint16_t, bool> is_live;
  std::vector<ServerEntry> sorted = live;
  std::sort(sorted.begin(), sorted.end(),
            [](const ServerEntry& a, const ServerEntry& b) { return a.id < b.id; });
  for (const ServerEntry& e : sorted) {
    uint16_t idx = kUnassigned;
    Status s = AddLiveServer(&m, e, &idx);
    if (!s.ok()) return s;
    is_live[idx] = true;
    if (e.id != remove) takers.push_back(idx);
  }
  if (takers.empty()) return Status(Code::kInvalidArgument, "no live server can take slots");
  const uint16_t removed = remove != 0 ? m.IndexOf(remove) : kUnassigned;
  // Slots in play: unassigned, or held by a live server (the removed one included).
  std::map<uint16_t, std::vector<uint32_t>> held;  // taker or removed -> its slots
  std::vector<uint32_t> free_slots;
  uint32_t in_play = 0;
  for (uint32_t s = 0; s < m.num_slots(); ++s) {
    const uint16_t o = m.OwnerIndex(s);
    if (o == kUnassigned) {
      free_slots.push_back(s);
      ++in_play;
    } else if (is_live.count(o)) {
      held[o].push_back(s);
      ++in_play;
    }
  }
  const uint32_t n = uint32_t(takers.size());
  const uint32_t base = in_play / n, extra = in_play % n;
  // Targets: the first `extra` takers (those holding most already) get one more, so that as
  // few slots move as possible.
  std::vector<uint16_t> order = takers;
  std::stable_sort(order.begin(), order.end(),
                   [&](uint16_t a, uint16_t b) { return held[a].size() > held[b].size(); });
  std::map<uint16_t, uint32_t> target;
  for (uint32_t i = 0; i < n; ++i) target[order[i]] = base + (i < extra ? 1 : 0);
  if (removed != kUnassigned) target[removed] = 0;
  // Surplus: slots over target (the highest slots of each), then handed to those under.
  std::vector<std::pair<uint16_t, uint32_t>> surplus;  // (from, slot)
  for (auto& [idx, slots] : held) {
    const uint32_t t = target.count(idx) ? target[idx] : uint32_t(slots.size());
    for (size_t i = t; i < slots.size(); ++i) surplus.emplace_back(idx, slots[i]);
  }
  size_t next_free = 0, next_surplus = 0;
  for (uint16_t idx : takers) {
    uint32_t have = uint32_t(held[idx].size());
    while (have < target[idx] && next_free < free_slots.size()) {
      m.Assign(free_slots[next_free++], 0, idx);
      ++have;
    }
    while (have < target[idx] && next_surplus < surplus.size()) {
      const auto [from, slot] = surplus[next_surplus++];
      out->moves.push_back({slot, m.servers()[from].id, m.servers()[idx].id});
      ++have;
    }
  }
  std::sort(out->moves.begin(), out->moves.end(),
            [](const SlotMove& a, const SlotMove& b) { return a.slot < b.slot; });
  return Status::Ok();
}

}  // namespace rkv::cluster
