// SPDX-License-Identifier: Apache-2.0
// ServerCounters: what kvserver counts, and the `kvctl stats` figures that show it with the
// table's (CollectStats: one list, rendered as the stats text by FormatStats and as the
// Prometheus page by server/metrics/metrics_registry.h).
// Thread safety: every counter is a relaxed atomic, bumped by any thread; CollectStats reads
// each once (the figures are not a consistent snapshot across counters).
#ifndef RKV_SERVER_COUNTERS_H_
#define RKV_SERVER_COUNTERS_H_

#include <atomic>
#include <cstdint>
#include <string>
#include <vector>

#include "server/metrics/rpc_metrics.h"
#include "server/metrics/stat_value.h"
#include "server/store/table.h"

namespace rkv {

struct ServerCounters {
  using C = std::atomic<uint64_t>;
  // Connections.
  C connections_total{0};     // accepted (a slot and a QP given)
  C connections_active{0};    // from accept until the QP is destroyed
  C connections_rejected{0};  // refused before a slot was taken (bad hello, full, busy)
  C source_limited{0};  // of those, refused by a per-address limit (--max_conns_per_source, ...)
  C connections_pending{0};      // in setup (accepted, not yet established)
  C connections_established{0};  // established and not closing
  C setup_timeouts{0};           // closed because setup did not finish before its deadline
  C peers_dead{0};               // closed by keepalive failure or silence past --peer_timeout
  C qp_async_errors{0};          // closed by a QP async error event
  C qps_leaked{0};               // QPs that did not drain in time (kept, never reused)
  C opens{0};                    // successful OPENs (authenticated when auth is on)
  C opens_refused{0};            // failed OPENs and requests before OPEN (then dropped)
  C open_timeouts{0};            // closed because no OPEN came within 2 x --accept_timeout
  // Requests.
  C rpc_put{0}, rpc_delete{0}, rpc_stats{0}, rpc_params{0}, rpc_snapshot{0}, rpc_bad{0};
  C rpc_errors{0};  // requests answered with an error other than NOT_FOUND
  // Cluster: writes refused for a slot this server does not own (MOVED) or is handing over
  // (TRY_AGAIN).
  C rpc_moved{0}, rpc_try_again{0};
  // Cluster migration: batches begun here (this server receiving), keys received, keys purged.
  C migrations_in{0}, migrated_keys_in{0}, migration_purged{0};
  // Replication, as a backup: writes applied, repeats of applied ones (answered, not applied
  // again), and messages refused: an older epoch than the slot's, a sender that is not the
  // slot's primary, a sequence gap, a slot that is not a backup here (or a bad message).
  C repl_applied{0}, repl_duplicates{0};
  C repl_queries{0};  // a promoted primary's questions answered (wire::kReplicateQuery)
  C repl_refused_epoch{0}, repl_refused_sender{0}, repl_refused_sequence{0}, repl_refused_state{0};
  // One-sided replication (docs/replication-rings.md): as a primary, records written to
  // backups' log rings; as a backup, rings granted.
  C repl_ring_writes{0}, repl_ring_grants{0};
  C clients_dropped{0};  // closed for malformed requests
  C credit_drops{0};     // closed for exceeding their request credits
  C keepalives_sent{0};
  C writes_inline{0};  // durable PUT/DELETEs logged by their worker, without the write pool
  // Send completions polled (replies are signalled one in Worker::SignalEvery; compare with
  // the replies counted per request type).
  C send_completions{0};
  // A worker found itself held for more than two tick periods (100 ms) and forgave its
  // connections that silence (a write it logged itself met a stalled disk, or no CPU).
  C worker_stalls{0};
  C worker_sleeps{0};     // times a worker waited in poll() (spin over or off; may return at once)
  C srq_limit_events{0};  // the SRQ ran low; its reserve buffers were posted
  C exchanges_refused_busy{0};  // manual handshakes refused: too many in progress
  // Replies posted by request type and status, and their latency (the Prometheus endpoint).
  metrics::RpcMetrics rpcs;
};

// The `kvctl stats` figures, in the order the text shows them.
std::vector<StatValue> CollectStats(const ServerCounters& c, const Table& table,
                                    uint64_t instance_id, int workers, uint32_t credits);
// "name value" lines, one per figure.
std::string FormatStats(const std::vector<StatValue>& stats);
// `kvctl stats` text: FormatStats(CollectStats(...)).
std::string FormatStats(const ServerCounters& c, const Table& table, uint64_t instance_id,
                        int workers, uint32_t credits);

}  // namespace rkv

#endif  // RKV_SERVER_COUNTERS_H_
