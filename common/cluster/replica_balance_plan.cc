// SPDX-License-Identifier: Apache-2.0
#include "common/cluster/replica_balance_plan.h"

#include <algorithm>
#include <deque>
#include <map>
#include <string>
#include <utility>

namespace rkv::cluster {
namespace {

// Shares over the live servers (indexes of `live`): lo = floor(total / n), hi = ceil.
struct Share {
  std::vector<int64_t> count;
  int64_t lo = 0, hi = 0;
  void Bounds() {
    int64_t total = 0;
    for (int64_t c : count) total += c;
    const int64_t n = int64_t(count.size());
    lo = total / n;
    hi = (total + n - 1) / n;
  }
  bool AnyBelowLo() const {
    return std::any_of(count.begin(), count.end(), [&](int64_t c) { return c < lo; });
  }
  // Whether moving one from `from` to `to` evens the share out (strictly lowers the sum of
  // squares: from has at least two more than to).
  bool Evens(size_t from, size_t to) const {
    if (count[from] > hi) return count[to] < hi;
    return count[from] > lo && count[to] < lo;
  }
  bool Over(size_t s) const { return count[s] > hi || (count[s] > lo && AnyBelowLo()); }
  void Move(size_t from, size_t to) {
    --count[from];
    ++count[to];
  }
};

}  // namespace

std::vector<RoleStep> PlanReplicaBalance(const SlotMap& map, const std::vector<LiveServer>& live,
                                         const std::vector<Avoid>& avoid) {
  std::vector<RoleStep> steps;
  if (map.replicas() < 2 || live.size() < 2) return steps;
  const size_t n = live.size();
  // The live index of each map server (npos: not live).
  constexpr size_t npos = ~size_t{0};
  std::vector<size_t> of(map.servers().size(), npos);
  for (size_t i = 0; i < n; ++i) {
    const uint16_t idx = map.IndexOf(live[i].entry.id);
    if (idx != kUnassigned) of[idx] = i;
  }
  const uint16_t R = map.replicas();
  // Slots that take part: every place filled by a live server.
  std::vector<bool> eligible(map.num_slots(), false);
  Share rep, prim;
  rep.count.assign(n, 0);
  prim.count.assign(n, 0);
  for (uint32_t slot = 0; slot < map.num_slots(); ++slot) {
    bool all = true;
    for (uint16_t r = 0; r < R; ++r) {
      const uint16_t o = map.OwnerIndex(slot, r);
      all = all && o != kUnassigned && of[o] != npos;
    }
    if (!all) continue;
    eligible[slot] = true;
    for (uint16_t r = 0; r < R; ++r) ++rep.count[of[map.OwnerIndex(slot, r)]];
    ++prim.count[of[map.OwnerIndex(slot)]];
  }
  rep.Bounds();
  prim.Bounds();
  std::vector<bool> used(map.num_slots(), false);
  auto paired = [&](size_t primary, size_t server) {  // live indexes
    return std::any_of(avoid.begin(), avoid.end(), [&](const Avoid& a) {
      return a.primary == live[primary].entry.id && a.server == live[server].entry.id;
    });
  };
  auto holds = [&](uint32_t slot, size_t s) {
    for (uint16_t r = 0; r < R; ++r)
      if (of[map.OwnerIndex(slot, r)] == s) return true;
    return false;
  };
  // Replicas: a backup place moves from an over-full server to the emptiest eligible one.
  for (uint32_t slot = 0; slot < map.num_slots(); ++slot) {
    if (!eligible[slot]) continue;
    for (uint16_t r = 1; r < R && !used[slot]; ++r) {
      const size_t a = of[map.OwnerIndex(slot, r)];
      if (!rep.Over(a)) continue;
      // The zones of the slot's other replicas.
      std::vector<const std::string*> zones;
      for (uint16_t q = 0; q < R; ++q)
        if (q != r && !live[of[map.OwnerIndex(slot, q)]].zone.empty())
          zones.push_back(&live[of[map.OwnerIndex(slot, q)]].zone);
      auto shared = [&](const std::string& z) {
        return !z.empty() && std::any_of(zones.begin(), zones.end(),
                                         [&](const std::string* o) { return *o == z; });
      };
      const bool a_spreads = !shared(live[a].zone);
      size_t best = npos;
      for (size_t c = 0; c < n; ++c) {
        if (holds(slot, c) || !rep.Evens(a, c) || (a_spreads && shared(live[c].zone)) ||
            paired(of[map.OwnerIndex(slot)], c))
          continue;
        if (map.IndexOf(live[c].entry.id) == kUnassigned) continue;
        if (best == npos || rep.count[c] < rep.count[best] ||
            (rep.count[c] == rep.count[best] && live[c].entry.id < live[best].entry.id))
          best = c;
      }
      if (best == npos) continue;
      steps.push_back({RoleStep::kReplaceBackup, slot, live[of[map.OwnerIndex(slot)]].entry.id,
                       live[best].entry.id, live[a].entry.id});
      rep.Move(a, best);
      used[slot] = true;
    }
  }
  // Primaries: a chain of hand-overs from a server that is primary of too many to one that is
  // primary of too few: each link a slot whose primary is the link's start and whose backup is
  // its end (the servers between give one and take one). A direct hand-over is a chain of one.
  // Links: (primary, backup) -> the unused eligible slots between them.
  std::map<std::pair<size_t, size_t>, std::vector<uint32_t>> links;
  for (uint32_t slot = map.num_slots(); slot-- > 0;) {  // popped from the back: slot order
    if (!eligible[slot] || used[slot]) continue;
    for (uint16_t r = 1; r < R; ++r) {
      const size_t b = of[map.OwnerIndex(slot, r)];
      bool ok = true;  // b as primary: none of the slot's other replicas paired with it
      for (uint16_t q = 0; q < R; ++q)
        if (q != r && paired(b, of[map.OwnerIndex(slot, q)])) ok = false;
      if (ok) links[{of[map.OwnerIndex(slot)], b}].push_back(slot);
    }
  }
  for (bool progress = true; progress;) {
    progress = false;
    for (size_t a = 0; a < n; ++a) {
      if (!prim.Over(a)) continue;
      // Breadth first over the servers; the first one reached that a hand-over to evens out.
      std::vector<size_t> from(n, npos);
      from[a] = a;
      std::deque<size_t> queue{a};
      size_t end = npos;
      while (!queue.empty() && end == npos) {
        const size_t x = queue.front();
        queue.pop_front();
        for (size_t y = 0; y < n && end == npos; ++y) {
          if (from[y] != npos) continue;
          auto it = links.find({x, y});
          if (it == links.end() || it->second.empty()) continue;
          from[y] = x;
          if (prim.Evens(a, y)) end = y;
          queue.push_back(y);
        }
      }
      if (end == npos) continue;
      for (size_t y = end; y != a; y = from[y]) {
        std::vector<uint32_t>& slots = links[{from[y], y}];
        const uint32_t slot = slots.back();
        // The slot leaves every link (it has one step per round).
        for (uint16_t r = 1; r < R; ++r) {
          std::vector<uint32_t>& l = links[{from[y], of[map.OwnerIndex(slot, r)]}];
          l.erase(std::remove(l.begin(), l.end(), slot), l.end());
        }
        used[slot] = true;
        steps.push_back({RoleStep::kHandover, slot, live[from[y]].entry.id, live[y].entry.id, 0});
      }
      prim.Move(a, end);
      progress = true;
    }
  }
  std::sort(steps.begin(), steps.end(),
            [](const RoleStep& x, const RoleStep& y) { return x.slot < y.slot; });
  return steps;
}

}  // namespace rkv::cluster
