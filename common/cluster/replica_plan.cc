// SPDX-License-Identifier: Apache-2.0
#include "common/cluster/replica_plan.h"

#include <algorithm>
#include <map>
#include <set>
#include <tuple>
#include <unordered_set>

#include "common/cluster/rebalance_plan.h"

namespace rkv::cluster {
namespace {

// Replaces slot's replicas with `owners` (distinct server indexes; the rest unassigned):
// clears them all first, so no server is ever on two replicas of the slot at once.
Status Reassign(SlotMap* m, uint32_t slot, const std::vector<uint16_t>& owners) {
  for (uint16_t r = 0; r < m->replicas(); ++r)
    if (!m->Assign(slot, r, kUnassigned))
      return Status(Code::kInvalidArgument, "slot " + std::to_string(slot) + " out of range");
  for (size_t r = 0; r < owners.size(); ++r)
    if (!m->Assign(slot, uint16_t(r), owners[r]))
      return Status(Code::kInvalidArgument, "slot " + std::to_string(slot) + ": server index " +
                                                std::to_string(owners[r]) + " cannot be replica " +
                                                std::to_string(r));
  return Status::Ok();
}

}  // namespace

uint32_t ReplicasOf(const SlotMap& map, uint32_t slot) {
  uint32_t n = 0;
  for (uint16_t r = 0; r < map.replicas(); ++r) n += map.OwnerIndex(slot, r) != kUnassigned;
  return n;
}

Status PlanFailover(const SlotMap& map, const std::vector<uint32_t>& live_ids, FailoverPlan* out) {
  out->map = map;
  out->promoted.clear();
  out->backups_dropped = 0;
  out->stranded = 0;
  if (map.replicas() == 0) return Status(Code::kInvalidArgument, "the map has no replicas");
  SlotMap& m = out->map;
  std::vector<bool> live(m.servers().size(), false);
  for (uint32_t id : live_ids) {
    const uint16_t idx = m.IndexOf(id);
    if (idx != kUnassigned) live[idx] = true;
  }
  const uint16_t replicas = m.replicas();
  for (uint32_t s = 0; s < m.num_slots(); ++s) {
    const uint16_t primary = m.OwnerIndex(s, 0);
    if (primary == kUnassigned) continue;
    std::vector<uint16_t> backups;  // assigned backups, in replica order
    for (uint16_t r = 1; r < replicas; ++r)
      if (const uint16_t b = m.OwnerIndex(s, r); b != kUnassigned) backups.push_back(b);
    std::vector<uint16_t> owners;
    if (live[primary]) {
      owners.push_back(primary);
      for (uint16_t b : backups) {
        if (live[b]) {
          owners.push_back(b);
        } else {
          ++out->backups_dropped;
        }
      }
      bool in_place = true;  // already compact, nothing dropped: no change
      for (uint16_t r = 0; r < replicas && in_place; ++r)
        in_place = m.OwnerIndex(s, r) == (r < owners.size() ? owners[r] : kUnassigned);
      if (in_place) continue;
    } else {
      const auto first_live =
          std::find_if(backups.begin(), backups.end(), [&](uint16_t b) { return live[b]; });
      if (first_live == backups.end()) {
        ++out->stranded;
        continue;
      }
      owners.push_back(*first_live);
      for (auto it = backups.begin(); it != backups.end(); ++it) {
        if (it == first_live) continue;
        if (live[*it]) {
          owners.push_back(*it);  // kept: resynced by the promoted server
        } else {
          ++out->backups_dropped;
        }
      }
      out->promoted.push_back(s);
    }
    if (Status st = Reassign(&m, s, owners); !st.ok()) return st;
  }
  return Status::Ok();
}

Status DropSuspectBackups(const SlotMap& map, const std::vector<Avoid>& avoid, SlotMap* out,
                          uint32_t* dropped) {
  *out = map;
  *dropped = 0;
  if (map.replicas() == 0) return Status(Code::kInvalidArgument, "the map has no replicas");
  const uint16_t replicas = map.replicas();
  for (uint32_t s = 0; s < out->num_slots(); ++s) {
    const uint16_t primary = out->OwnerIndex(s, 0);
    if (primary == kUnassigned) continue;
    const uint32_t pid = out->servers()[primary].id;
    std::vector<uint16_t> owners{primary};
    uint32_t removed = 0;
    for (uint16_t r = 1; r < replicas; ++r) {
      const uint16_t b = out->OwnerIndex(s, r);
      if (b == kUnassigned) continue;
      const uint32_t bid = out->servers()[b].id;
      const bool suspect = std::any_of(avoid.begin(), avoid.end(), [&](const Avoid& a) {
        return a.primary == pid && a.server == bid;
      });
      if (suspect) {
        ++removed;
      } else {
        owners.push_back(b);
      }
    }
    if (removed == 0) continue;
    *dropped += removed;
    if (Status st = Reassign(out, s, owners); !st.ok()) return st;
  }
  return Status::Ok();
}

Status DropRingLossReplicas(const SlotMap& map, const std::vector<SlotLoss>& losses,
                            const std::vector<uint32_t>& live_ids, SlotMap* out, uint32_t* dropped,
                            uint32_t* promoted) {
  *out = map;
  *dropped = 0;
  *promoted = 0;
  if (map.replicas() == 0) return Status(Code::kInvalidArgument, "the map has no replicas");
  std::map<uint32_t, std::set<uint32_t>> lossy;  // slot -> servers that reported it
  for (const SlotLoss& l : losses)
    if (l.slot < map.num_slots()) lossy[l.slot].insert(l.server);
  const uint16_t replicas = map.replicas();
  for (const auto& entry : lossy) {
    // Not a structured binding: lambdas below use them (clang's C++17 cannot capture those).
    const uint32_t s = entry.first;
    const std::set<uint32_t>& servers = entry.second;
    const uint16_t primary = out->OwnerIndex(s, 0);
    if (primary == kUnassigned) continue;
    auto id = [&](uint16_t idx) { return out->servers()[idx].id; };
    auto lost = [&](uint16_t idx) { return servers.count(id(idx)) != 0; };
    auto live = [&](uint16_t idx) {
      return std::find(live_ids.begin(), live_ids.end(), id(idx)) != live_ids.end();
    };
    std::vector<uint16_t> clean;  // backups that reported no loss of the slot, in order
    uint32_t removed = 0;
    for (uint16_t r = 1; r < replicas; ++r) {
      const uint16_t b = out->OwnerIndex(s, r);
      if (b == kUnassigned) continue;
      if (lost(b)) {
        ++removed;
      } else {
        clean.push_back(b);
      }
    }
    // Only where a replica known to hold every write stays, live: otherwise the reported ones
    // are kept (a released replica's entries are freed; one that stops at its mark keeps them).
    const bool clean_live =
        (!lost(primary) && live(primary)) || std::any_of(clean.begin(), clean.end(), live);
    if (!clean_live) continue;
    std::vector<uint16_t> owners;
    if (lost(primary) && live(primary)) {
      const auto next = std::find_if(clean.begin(), clean.end(), live);
      owners.push_back(*next);
      clean.erase(next);
      ++removed;
      ++*promoted;
    } else {
      owners.push_back(primary);  // a dead one: PlanFailover's
    }
    if (removed == 0) continue;
    owners.insert(owners.end(), clean.begin(), clean.end());
    *dropped += removed;
    if (Status st = Reassign(out, s, owners); !st.ok()) return st;
  }
  return Status::Ok();
}

Status PlanReplicaAdds(const SlotMap& map, const std::vector<LiveServer>& live, size_t limit,
                       ReplicaPlan* out, const std::vector<Avoid>& avoid,
                       const std::vector<SlotLoss>& losses) {
  out->map = map;
  out->adds.clear();
  SlotMap& m = out->map;
  std::vector<uint16_t> candidates;  // live server indexes, each once
  for (const LiveServer& l : live) {
    uint16_t idx = kUnassigned;
    Status s = AddLiveServer(&m, l.entry, &idx);
    if (!s.ok()) return s;
    if (std::find(candidates.begin(), candidates.end(), idx) == candidates.end())
      candidates.push_back(idx);
  }
  // (slot << 32 | server) of each reported loss: looked up per slot and candidate.
  std::unordered_set<uint64_t> lossy;
  for (const SlotLoss& l : losses) lossy.insert(uint64_t(l.slot) << 32 | l.server);
  const size_t n = m.servers().size();
  std::vector<bool> is_live(n, false);
  std::vector<std::string> zone(n);  // "" for servers not live: unknown
  for (const LiveServer& l : live) {
    const uint16_t idx = m.IndexOf(l.entry.id);
    is_live[idx] = true;
    zone[idx] = l.zone;
  }
  std::vector<uint32_t> load(n, 0);  // replicas held, primaries and backups
  const uint16_t replicas = m.replicas();
  for (uint32_t s = 0; s < m.num_slots(); ++s)
    for (uint16_t r = 0; r < replicas; ++r)
      if (const uint16_t o = m.OwnerIndex(s, r); o != kUnassigned) ++load[o];
  for (uint32_t s = 0; s < m.num_slots(); ++s) {
    const uint16_t primary = m.OwnerIndex(s, 0);
    if (primary == kUnassigned || !is_live[primary]) continue;
    // A primary that may lack a write (it stops at its mark) is copied from by no one.
    if (lossy.count(uint64_t(s) << 32 | m.servers()[primary].id) != 0) continue;
    std::vector<uint16_t> holders;
    for (uint16_t r = 0; r < replicas; ++r)
      if (const uint16_t o = m.OwnerIndex(s, r); o != kUnassigned) holders.push_back(o);
    const auto zone_taken = [&](uint16_t c) {
      if (zone[c].empty()) return false;
      return std::any_of(holders.begin(), holders.end(),
                         [&](uint16_t h) { return zone[h] == zone[c]; });
    };
    for (size_t missing = replicas - holders.size(); missing > 0; --missing) {
      uint16_t best = kUnassigned;
      std::tuple<bool, uint32_t, uint32_t> best_key;
      for (uint16_t c : candidates) {
        if (std::find(holders.begin(), holders.end(), c) != holders.end()) continue;
        const uint32_t pid = m.servers()[primary].id, cid = m.servers()[c].id;
        if (std::any_of(avoid.begin(), avoid.end(),
                        [&](const Avoid& a) { return a.primary == pid && a.server == cid; }))
          continue;
        if (lossy.count(uint64_t(s) << 32 | cid) != 0) continue;
        const std::tuple<bool, uint32_t, uint32_t> key{zone_taken(c), load[c], m.servers()[c].id};
        if (best == kUnassigned || key < best_key) {
          best = c;
          best_key = key;
        }
      }
      if (best == kUnassigned) break;
      out->adds.push_back({s, m.servers()[primary].id, m.servers()[best].id});
      ++load[best];
      holders.push_back(best);
      if (limit != 0 && out->adds.size() >= limit) return Status::Ok();
    }
  }
  return Status::Ok();
}

}  // namespace rkv::cluster
