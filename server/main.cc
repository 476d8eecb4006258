// SPDX-License-Identifier: Apache-2.0
// kvserver: serves an rkv table over RDMA. See README.md for the flags.
#include <gflags/gflags.h>
#include <glog/logging.h>

#include <csignal>
#include <cstdlib>
#include <ctime>
#include <iostream>
#include <string>

#include "common/auth.h"
#include "common/cli/flag_check.h"
#include "common/cli/usage.h"
#include "common/parse.h"
#include "common/table/layout.h"
#include "common/verbs/conn_flags.h"
#include "server/durability/durable_log.h"
#include "server/durability/log_record.h"
#include "server/server.h"

DEFINE_string(listen, "0.0.0.0:7470", "ADDR:PORT to listen on (an address of an RDMA interface)");
DEFINE_string(memory, "256M", "size of the registered table region (e.g. 256M, 1G)");
DEFINE_uint32(buckets, 0, "number of index buckets (0: derived from --memory)");
DEFINE_double(index_fraction, 0.25, "share of --memory used by the index when --buckets=0");
DEFINE_int32(workers, 2, "worker threads executing PUT/DELETE");
DEFINE_int32(poll_spin_us, -1,
             "microseconds a worker keeps polling its completion queue after its last completion "
             "before it sleeps (0: sleep at once; -1: 50 when the process may use at least "
             "workers + 2 CPUs, else 0); a spinning worker uses a whole CPU while busy");
DEFINE_int32(reply_signal_every, 0,
             "replies are signalled one in this many (0: auto, min(credits, 16), or 1 on soft-RoCE "
             "where unsignalled replies measured slower; 1: every reply); keepalives and binds "
             "always are");
DEFINE_int32(max_connections, 1024, "maximum concurrent client connections");
DEFINE_int32(srq_depth, 256,
             "receive buffers in the shared receive queue (plus half as many in reserve)");
DEFINE_int32(max_pending, 64,
             "connections in setup at once (rdma_cm accepted but not established, manual-mode "
             "parameter exchanges); more are refused");
DEFINE_int32(credits, 4, "requests a client may have outstanding at once (announced at connect)");
DEFINE_double(peer_timeout, 30,
              "seconds without a sign of life (requests, keepalive answers) before a client is "
              "torn down; keepalives go out after a third of it");
DEFINE_double(accept_timeout, 5,
              "seconds a connection may take from connect request (or first exchange message) "
              "to established");

DEFINE_int32(max_conns_per_source, 64,
             "live connections one source address may hold (0: no cap); more are refused BUSY");
DEFINE_int32(max_pending_per_source, -1,
             "connections one source address may have in setup or not yet opened (OPEN) at "
             "once (0: no cap; -1: max(1, --max_pending/8)); more are refused BUSY");
DEFINE_double(max_connects_per_source_per_s, 1000,
              "connection attempts per second one source address may make on average (0: no "
              "limit); more are refused BUSY");
DEFINE_int32(connect_burst_per_source, 1000,
             "connection attempts one source address may make at once before "
             "--max_connects_per_source_per_s applies");

DEFINE_bool(test_mode, false,
            "allow the flags meant for tests that force predictable or wrong connection "
            "parameters (--psn, --force_rq_psn, --force_dest_qp_num); never in production");

DEFINE_string(auth_token_file, "",
              "file holding the secret clients must prove (HMAC challenge-response; at least 32 "
              "bytes, trailing whitespace ignored, e.g. `openssl rand -hex 32`; a regular file "
              "owned by this user, not accessible by group or others, in a directory others "
              "cannot write). Empty: no authentication");
DEFINE_bool(allow_unauthenticated, false,
            "without --auth_token_file, allow listening on a wildcard address (any spelling "
            "that resolves to 0.0.0.0 or ::) anyway: every host that reaches the port can read and "
            "write every key");
DEFINE_string(client_rkeys, "auto",
              "how each client gets its private rkey: auto (a type-2 memory window bound on its "
              "QP when the device has them, else a registration of its own) or registration "
              "(always a registration of the region of its own, ibv_reg_mr_iova, in a protection "
              "domain of its own with its QP and receive queue)");
DEFINE_string(data_dir, "",
              "directory for the write-ahead log and snapshots; empty: memory-only (every write is "
              "lost when kvserver stops)");
DEFINE_string(fsync, "everysec",
              "always: reply after the log record is on stable storage (group commit); everysec: "
              "sync once a second (a power loss may lose about 1 s, a crash nothing); no: let the "
              "OS sync");
DEFINE_string(recover, "strict",
              "strict: refuse to start on a corrupt log or snapshot; truncate: keep what precedes "
              "the damage and drop the rest (named in the log)");
DEFINE_string(snapshot_log_size, "64M",
              "take a snapshot when the log file grows past this (0: only on kvctl snapshot)");
DEFINE_string(metrics_listen, "",
              "ADDR:PORT to serve Prometheus metrics on over HTTP (GET /metrics; "
              "docs/metrics.md); empty: off. Anyone who reaches it can read the figures (no "
              "secrets): prefer a management address");
DEFINE_int32(write_threads, 16,
             "with --data_dir: threads executing PUT/DELETE (concurrent writes share a sync)");
DEFINE_string(cluster, "",
              "etcd://HOST:PORT[,HOST:PORT...]/NAME (or etcds://): join cluster NAME (created by "
              "kvctl cluster init) and serve the slots its map gives this server; etcd TLS and "
              "auth come from --etcd_cacert, --etcd_cert, --etcd_key, --etcd_user, "
              "--etcd_password_file (docs/cluster.md)");
DEFINE_string(zone, "", "--cluster: this server's failure domain (0..32 printable bytes)");
DEFINE_int32(cluster_lease_ttl, 2,
             "--cluster: seconds this server's etcd lease lives without a keepalive (2..60); a "
             "dead server's record goes after this, and with replicas its slots fail over");
DEFINE_bool(replicate_on_worker, true,
            "--cluster with replicas: a client's write is sent to the backups and answered by "
            "the worker that received it, with no hand-off to a write thread (docs/cluster.md, "
            "\"The replicated write's fast path\"); false: every replicated write goes through "
            "the write pool");
DEFINE_bool(replication_rings, true,
            "--cluster with replicas: one-sided replication through log rings (a primary "
            "writes its replicated writes into rings its backups granted; a backup without "
            "--data_dir grants them; docs/replication-rings.md); false: every replicated write "
            "is a REPLICATE send");
DEFINE_int32(replication_ring_kib, 1024,
             "--replication_rings: KiB per log ring (64..16384; a record larger than an eighth "
             "of it goes two-sided)");
DEFINE_int32(
    cluster_suspect_after_ms, -1,
    "--cluster with replicas: a backup this server (its primary) cannot reach for this "
    "long although it is registered (a partial partition) is reported in etcd, and the "
    "coordinator drops it from this server's slots until it is reachable again "
    "(docs/cluster.md, \"Partial partitions\"); -1: twice the lease TTL + 1 s; 0: never (writes "
    "to its slots then wait until it answers or dies)");
DEFINE_int32(cluster_disk_hold_ms, 30000,
             "--cluster with replicas and --data_dir: a server whose write-ahead log fails gives "
             "up its replicas (docs/cluster.md, \"A failing disk\") and probes its data directory "
             "again after this long (doubling, up to 10 minutes, while it keeps failing); "
             "1000..600000");
DEFINE_string(migration_rate, "64M",
              "--cluster: bytes per second a slot migration copies at most (0: unpaced), so "
              "that foreground latency stays bounded while slots move");
DEFINE_bool(check_config, false,
            "check every flag, the table's geometry and --auth_token_file as a start does "
            "before it opens the device, print 'kvserver: configuration OK' and exit 0; "
            "exit 2 naming the first bad flag otherwise. Touches no device, data directory "
            "(its lock and space are checked at start) or network");

namespace {
rkv::Server* g_server = nullptr;
void OnSignal(int) {
  if (g_server) g_server->Stop();
}
int Fail(const std::string& msg) {
  std::cerr << "kvserver: " << msg << "\n";
  return 2;
}

// --help and the manual page (help2man renders --help): every flag in one group.
rkv::cli::Usage KvserverUsage() {
  return rkv::WithConnFlagGroups(rkv::cli::Usage{
      "kvserver",
      "kvserver --listen=ADDR:PORT --auth_token_file=FILE [--memory=SIZE] [--data_dir=DIR] "
      "[FLAGS]\nkvserver --flagfile=/etc/rkv/kvserver.flags",
      "Serves an rkv key-value table over RDMA (InfiniBand or RoCE). The table lives in one\n"
      "registered memory region: clients read it with one-sided RDMA READs, and send PUT and\n"
      "DELETE as RPCs that the server's workers execute. With --data_dir every write is logged\n"
      "and snapshotted, and a restart recovers it.",
      {{"Listening and limits",
        {"listen", "max_connections", "max_pending", "max_conns_per_source",
         "max_pending_per_source", "max_connects_per_source_per_s", "connect_burst_per_source",
         "accept_timeout", "peer_timeout", "credits", "srq_depth"}},
       {"Table and workers",
        {"memory", "buckets", "index_fraction", "workers", "poll_spin_us", "reply_signal_every"}},
       {"Security", {"auth_token_file", "allow_unauthenticated", "client_rkeys"}},
       {"Durability", {"data_dir", "fsync", "recover", "snapshot_log_size", "write_threads"}},
       {"Cluster",
        {"cluster", "zone", "cluster_lease_ttl", "cluster_suspect_after_ms", "cluster_disk_hold_ms",
         "migration_rate", "replicate_on_worker", "replication_rings", "replication_ring_kib"}},
       {"Operation", {"check_config", "metrics_listen", "test_mode"}}},
      "Exit status: 0 after SIGTERM or SIGINT (a clean stop), or for --check_config, --help,\n"
      "--version; 2 for a bad flag or a failed start (the message names the flag or the call).\n"
      "\n"
      "See also: kvctl(1), kvbench(1); docs/design.md, docs/security.md and docs/connection.md\n"
      "in the rkv sources.",
      "log format version " + std::to_string(rkv::wal::kLogFormatVersion) +
          "\nsnapshot format version " + std::to_string(rkv::wal::kSnapshotFormatVersion) + "\n"});
}
}  // namespace

int main(int argc, char** argv) {
  // glog formats every line's time with localtime(), which re-reads the time zone on each call
  // unless TZ is set, freeing and copying a libc string under a lock ThreadSanitizer cannot see
  // (reported as a race between worker threads). With TZ set, libc parses it once. The default
  // keeps the system's zone; this runs before any thread exists.
  setenv("TZ", ":/etc/localtime", 0);
  tzset();
  gflags::SetUsageMessage("kvserver --listen=ADDR:PORT --memory=SIZE");
  rkv::cli::EnsureStandardFds();
  if (int rc = 0; rkv::cli::HandleHelpOrVersion(argc, argv, KvserverUsage(), &rc)) return rc;
  // gflags ignores unknown flags in a flagfile (/etc/rkv/kvserver.flags): a misspelt
  // --auth_token_file there must stop the start, not yield an unauthenticated server.
  if (std::string bad = rkv::cli::PrecheckFlags(argc, argv); !bad.empty()) {
    std::cerr << "kvserver: " << bad << "\n";
    return 2;
  }
  gflags::ParseCommandLineFlags(&argc, &argv, true);
  FLAGS_logtostderr = true;
  google::InitGoogleLogging(argv[0]);
  if (argc > 1) return Fail(std::string("unexpected argument '") + argv[1] + "'");
  rkv::ServerOptions o;
  rkv::Status s = rkv::ParseHostPort(FLAGS_listen, &o.host, &o.port);
  if (!s.ok()) return Fail("--listen: " + s.message());
  s = rkv::ParseSize(FLAGS_memory, &o.memory);
  if (!s.ok()) return Fail("--memory: " + s.message());
  if (o.memory < (1 << 20)) return Fail("--memory must be at least 1M");
  if (FLAGS_workers < 1 || FLAGS_workers > 64) return Fail("--workers must be 1..64");
  if (FLAGS_poll_spin_us < -1 || FLAGS_poll_spin_us > 1000000)
    return Fail("--poll_spin_us must be -1 (auto) or 0..1000000");
  if (FLAGS_max_connections < 1 || FLAGS_max_connections > 65536)
    return Fail("--max_connections must be 1..65536");
  if (FLAGS_srq_depth < 4 || FLAGS_srq_depth > 16384) return Fail("--srq_depth must be 4..16384");
  if (!(FLAGS_index_fraction > 0.01 && FLAGS_index_fraction < 0.99))
    return Fail("--index_fraction must be between 0.01 and 0.99");
  if (FLAGS_max_pending < 1 || FLAGS_max_pending > 4096)
    return Fail("--max_pending must be 1..4096");
  if (FLAGS_credits < 1 || FLAGS_credits > 64) return Fail("--credits must be 1..64");
  if (!(FLAGS_peer_timeout >= 0.3 && FLAGS_peer_timeout <= 3600))
    return Fail("--peer_timeout must be 0.3..3600 seconds");
  if (!(FLAGS_accept_timeout >= 0.1 && FLAGS_accept_timeout <= 600))
    return Fail("--accept_timeout must be 0.1..600 seconds");
  o.max_pending = FLAGS_max_pending;
  if (FLAGS_max_conns_per_source < 0 || FLAGS_max_conns_per_source > 65536)
    return Fail("--max_conns_per_source must be 0..65536");
  if (FLAGS_max_pending_per_source < -1 || FLAGS_max_pending_per_source > 4096)
    return Fail("--max_pending_per_source must be -1..4096");
  o.max_pending_per_source = FLAGS_max_pending_per_source;
  if (!(FLAGS_max_connects_per_source_per_s >= 0 && FLAGS_max_connects_per_source_per_s <= 1e6))
    return Fail("--max_connects_per_source_per_s must be 0..1000000");
  if (FLAGS_connect_burst_per_source < 1 || FLAGS_connect_burst_per_source > 1000000)
    return Fail("--connect_burst_per_source must be 1..1000000");
  o.max_conns_per_source = FLAGS_max_conns_per_source;
  o.connects_per_source_per_s = FLAGS_max_connects_per_source_per_s;
  o.connect_burst_per_source = FLAGS_connect_burst_per_source;
  o.credits = FLAGS_credits;
  o.peer_timeout_ms = int(FLAGS_peer_timeout * 1000);
  o.accept_timeout_ms = int(FLAGS_accept_timeout * 1000);
  o.buckets = FLAGS_buckets;
  o.index_fraction = FLAGS_index_fraction;
  o.workers = FLAGS_workers;
  o.poll_spin_us = FLAGS_poll_spin_us;
  if (FLAGS_reply_signal_every < 0 || FLAGS_reply_signal_every > 16)
    return Fail("--reply_signal_every must be 0 (auto) or 1..16");
  o.reply_signal_every = FLAGS_reply_signal_every;
  o.max_connections = FLAGS_max_connections;
  o.srq_depth = FLAGS_srq_depth;
  o.data_dir = FLAGS_data_dir;
  if (!rkv::wal::ParseFsyncMode(FLAGS_fsync, &o.fsync))
    return Fail("--fsync must be always, everysec or no (got '" + FLAGS_fsync + "')");
  if (FLAGS_recover != "strict" && FLAGS_recover != "truncate")
    return Fail("--recover must be strict or truncate (got '" + FLAGS_recover + "')");
  o.recover_truncate = FLAGS_recover == "truncate";
  s = rkv::ParseSize(FLAGS_snapshot_log_size, &o.snapshot_log_bytes);
  if (!s.ok()) return Fail("--snapshot_log_size: " + s.message());
  if (FLAGS_write_threads < 1 || FLAGS_write_threads > 1024)
    return Fail("--write_threads must be 1..1024");
  o.write_threads = FLAGS_write_threads;
  s = rkv::ConnFlags(rkv::Role::kServer, &o.exchange, &o.qp);
  if (!s.ok()) return Fail(s.message());
  if (!FLAGS_test_mode && (o.qp.psn >= 0 || o.qp.force_rq_psn >= 0 || o.qp.force_dest_qp_num >= 0))
    return Fail(
        "--psn, --force_rq_psn and --force_dest_qp_num are for tests (a predictable PSN or a "
        "wrong peer QP weakens or breaks every connection): start kvserver with --test_mode to "
        "use them");
  if (!FLAGS_auth_token_file.empty()) {
    s = rkv::auth::LoadTokenFile(FLAGS_auth_token_file, &o.auth_token);
    if (!s.ok()) return Fail("--auth_token_file: " + s.message());
  }
  o.allow_unauthenticated = FLAGS_allow_unauthenticated;
  if (FLAGS_client_rkeys != "auto" && FLAGS_client_rkeys != "registration")
    return Fail("--client_rkeys must be auto or registration (got '" + FLAGS_client_rkeys + "')");
  o.rkey_registration = FLAGS_client_rkeys == "registration";
  if (!FLAGS_metrics_listen.empty()) {
    s = rkv::ParseHostPort(FLAGS_metrics_listen, &o.metrics_host, &o.metrics_port);
    if (!s.ok()) return Fail("--metrics_listen=" + FLAGS_metrics_listen + ": " + s.message());
  }
  if (!FLAGS_cluster.empty()) {
    s = rkv::cluster::ParseClusterAddress(FLAGS_cluster, &o.cluster);
    if (!s.ok()) return Fail("--cluster=" + FLAGS_cluster + ": " + s.message());
    if (o.host == "0.0.0.0" || o.host == "::" || o.host.empty())
      return Fail("--cluster needs --listen with the address clients dial (not " + o.host + ")");
    if (FLAGS_cluster_lease_ttl < 2 || FLAGS_cluster_lease_ttl > 60)
      return Fail("--cluster_lease_ttl must be 2..60 seconds");
    if (FLAGS_zone.size() > 32) return Fail("--zone is longer than 32 bytes");
    o.zone = FLAGS_zone;
    o.cluster_lease_ttl_s = FLAGS_cluster_lease_ttl;
    o.replicate_on_worker = FLAGS_replicate_on_worker;
    if (FLAGS_replication_ring_kib < 64 || FLAGS_replication_ring_kib > 16384)
      return Fail("--replication_ring_kib must be 64..16384");
    o.replication_rings = FLAGS_replication_rings;
    o.replication_ring_bytes = size_t(FLAGS_replication_ring_kib) << 10;
    if (FLAGS_cluster_suspect_after_ms < -1 || FLAGS_cluster_suspect_after_ms > 600000)
      return Fail("--cluster_suspect_after_ms must be -1, 0 or up to 600000");
    o.cluster_suspect_after_ms = FLAGS_cluster_suspect_after_ms < 0
                                     ? FLAGS_cluster_lease_ttl * 2000 + 1000
                                     : FLAGS_cluster_suspect_after_ms;
    if (FLAGS_cluster_disk_hold_ms < 1000 || FLAGS_cluster_disk_hold_ms > 600000)
      return Fail("--cluster_disk_hold_ms must be 1000..600000");
    o.cluster_disk_hold_ms = FLAGS_cluster_disk_hold_ms;
    s = rkv::ParseSize(FLAGS_migration_rate, &o.migration_rate);
    if (!s.ok()) return Fail("--migration_rate: " + s.message());
    o.cluster_etcd.cacert = o.exchange.etcd_cacert;
    o.cluster_etcd.cert = o.exchange.etcd_cert;
    o.cluster_etcd.key = o.exchange.etcd_key;
    o.cluster_etcd.user = o.exchange.etcd_user;
    o.cluster_etcd.password_file = o.exchange.etcd_password_file;
    rkv::EtcdSettings check = o.cluster_etcd;
    check.endpoints = o.cluster.endpoints;
    s = rkv::EtcdTransport::CheckSettings(check, "--cluster");
    if (!s.ok()) return Fail(s.message());
  }
  s = rkv::auth::CheckListen(o.host, !o.auth_token.empty(), o.allow_unauthenticated);
  if (!s.ok()) return Fail("--listen=" + FLAGS_listen + ": " + s.message());
  if (FLAGS_check_config) {
    // The table's geometry too (Server::Start checks it after opening the device).
    rkv::layout::Geometry geo;
    if (!rkv::layout::ComputeGeometry(o.memory, o.buckets, o.index_fraction, 1, &geo))
      return Fail("--memory=" + FLAGS_memory + " is too small for the index (" +
                  std::to_string(o.buckets) + " buckets requested)");
    std::cout << "kvserver: configuration OK\n";
    return 0;
  }

  rkv::Server server(o);
  s = server.Start();
  if (!s.ok()) return Fail(s.ToString());
  g_server = &server;
  std::signal(SIGINT, OnSignal);
  std::signal(SIGTERM, OnSignal);
  std::signal(SIGPIPE, SIG_IGN);
  s = server.Run();
  g_server = nullptr;
  if (!s.ok()) return Fail(s.ToString());
  LOG(INFO) << "kvserver stopped";
  return 0;
}
