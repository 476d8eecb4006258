// SPDX-License-Identifier: Apache-2.0
#include "server/cluster/import_sweeper.h"

#include <glog/logging.h>

#include <algorithm>
#include <string>
#include <vector>

#include "common/cluster/ownership_word.h"

namespace rkv::cluster {

ImportSweeper::~ImportSweeper() {
  {
    std::lock_guard<std::mutex> l(mu_);
    stop_ = true;
  }
  cv_.notify_all();
  if (thread_.joinable()) thread_.join();
}

void ImportSweeper::Start() {
  thread_ = std::thread([this] { Loop(); });
}

void ImportSweeper::Loop() {
  std::unique_lock<std::mutex> l(mu_);
  while (!stop_) {
    cv_.wait_for(l, o_.period, [this] { return stop_; });
    if (stop_) break;
    l.unlock();
    size_t n = 0;
    Status s = SweepOnce(&n);
    if (!s.ok()) LOG(WARNING) << "cluster: checking abandoned imports: " << s.ToString();
    l.lock();
  }
}

bool ImportSweeper::Abandoned(uint32_t slot, uint32_t my_id, const MigrationRecord* record,
                              const SlotMap* map) {
  if (map == nullptr) return false;  // no cluster map: nothing to judge by
  if (record != nullptr && record->state == MigrationRecord::kCopy && record->to_id == my_id &&
      std::find(record->slots.begin(), record->slots.end(), slot) != record->slots.end())
    return false;  // the copy under way (or one its coordinator has yet to cancel)
  if (slot >= map->num_slots()) return false;
  const uint16_t me = map->IndexOf(my_id);
  for (uint16_t r = 0; me != kUnassigned && r < map->replicas(); ++r)
    if (map->OwnerIndex(slot, r) == me) return false;  // Apply gives it its role
  return true;
}

Status ImportSweeper::SweepOnce(size_t* released) {
  *released = 0;
  std::map<uint32_t, std::pair<uint64_t, uint64_t>> now, again;
  for (uint32_t slot = 0; slot < o_.owners->num_slots(); ++slot) {
    const uint64_t word = o_.owners->Word(slot);
    if (WordState(word) != SlotState::kImporting) continue;
    const std::pair<uint64_t, uint64_t> id{word, o_.owners->ImportTicket(slot)};
    now[slot] = id;
    auto it = seen_.find(slot);
    if (it != seen_.end() && it->second == id) again[slot] = id;  // idle for a whole period
  }
  seen_.swap(now);
  if (again.empty()) return Status::Ok();
  // The record first, then the map (docs/design.md, "Abandoned imports").
  bool found = false;
  EtcdKv kv;
  Status s = o_.etcd->Get(o_.cluster.Prefix() + "migration", &found, &kv, nullptr);
  if (!s.ok()) return s;
  MigrationRecord record;
  if (found) {
    s = MigrationRecord::Decode(kv.value, &record);
    if (!s.ok()) return Status(s.code(), "the migration record: " + s.message());
  }
  bool map_found = false;
  s = o_.etcd->Get(o_.cluster.Prefix() + "map", &map_found, &kv, nullptr);
  if (!s.ok()) return s;
  if (!map_found) return Status(Code::kNotFound, "the cluster has no map in etcd");
  SlotMap map;
  s = SlotMap::Decode(kv.value, &map);
  if (!s.ok()) return Status(s.code(), "the cluster map: " + s.message());
  if (map.num_slots() != o_.owners->num_slots() || map.slot_seed() != o_.owners->slot_seed())
    return Status(Code::kInvalidArgument, "the cluster map has another slot count or seed");
  if (o_.applied_epoch && o_.applied_epoch() < map.epoch())
    return Status::Ok();  // not applied here yet: judged at a later pass
  std::vector<uint32_t> given;
  o_.under_map_lock([&] {
    for (const auto& [slot, id] : again) {
      if (!Abandoned(slot, o_.my_id, found ? &record : nullptr, &map)) continue;
      const uint64_t out = OwnerWord(WordEpoch(id.first), SlotState::kNotOwned);
      if (o_.owners->DropImport(slot, id.second, id.first, out)) given.push_back(slot);
    }
  });
  // Migration writes admitted before a release finish before the reclaimer's scan (else one
  // could leave an entry behind it).
  const auto idle_by = std::chrono::steady_clock::now() + std::chrono::seconds(5);
  for (uint32_t slot : given) {
    (void)o_.owners->WaitIdle(slot, idle_by);
    if (o_.reclaimer != nullptr)
      o_.reclaimer->Released(slot, OwnerWord(WordEpoch(seen_[slot].first), SlotState::kNotOwned));
    seen_.erase(slot);
  }
  *released = given.size();
  released_.fetch_add(given.size());
  if (!given.empty())
    LOG(INFO) << "cluster: " << given.size() << " abandoned import(s) released (first slot "
              << given.front() << "); the migration that began them can no longer commit";
  return Status::Ok();
}

}  // namespace rkv::cluster
