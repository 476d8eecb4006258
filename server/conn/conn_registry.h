// SPDX-License-Identifier: Apache-2.0
// ConnRegistry: the server-wide table of connections by QP number (for the async-event thread,
// which gets a QP and must find its connection) and the pool of connection slots (each slot
// owns a range of the registered send buffer).
// Thread safety: every method locks mu_; callable from any thread.
// Invariant: a QP number maps to at most one Conn; an entry is removed (by the worker, at
// kDrained) before the QP is destroyed, so a QP number is never looked up for a newer QP.
#ifndef RKV_SERVER_CONN_REGISTRY_H_
#define RKV_SERVER_CONN_REGISTRY_H_

#include <cstdint>
#include <map>
#include <memory>
#include <vector>

#include "common/mutex.h"
#include "server/conn/conn.h"

namespace rkv {

class ConnRegistry {
 public:
  explicit ConnRegistry(int max_connections);

  // Takes a free slot; false when all max_connections are in use.
  bool TakeSlot(int* slot);
  void ReleaseSlot(int slot);

  void Add(const std::shared_ptr<Conn>& c);
  // Removes c's entry if it is still c's (not a newer Conn with the same QP number).
  void Remove(const Conn& c);
  std::shared_ptr<Conn> Find(uint32_t qpn);
  // Every registered Conn (for shutdown).
  std::vector<std::shared_ptr<Conn>> All();

 private:
  Mutex mu_;
  std::map<uint32_t, std::shared_ptr<Conn>> by_qpn_ GUARDED_BY(mu_);
  std::vector<int> free_slots_ GUARDED_BY(mu_);
};

}  // namespace rkv

#endif  // RKV_SERVER_CONN_REGISTRY_H_
