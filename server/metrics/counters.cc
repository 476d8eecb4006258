// SPDX-License-Identifier: Apache-2.0
#include "server/metrics/counters.h"

#include <sstream>

namespace rkv {

std::vector<StatValue> CollectStats(const ServerCounters& c, const Table& table,
                                    uint64_t instance_id, int workers, uint32_t credits) {
  std::vector<StatValue> v;
  v.reserve(48);
  auto add = [&v](const char* name, const std::atomic<uint64_t>& x) {
    v.push_back(StatValue::U(name, x.load(std::memory_order_relaxed)));
  };
  const layout::Geometry& g = table.geometry();
  uint64_t entries = table.entries();
  v.push_back(StatValue::U("instance_id", instance_id));
  add("connections_total", c.connections_total);
  add("connections_active", c.connections_active);
  add("connections_rejected", c.connections_rejected);
  add("source_limited", c.source_limited);
  add("connections_pending", c.connections_pending);
  add("connections_established", c.connections_established);
  add("setup_timeouts", c.setup_timeouts);
  add("opens", c.opens);
  add("opens_refused", c.opens_refused);
  add("open_timeouts", c.open_timeouts);
  add("peers_dead", c.peers_dead);
  add("qp_async_errors", c.qp_async_errors);
  add("qps_leaked", c.qps_leaked);
  add("rpc_put", c.rpc_put);
  add("rpc_delete", c.rpc_delete);
  add("rpc_stats", c.rpc_stats);
  add("rpc_params", c.rpc_params);
  add("rpc_snapshot", c.rpc_snapshot);
  add("rpc_bad_request", c.rpc_bad);
  add("rpc_errors", c.rpc_errors);
  add("rpc_moved", c.rpc_moved);
  add("rpc_try_again", c.rpc_try_again);
  add("migrations_in", c.migrations_in);
  add("migrated_keys_in", c.migrated_keys_in);
  add("migration_purged", c.migration_purged);
  add("repl_applied", c.repl_applied);
  add("repl_duplicates", c.repl_duplicates);
  add("repl_queries", c.repl_queries);
  add("repl_refused_epoch", c.repl_refused_epoch);
  add("repl_refused_sender", c.repl_refused_sender);
  add("repl_refused_sequence", c.repl_refused_sequence);
  add("repl_refused_state", c.repl_refused_state);
  add("repl_ring_writes", c.repl_ring_writes);
  add("repl_ring_grants", c.repl_ring_grants);
  add("clients_dropped", c.clients_dropped);
  add("credit_drops", c.credit_drops);
  add("keepalives_sent", c.keepalives_sent);
  add("writes_inline", c.writes_inline);
  add("send_completions", c.send_completions);
  add("worker_stalls", c.worker_stalls);
  add("worker_sleeps", c.worker_sleeps);
  add("srq_limit_events", c.srq_limit_events);
  add("exchanges_refused_busy", c.exchanges_refused_busy);
  v.push_back(StatValue::U("request_credits", credits));
  v.push_back(StatValue::U("entries", entries));
  v.push_back(StatValue::U("entry_capacity", g.entry_capacity()));
  v.push_back(StatValue::D("load_factor", double(entries) / double(g.entry_capacity())));
  v.push_back(StatValue::U("overflow_entries", table.overflow_entries()));
  v.push_back(StatValue::U("heap_bytes_in_use", table.heap_bytes_in_use()));
  v.push_back(StatValue::U("heap_capacity", table.heap_capacity()));
  v.push_back(StatValue::U("heap_log_bytes", table.heap().log_bytes()));
  v.push_back(StatValue::U("heap_blocks_moved", table.heap().moves()));
  v.push_back(StatValue::U("heap_bytes_moved", table.heap().moved_bytes()));
  v.push_back(StatValue::U("region_size", g.region_size));
  v.push_back(StatValue::U("num_buckets", g.num_buckets));
  v.push_back(StatValue::U("workers", uint64_t(workers)));
  return v;
}

std::string FormatStats(const std::vector<StatValue>& stats) {
  std::ostringstream o;
  for (const StatValue& s : stats) {
    o << s.name << " ";
    if (s.is_double) {
      o << s.d;
    } else {
      o << s.u;
    }
    o << "\n";
  }
  return o.str();
}

std::string FormatStats(const ServerCounters& c, const Table& table, uint64_t instance_id,
                        int workers, uint32_t credits) {
  return FormatStats(CollectStats(c, table, instance_id, workers, credits));
}

}  // namespace rkv
