#include "server/counters.h"

#include <sstream>

namespace rkv {

std::string FormatStats(const ServerCounters& c, const Table& table, uint64_t instance_id,
                        int workers, uint32_t credits) {
  std::ostringstream o;
  auto line = [&o](const char* name, const std::atomic<uint64_t>& v) {
    o << name << " " << v.load(std::memory_order_relaxed) << "\n";
  };
  const layout::Geometry& g = table.geometry();
  uint64_t entries = table.entries();
  o << "instance_id " << instance_id << "\n";
  line("connections_total", c.connections_total);
  line("connections_active", c.connections_active);
  line("connections_rejected", c.connections_rejected);
  line("source_limited", c.source_limited);
  line("connections_pending", c.connections_pending);
  line("connections_established", c.connections_established);
  line("setup_timeouts", c.setup_timeouts);
  line("opens", c.opens);
  line("opens_refused", c.opens_refused);
  line("open_timeouts", c.open_timeouts);
  line("peers_dead", c.peers_dead);
  line("qp_async_errors", c.qp_async_errors);
  line("qps_leaked", c.qps_leaked);
  line("rpc_put", c.rpc_put);
  line("rpc_delete", c.rpc_delete);
  line("rpc_stats", c.rpc_stats);
  line("rpc_params", c.rpc_params);
  line("rpc_snapshot", c.rpc_snapshot);
  line("rpc_bad_request", c.rpc_bad);
  line("rpc_errors", c.rpc_errors);
  line("clients_dropped", c.clients_dropped);
  line("credit_drops", c.credit_drops);
  line("keepalives_sent", c.keepalives_sent);
  line("srq_limit_events", c.srq_limit_events);
  line("exchanges_refused_busy", c.exchanges_refused_busy);
  o << "request_credits " << credits << "\n"
    << "entries " << entries << "\n"
    << "entry_capacity " << g.entry_capacity() << "\n"
    << "load_factor " << double(entries) / double(g.entry_capacity()) << "\n"
    << "overflow_entries " << table.overflow_entries() << "\n"
    << "heap_bytes_in_use " << table.heap_bytes_in_use() << "\n"
    << "heap_capacity " << table.heap_capacity() << "\n"
    << "heap_log_bytes " << table.heap().log_bytes() << "\n"
    << "heap_blocks_moved " << table.heap().moves() << "\n"
    << "heap_bytes_moved " << table.heap().moved_bytes() << "\n"
    << "region_size " << g.region_size << "\n"
    << "num_buckets " << g.num_buckets << "\n"
    << "workers " << workers << "\n";
  return o.str();
}

}  // namespace rkv
