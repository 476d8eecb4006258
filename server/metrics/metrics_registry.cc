// SPDX-License-Identifier: Apache-2.0
#include "server/metrics/metrics_registry.h"

#include <cstring>
#include <map>

#ifndef RKV_VERSION
#define RKV_VERSION "unknown"
#endif

namespace rkv::metrics {
namespace {

// How a `kvctl stats` figure appears. Figures sharing a family differ by one label.
struct Mapping {
  const char* stat;
  const char* family;
  MetricType type;
  const char* help;
  const char* label = nullptr;  // "key=value"
  double scale = 1;             // e.g. 0.001 for milliseconds to seconds
};

constexpr MetricType kC = MetricType::kCounter;
constexpr MetricType kG = MetricType::kGauge;

const Mapping kMappings[] = {
    {"connections_total", "rkv_connections_accepted_total", kC,
     "Connections accepted (a slot and a QP given)."},
    {"connections_active", "rkv_connections_active", kG,
     "Connections from accept until their QP is destroyed."},
    {"connections_pending", "rkv_connections_pending", kG,
     "Connections in setup (accepted, not yet established)."},
    {"connections_established", "rkv_connections_established", kG,
     "Connections established and not closing."},
    {"connections_rejected", "rkv_connections_rejected_total", kC,
     "Connection attempts refused before a slot was taken (bad hello, full, busy, source "
     "limits)."},
    {"source_limited", "rkv_connections_source_limited_total", kC,
     "Of rkv_connections_rejected_total: refused by a per-source-address limit "
     "(--max_conns_per_source, --max_connects_per_source_per_s)."},
    {"exchanges_refused_busy", "rkv_exchanges_refused_busy_total", kC,
     "Manual-mode parameter exchanges refused: too many in progress (--max_pending)."},
    {"setup_timeouts", "rkv_connection_setup_timeouts_total", kC,
     "Connections closed because setup did not finish within --accept_timeout."},
    {"opens", "rkv_opens_total", kC, "Successful OPENs (authenticated when auth is on)."},
    {"opens_refused", "rkv_opens_refused_total", kC,
     "Failed OPENs and requests before OPEN (the connection is then dropped)."},
    {"open_timeouts", "rkv_open_timeouts_total", kC,
     "Connections closed because no OPEN came within 2 x --accept_timeout."},
    {"peers_dead", "rkv_peers_dead_total", kC,
     "Connections closed by keepalive failure or silence past --peer_timeout."},
    {"qp_async_errors", "rkv_qp_async_errors_total", kC,
     "Connections closed by a QP async error event."},
    {"qps_leaked", "rkv_qps_leaked_total", kC, "QPs that did not drain in time (never reused)."},
    {"clients_dropped", "rkv_clients_dropped_total", kC,
     "Connections closed for misbehaving, by reason: malformed (more than the allowed malformed "
     "requests), credit_overrun (more requests outstanding than their credits).",
     "reason=malformed"},
    {"credit_drops", "rkv_clients_dropped_total", kC, "", "reason=credit_overrun"},
    {"rpc_bad_request", "rkv_requests_malformed_total", kC,
     "Requests that did not decode (answered BAD_REQUEST)."},
    {"rpc_errors", "rkv_rpc_errors_total", kC,
     "Requests answered with an error other than NOT_FOUND."},
    {"rpc_moved", "rkv_cluster_redirects_total", kC,
     "Cluster: writes refused for a slot this server does not own (MOVED) or is handing over "
     "(TRY_AGAIN), by answer.",
     "answer=moved"},
    {"rpc_try_again", "rkv_cluster_redirects_total", kC, "", "answer=try_again"},
    {"cluster_slots_owned", "rkv_cluster_slots_owned", kG,
     "Cluster: hash slots this server owns (OWNED or MOVING)."},
    {"cluster_epoch", "rkv_cluster_epoch", kG,
     "Cluster: epoch of the newest slot map this server applied."},
    {"cluster_server_id", "rkv_cluster_server_id", kG, "Cluster: this server's id."},
    {"cluster_bad_maps", "rkv_cluster_bad_maps_total", kC,
     "Cluster: slot maps read from etcd and refused (malformed, or not newer)."},
    {"cluster_reregistrations", "rkv_cluster_reregistrations_total", kC,
     "Cluster: times this server found its etcd lease lost and registered again."},
    {"cluster_coordinator", "rkv_cluster_coordinator", kG,
     "Cluster: 1 while this server is the elected coordinator."},
    // Migration. The two sides count different things, so they are separate families:
    // MIGRATE_BEGIN requests received (a batch of up to 512 slots sends one or two) and
    // batches this server ran as the source, by outcome.
    {"migrations_in", "rkv_cluster_migration_begins_total", kC,
     "Cluster: MIGRATE_BEGIN requests this server accepted as a migration's target (each "
     "names up to 256 slots, which it purged and marked IMPORTING)."},
    {"migrations_out", "rkv_cluster_migrations_total", kC,
     "Cluster: migration batches this server ran as the source, by outcome: handed_over "
     "(committed: the map gives the slots to the target), failed (nothing handed over; the "
     "slots stay here and the record is marked FAILED).",
     "outcome=handed_over"},
    {"migrations_failed", "rkv_cluster_migrations_total", kC, "", "outcome=failed"},
    {"migrated_keys_in", "rkv_cluster_migrated_keys_total", kC,
     "Cluster: migration key writes (MIGRATE_PUT and MIGRATE_DELETE), by direction: in "
     "(received for an IMPORTING slot, applied or not), out (sent to a target, answered or "
     "not).",
     "direction=in"},
    {"migrated_keys_out", "rkv_cluster_migrated_keys_total", kC, "", "direction=out"},
    {"migration_purged", "rkv_cluster_migration_purged_keys_total", kC,
     "Cluster: entries a MIGRATE_BEGIN deleted here (left in the slots from an earlier "
     "ownership or an aborted migration)."},
    // Replication (issue 25). As a backup: REPLICATE messages by what became of them.
    {"repl_applied", "rkv_replicate_received_total", kC,
     "Replication: REPLICATE messages this server received as a backup, by result: applied, "
     "duplicate (a resend of the last number with the same digest, answered without applying), "
     "refused_epoch (an older epoch), refused_sender (not the slot's primary), "
     "refused_sequence (not the next number), refused_state (not a backup of the slot here, "
     "or malformed), query (a promoted primary asked for the slot's last write).",
     "result=applied"},
    {"repl_duplicates", "rkv_replicate_received_total", kC, "", "result=duplicate"},
    {"repl_queries", "rkv_replicate_received_total", kC, "", "result=query"},
    {"repl_refused_epoch", "rkv_replicate_received_total", kC, "", "result=refused_epoch"},
    {"repl_refused_sender", "rkv_replicate_received_total", kC, "", "result=refused_sender"},
    {"repl_refused_sequence", "rkv_replicate_received_total", kC, "", "result=refused_sequence"},
    {"repl_refused_state", "rkv_replicate_received_total", kC, "", "result=refused_state"},
    // As a primary (server/cluster/replicator.h).
    {"repl_writes", "rkv_replicated_writes_total", kC,
     "Replication: client writes this server, as the slot's primary, replicated to every "
     "backup and applied."},
    {"repl_retries", "rkv_replication_retries_total", kC,
     "Replication: REPLICATE attempts to a backup that failed and were asked again or given "
     "up."},
    {"repl_failures", "rkv_replication_failures_total", kC,
     "Replication: client writes the replicator answered UNAVAILABLE, TIMEOUT or a backup's "
     "TABLE_FULL."},
    {"repl_kept", "rkv_replication_kept_writes", kG,
     "Replication: slots holding a kept write now (one of unknown outcome, resent before the "
     "slot's next write)."},
    {"cluster_backup_slots", "rkv_cluster_backup_slots", kG,
     "Cluster: hash slots this server is a backup of."},
    {"cluster_promotions", "rkv_cluster_promotions_total", kC,
     "Cluster: slots promoted here from backup to primary."},
    {"cluster_reclaimed_keys", "rkv_cluster_reclaimed_keys_total", kC,
     "Cluster: entries freed because this server holds no replica of their slot any more (a "
     "backup replaced or dropped, a primary failed over, an abandoned import)."},
    {"cluster_slots_importing", "rkv_cluster_slots_importing", kG,
     "Cluster: hash slots a migration is copying to this server now (IMPORTING)."},
    {"cluster_abandoned_imports", "rkv_cluster_abandoned_imports_total", kC,
     "Cluster: IMPORTING slots given back because no migration can complete their import any "
     "more (its record changed and the map does not name this server)."},
    {"cluster_found_dead", "rkv_cluster_found_dead_total", kC,
     "Cluster: servers the coordinator's liveness probe found dead while this server led "
     "(nothing listened at their address, or another process answered)."},
    {"cluster_suspects_reported", "rkv_cluster_suspects_reported_total", kC,
     "Cluster: backups this server, as their primary, reported unreachable although registered "
     "(a partial partition: NAME/suspects/), each streak of failures once."},
    {"cluster_suspects_healed", "rkv_cluster_suspects_healed_total", kC,
     "Cluster: reports this server deleted because the backup was reachable again."},
    {"cluster_suspects", "rkv_cluster_suspects", kG,
     "Cluster: backups this server reports unreachable now."},
    {"cluster_suspect_drops", "rkv_cluster_suspect_drops_total", kC,
     "Cluster: backups the coordinator dropped from slots because their primary reported them "
     "unreachable, while this server led."},
    {"repl_reverts", "rkv_replication_reverts_total", kC,
     "Replication: writes its backups held and this primary's table had no room for, replaced "
     "on the backups by this table's value of the key before a copy or hand-over of the slot."},
    {"repl_resyncs", "rkv_replication_resyncs_total", kC,
     "Replication: slots this server, promoted, brought the backups it kept to its own data "
     "before taking reads and writes (a failover keeps the live backups)."},
    {"repl_resync_writes", "rkv_replication_resync_writes_total", kC,
     "Replication: keys a resync wrote to the kept backups (this table's value of a key whose "
     "last write differed between the replicas)."},
    {"repl_ring_writes", "rkv_replication_ring_writes_total", kC,
     "Replication: records this primary wrote to backups' log rings (one-sided)."},
    {"repl_ring_grants", "rkv_replication_ring_grants_total", kC,
     "Replication: log rings this backup granted to primaries."},
    {"repl_ring_records", "rkv_replication_ring_records_total", kC,
     "Replication: log ring records this backup applied (or took as a resend)."},
    {"repl_ring_refused", "rkv_replication_ring_refused_total", kC,
     "Replication: log ring records this backup refused (their writer's rings revoked)."},
    {"repl_ring_kept", "rkv_replication_ring_kept_total", kC,
     "Replication: log ring records this backup had no room for, kept and tried again."},
    {"repl_ring_waits", "rkv_replication_ring_waits_total", kC,
     "Replication: log ring records that waited for their slot's previous write (placed in "
     "another ring, read later): applied later, or refused after 5 s."},
    {"repl_rings", "rkv_replication_rings", kG, "Replication: log rings this backup holds now."},
    {"repl_ring_headroom_revocations", "rkv_replication_ring_headroom_revocations_total", kC,
     "Replication: times this backup revoked every log ring because its table passed 7/8 of "
     "its entries or heap (its writers' writes go two-sided)."},
    {"repl_ring_loss_slots", "rkv_replication_ring_loss_slots", kG,
     "Replication: slots this backup reports (NAME/ringloss/) as possibly lacking an "
     "acknowledged write: it refused a log ring record of theirs."},
    {"repl_ring_loss_reports", "rkv_replication_ring_loss_reports_total", kC,
     "Replication: puts and deletes of this server's NAME/ringloss/ record."},
    {"cluster_ring_loss_drops", "rkv_cluster_ring_loss_drops_total", kC,
     "Cluster: replicas the coordinator took out of slots because their server reported a "
     "refused log ring record of the slot (NAME/ringloss/), while this server led."},
    {"repl_fast_writes", "rkv_replication_fast_writes_total", kC,
     "Replication: client writes ended on the fast path (sent to the backups by the worker "
     "that received them, no hand-off; those a backup did not apply at once end on the fast "
     "path's helper threads)."},
    {"repl_fast_continued", "rkv_replication_fast_continued_total", kC,
     "Replication: fast-path writes whose first attempt did not succeed at every backup (a "
     "refusal, a broken link, no reply within 1 s), ended by a helper thread as the write "
     "pool would."},
    {"cluster_disk_step_downs", "rkv_cluster_disk_step_downs_total", kC,
     "Cluster: times this server gave up its replicas because its write-ahead log failed "
     "(NAME/draining/ put by itself)."},
    {"cluster_disk_down", "rkv_cluster_disk_down", kG,
     "Cluster: 1 while this server is stepped down for a failing log (until a probe of its data "
     "directory passes), else 0."},
    {"keepalives_sent", "rkv_keepalives_sent_total", kC,
     "Keepalives (zero-length RDMA WRITEs) sent to silent clients."},
    {"writes_inline", "rkv_writes_inline_total", kC,
     "Durable PUT/DELETEs logged by the worker that received them (--fsync=no|everysec with the "
     "log keeping up), not handed to the write pool."},
    {"send_completions", "rkv_send_completions_total", kC,
     "Send completions polled by the workers (replies are signalled one in min(credits, 16); "
     "keepalives, window binds and drain markers always)."},
    {"worker_stalls", "rkv_worker_stalls_total", kC,
     "Times a worker found itself held for more than 100 ms between ticks (a write it logged "
     "itself met a slow disk, or it got no CPU); its connections are not blamed for that "
     "silence."},
    {"worker_sleeps", "rkv_worker_sleeps_total", kC,
     "Times a worker called poll() to wait for completions or commands (after its "
     "--poll_spin_us spin, or at once with spinning off); it returns at once if work is "
     "already pending."},
    {"srq_limit_events", "rkv_srq_limit_events_total", kC,
     "Times the shared receive queue ran low and its reserve buffers were posted."},
    {"request_credits", "rkv_request_credits", kG,
     "Requests a client may have outstanding (--credits)."},
    {"entries", "rkv_table_entries", kG, "Keys stored."},
    {"entry_capacity", "rkv_table_entry_capacity", kG,
     "Entry slots of the index (buckets x 7 plus overflow slots)."},
    {"load_factor", "rkv_table_load_factor", kG, "rkv_table_entries / rkv_table_entry_capacity."},
    {"overflow_entries", "rkv_table_overflow_entries", kG, "Entries in overflow slots."},
    {"num_buckets", "rkv_table_buckets", kG, "Index buckets."},
    {"region_size", "rkv_region_size_bytes", kG,
     "Size of the registered region (index, overflow and value heap; --memory)."},
    {"heap_bytes_in_use", "rkv_heap_used_bytes", kG,
     "Value heap bytes in live blocks (values and headers, rounded)."},
    {"heap_capacity", "rkv_heap_capacity_bytes", kG, "Value heap size."},
    {"heap_log_bytes", "rkv_heap_log_bytes", kG,
     "Value heap bytes between the log's tail and head (dead blocks and padding too)."},
    {"heap_blocks_moved", "rkv_heap_blocks_moved_total", kC,
     "Live heap blocks moved to make room."},
    {"heap_bytes_moved", "rkv_heap_moved_bytes_total", kC, "Bytes of live heap blocks moved."},
    {"workers", "rkv_workers", kG, "Worker threads (--workers)."},
    {"durable", "rkv_durable", kG, "1 with --data_dir (write-ahead log), 0 memory-only."},
    {"wal_records", "rkv_wal_records_total", kC, "Write-ahead log records written."},
    {"wal_failures", "rkv_wal_failures_total", kC, "Write-ahead log writes or syncs that failed."},
    {"wal_batches", "rkv_wal_batches_total", kC,
     "Write-ahead log writes (group commit: fewer than records)."},
    {"wal_syncs", "rkv_wal_syncs_total", kC, "fdatasync calls on the write-ahead log."},
    {"wal_file_bytes", "rkv_wal_file_bytes", kG, "Bytes in the current log file."},
    {"wal_generation", "rkv_wal_generation", kG, "Generation of the current log file."},
    {"wal_broken", "rkv_wal_broken", kG, "1 when the log is broken and writes are refused."},
    {"snapshots_taken", "rkv_snapshots_taken_total", kC, "Snapshots written."},
    {"snapshots_failed", "rkv_snapshots_failed_total", kC, "Snapshots that failed."},
    {"snapshot_running", "rkv_snapshot_running", kG, "1 while a snapshot is being written."},
    {"snapshot_last_entries", "rkv_snapshot_last_entries", kG, "Entries in the last snapshot."},
    {"snapshot_last_bytes", "rkv_snapshot_last_bytes", kG, "Size of the last snapshot."},
    {"snapshot_last_ms", "rkv_snapshot_last_duration_seconds", kG, "Time the last snapshot took.",
     nullptr, 0.001},
};

// Figures with a dedicated metric elsewhere (rkv_rpcs_total) or a label (instance_id).
bool Skipped(const char* stat) {
  static const char* const kSkip[] = {"instance_id", "rpc_put",    "rpc_delete",
                                      "rpc_stats",   "rpc_params", "rpc_snapshot"};
  for (const char* s : kSkip)
    if (std::strcmp(s, stat) == 0) return true;
  return false;
}

const Mapping* Find(const char* stat) {
  for (const Mapping& m : kMappings)
    if (std::strcmp(m.stat, stat) == 0) return &m;
  return nullptr;
}

double WallSeconds() {
  return std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
}

}  // namespace

MetricsRegistry::MetricsRegistry(Sources sources, std::chrono::milliseconds min_interval)
    : sources_(std::move(sources)), min_interval_(min_interval), start_time_s_(WallSeconds()) {}

std::vector<MetricFamily> MetricsRegistry::Families(const std::vector<StatValue>& stats,
                                                    const RpcMetrics* rpcs, double start_time_s) {
  std::vector<MetricFamily> out;
  std::map<std::string, size_t> index;
  auto family = [&](const std::string& name, MetricType type,
                    const std::string& help) -> MetricFamily& {
    auto it = index.find(name);
    if (it != index.end()) return out[it->second];
    index.emplace(name, out.size());
    out.push_back(MetricFamily{name, help, type, {}});
    return out.back();
  };

  family("rkv_up", kG, "1 while kvserver serves.").Add({}, 1);
  family("rkv_build_info", kG, "Build of this kvserver (the value is 1).")
      .Add({{"version", RKV_VERSION}}, 1);
  family("rkv_start_time_seconds", kG, "When this kvserver started, Unix time.")
      .AddDouble({}, start_time_s);

  uint64_t heap_used = 0, heap_capacity = 0;
  bool have_used = false, have_capacity = false;
  for (const StatValue& s : stats) {
    if (std::strcmp(s.name, "instance_id") == 0) {
      family("rkv_instance_info", kG,
             "This server instance (instance_id changes at every start; the value is 1).")
          .Add({{"instance_id", std::to_string(s.u)}}, 1);
      continue;
    }
    if (Skipped(s.name)) continue;
    if (std::strcmp(s.name, "heap_bytes_in_use") == 0) have_used = true, heap_used = s.u;
    if (std::strcmp(s.name, "heap_capacity") == 0) have_capacity = true, heap_capacity = s.u;
    const Mapping* m = Find(s.name);
    if (m == nullptr) {
      std::string name = std::string("rkv_stat_") + s.name;
      if (!IsValidMetricName(name)) continue;
      MetricFamily& f = family(name, kG, std::string("The `kvctl stats` figure ") + s.name + ".");
      if (s.is_double) {
        f.AddDouble({}, s.d);
      } else {
        f.Add({}, s.u);
      }
      continue;
    }
    MetricFamily& f = family(m->family, m->type, m->help);
    if (f.help.empty()) f.help = m->help;
    Labels labels;
    if (m->label != nullptr) {
      const char* eq = std::strchr(m->label, '=');
      labels.emplace_back(std::string(m->label, eq), std::string(eq + 1));
    }
    if (s.is_double || m->scale != 1) {
      f.AddDouble(std::move(labels), (s.is_double ? s.d : double(s.u)) * m->scale);
    } else {
      f.Add(std::move(labels), s.u);
    }
  }
  if (have_used && have_capacity) {
    family("rkv_heap_free_bytes", kG,
           "rkv_heap_capacity_bytes - rkv_heap_used_bytes (TABLE_FULL comes at about 200 KiB).")
        .Add({}, heap_capacity > heap_used ? heap_capacity - heap_used : 0);
  }

  if (rpcs != nullptr) {
    // Indices, not references: creating the second family may reallocate the vector.
    family("rkv_rpcs_total", kC,
           "Replies posted, by request type (op; unknown: did not decode) and reply status (code). "
           "GETs are one-sided READs and never reach the server.");
    family("rkv_request_duration_seconds", MetricType::kHistogram,
           "Time from a request's receive completion being polled to its reply being posted "
           "(durable PUT/DELETE: including the write-ahead log commit).");
    MetricFamily& total = out[index.at("rkv_rpcs_total")];
    MetricFamily& latency = out[index.at("rkv_request_duration_seconds")];
    for (size_t op = 0; op < RpcMetrics::kOps; ++op) {
      // OPEN is answered OK or UNAUTHENTICATED; the rest show OK always and other codes once seen.
      for (size_t code = 0; code < RpcMetrics::kCodes; ++code) {
        uint64_t v = rpcs->replies(op, code);
        if (v == 0 && !(code == 0 && op > 0)) continue;
        total.Add({{"op", RpcMetrics::OpName(op)}, {"code", RpcMetrics::CodeLabel(code)}}, v);
      }
      if (op == 0) continue;  // malformed requests: counted, not timed separately
      AddHistogram(&latency, {{"op", RpcMetrics::OpName(op)}}, rpcs->latency(op).Read());
    }
  }
  return out;
}

std::string MetricsRegistry::Render() {
  std::lock_guard<std::mutex> l(mu_);
  auto now = std::chrono::steady_clock::now();
  if (have_page_ && now - rendered_ < min_interval_) return page_;
  std::vector<StatValue> stats;
  if (sources_.stats) stats = sources_.stats();
  page_ = RenderPrometheusText(Families(stats, sources_.rpcs, start_time_s_));
  rendered_ = now;
  have_page_ = true;
  return page_;
}

}  // namespace rkv::metrics
