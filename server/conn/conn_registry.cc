// SPDX-License-Identifier: Apache-2.0
#include "server/conn/conn_registry.h"

namespace rkv {

ConnRegistry::ConnRegistry(int max_connections) {
  MutexLock l(&mu_);
  for (int i = max_connections - 1; i >= 0; --i) free_slots_.push_back(i);
}

bool ConnRegistry::TakeSlot(int* slot) {
  MutexLock l(&mu_);
  if (free_slots_.empty()) return false;
  *slot = free_slots_.back();
  free_slots_.pop_back();
  return true;
}

void ConnRegistry::ReleaseSlot(int slot) {
  MutexLock l(&mu_);
  free_slots_.push_back(slot);
}

void ConnRegistry::Add(const std::shared_ptr<Conn>& c) {
  MutexLock l(&mu_);
  by_qpn_[c->qpn] = c;
}

void ConnRegistry::Remove(const Conn& c) {
  MutexLock l(&mu_);
  auto it = by_qpn_.find(c.qpn);
  if (it != by_qpn_.end() && it->second.get() == &c) by_qpn_.erase(it);
}

std::shared_ptr<Conn> ConnRegistry::Find(uint32_t qpn) {
  MutexLock l(&mu_);
  auto it = by_qpn_.find(qpn);
  return it == by_qpn_.end() ? nullptr : it->second;
}

std::vector<std::shared_ptr<Conn>> ConnRegistry::All() {
  MutexLock l(&mu_);
  std::vector<std::shared_ptr<Conn>> out;
  for (auto& [qpn, c] : by_qpn_) out.push_back(c);
  return out;
}

}  // namespace rkv
