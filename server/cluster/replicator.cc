// SPDX-License-Identifier: Apache-2.0
#include "server/cluster/replicator.h"

#include <glog/logging.h>

#include <chrono>
#include <cstring>
#include <thread>

#include "client/client_impl.h"
#include "common/wire.h"

namespace rkv::cluster {

namespace {
using SteadyClock = std::chrono::steady_clock;
constexpr int kRetryMs = 50;
}  // namespace

Replicator::Replicator(OwnershipTable* owners, ReplicatorOptions o)
    : owners_(owners), o_(std::move(o)), slot_mu_(new std::mutex[owners->num_slots()]) {}

Replicator::~Replicator() = default;

void Replicator::SetMap(const SlotMap& map) {
  auto m = std::make_shared<const SlotMap>(map);
  std::lock_guard<std::mutex> l(map_mu_);
  map_ = std::move(m);
}

std::vector<Replicator::Backup> Replicator::BackupsOf(uint32_t slot, uint64_t* epoch) const {
  std::shared_ptr<const SlotMap> m;
  {
    std::lock_guard<std::mutex> l(map_mu_);
    m = map_;
  }
  std::vector<Backup> out;
  *epoch = m ? m->epoch() : 0;
  if (!m || slot >= m->num_slots()) return out;
  for (uint16_t r = 1; r < m->replicas(); ++r) {
    const ServerEntry* e = m->Owner(slot, r);
    if (e != nullptr && e->id != my_id_.load()) out.push_back({e->id, e->host, e->port});
  }
  return out;
}

bool Replicator::HasBackups(uint32_t slot) const {
  uint64_t epoch = 0;
  return !BackupsOf(slot, &epoch).empty();
}

Replicator::Link* Replicator::Acquire(const Backup& b) {
  std::unique_lock<std::mutex> l(links_mu_);
  const auto deadline = SteadyClock::now() + std::chrono::milliseconds(o_.max_wait_ms);
  for (;;) {
    std::vector<std::unique_ptr<Link>>& pool = links_[b.id];
    for (auto& link : pool)
      if (!link->busy) {
        link->busy = true;
        return link.get();
      }
    if (pool.size() < kMaxLinks) {
      pool.push_back(std::make_unique<Link>());
      pool.back()->busy = true;
      return pool.back().get();
    }
    if (links_cv_.wait_until(l, deadline) == std::cv_status::timeout) return nullptr;
  }
}

void Replicator::Release(uint32_t /*id*/, Link* link, bool broken) {
  {
    std::lock_guard<std::mutex> l(links_mu_);
    if (broken) link->client.reset();  // the next use connects again
    link->busy = false;
  }
  links_cv_.notify_one();
}

Status Replicator::SendOnce(const Backup& b, const std::string& key, std::string_view value,
                            bool* maybe_sent) {
  *maybe_sent = false;
  Link* link = Acquire(b);
  if (link == nullptr)
    return Status(Code::kTimeout, "no free connection to backup " + std::to_string(b.id));
  Status s;
  // The link is this thread's until Release: its client is touched by no other.
  if (!link->client || link->client->broken()) {
    link->client = std::make_unique<ClientImpl>(b.host, b.port, o_.client);
    s = link->client->Open();
    if (s.ok() && link->client->owner_slots() != owners_->num_slots())
      s = Status(Code::kProtocolError, "the backup has no ownership table of this cluster");
    if (!s.ok()) {
      Release(b.id, link, true);
      return s;
    }
  }
  *maybe_sent = true;
  std::string reply;
  s = link->client->Call(wire::Op::kReplicate, key, value, &reply);
  Release(b.id, link, link->client->broken());
  return s;
}

Status Replicator::Write(uint32_t slot, bool put, std::string_view key, std::string_view value,
                         const std::function<Status()>& apply) {
  std::lock_guard<std::mutex> slot_lock(slot_mu_[slot]);
  uint64_t epoch = 0;
  std::vector<Backup> backups = BackupsOf(slot, &epoch);
  uint64_t seq = owners_->Sequence(slot);
  seq = (seq == OwnershipTable::kSequenceUnset ? 0 : seq) + 1;
  if (backups.empty()) {
    owners_->SetSequence(slot, seq);
    return apply();
  }
  wire::ReplicateHeader h{};
  h.epoch = epoch;
  h.sequence = seq;
  h.sender_id = my_id_.load();
  h.kind = put ? wire::kReplicatePut : wire::kReplicateDelete;
  std::string msg(sizeof h, '\0');
  std::memcpy(msg.data(), &h, sizeof h);
  msg.append(key);
  const auto deadline = SteadyClock::now() + std::chrono::milliseconds(o_.max_wait_ms);
  bool sent_any = false;
  for (const Backup& b : backups) {
    for (;;) {
      bool maybe_sent = false;
      Status s = SendOnce(b, msg, put ? value : std::string_view(), &maybe_sent);
      sent_any = sent_any || maybe_sent;
      if (s.ok()) break;
      retries_.fetch_add(1, std::memory_order_relaxed);
      LOG_EVERY_N(WARNING, 100) << "replicating slot " << slot << " to server " << b.id << ": "
                                << s.ToString();
      const SlotState st = WordState(owners_->Word(slot));
      const bool primary = st == SlotState::kOwned || st == SlotState::kMoving;
      if (!primary || SteadyClock::now() >= deadline) {
        failures_.fetch_add(1, std::memory_order_relaxed);
        if (!sent_any)
          return Status(Code::kUnavailable, "the write was not applied: slot " +
                                                std::to_string(slot) +
                                                " could not be replicated (" + s.message() + ")");
        return Status(Code::kTimeout,
                      "outcome unknown: slot " + std::to_string(slot) +
                          (primary ? " could not be replicated to server " + std::to_string(b.id) +
                                         " in time (" + s.message() + ")"
                                   : " changed owner while its write was being replicated"));
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(kRetryMs));
      // A backup the coordinator dropped (dead) no longer needs the write.
      uint64_t now_epoch = 0;
      bool listed = false;
      for (const Backup& x : BackupsOf(slot, &now_epoch)) listed = listed || x.id == b.id;
      if (!listed) break;
      if (now_epoch != epoch) {  // the message names the epoch the backup now expects
        h.epoch = epoch = now_epoch;
        std::memcpy(msg.data(), &h, sizeof h);
      }
    }
  }
  owners_->SetSequence(slot, seq);
  writes_.fetch_add(1, std::memory_order_relaxed);
  return apply();
}

}  // namespace rkv::cluster
