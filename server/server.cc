// SPDX-License-Identifier: Apache-2.0
#include "server/server.h"

#include <glog/logging.h>
#include <sched.h>
#include <sys/mman.h>

#include <cerrno>
#include <chrono>
#include <sstream>

#include "common/auth.h"
#include "common/secure_random.h"
#include "common/verbs/qp_setup.h"
#include "common/wire.h"
#include "server/conn/limit_options.h"
#include "server/durability/disk_probe.h"
#include "server/durability/recovery.h"

namespace rkv {

void Server::Unmap::operator()(uint8_t* p) const { munmap(p, len); }

namespace {
// --poll_spin_us=-1: spin only where the workers can have CPUs of their own (the acceptor, the
// write pool and the client side of a local benchmark need the rest). The CPUs this process may
// run on (sched_getaffinity: taskset and cpusets count; a CFS quota does not).
ServerOptions ResolveSpin(ServerOptions o) {
  if (o.poll_spin_us >= 0) return o;
  cpu_set_t set;
  int cpus = sched_getaffinity(0, sizeof set, &set) == 0 ? CPU_COUNT(&set) : 1;
  o.poll_spin_us = cpus >= o.workers + 2 ? 50 : 0;
  return o;
}
}  // namespace

Server::Server(ServerOptions options) : opt_(ResolveSpin(std::move(options))) {}

Server::~Server() {
  StopThreads();
  // Log rings hold registrations in connections' PDs: gone before the connections.
  if (cluster_) cluster_->CloseRings();
  // Drop every connection while CQs, SRQ, PD and the event channel still exist.
  if (manual_) manual_->Shutdown();
  registry_.reset();
  if (cm_) cm_->Shutdown();
}

void Server::StopThreads() {
  if (metrics_http_) metrics_http_->Stop();  // first: it reads the table and the log
  stop_.store(true);
  if (manual_) manual_->Join();
  if (async_) async_->Join();
  for (auto& w : workers_) w->Join();
  if (writes_) writes_->Stop();  // after the workers: a late reply is queued to a worker, unread
  if (repl_writes_) repl_writes_->Stop();
  if (snapshotter_) snapshotter_->Stop();
}

Status Server::OpenDurability() {
  wal::Env* env = wal::Env::Posix();
  const std::string& dir = opt_.data_dir;
  wal::RecoveryReport report;
  Status s = wal::Recover(env, dir, opt_.recover_truncate, table_.get(), &report);
  for (const std::string& w : report.warnings) LOG(WARNING) << "recovery: " << w;
  if (!s.ok()) return Status(s.code(), "recovery from " + dir + " failed: " + s.message());
  LOG(INFO) << "data_dir " << dir << ": " << report.Summary();
  s = wal::DurableLog::Open(env, dir, opt_.fsync, report.next_generation, report.next_sequence,
                            std::chrono::milliseconds(opt_.commit_timeout_ms), &log_);
  if (!s.ok()) return s;
  table_->SetWriteLog(log_.get());
  snapshotter_ = std::make_unique<wal::Snapshotter>(env, dir, log_.get(), table_.get(),
                                                    opt_.snapshot_log_bytes);
  LOG(INFO) << "durable: write-ahead log in " << dir << ", fsync " << wal::FsyncModeName(opt_.fsync)
            << ", snapshot when the log passes " << opt_.snapshot_log_bytes << " bytes, "
            << opt_.write_threads << " write threads";
  return Status::Ok();
}

std::vector<StatValue> Server::CollectStats() const {
  std::vector<StatValue> v =
      rkv::CollectStats(counters_, *table_, instance_id_, opt_.workers, uint32_t(opt_.credits));
  v.push_back(StatValue::U("durable", log_ ? 1 : 0));
  if (cluster_) cluster_->AppendStats(&v);
  if (log_) {
    v.push_back(StatValue::U("wal_records", log_->records()));
    v.push_back(StatValue::U("wal_failures", log_->failures()));
    v.push_back(StatValue::U("wal_batches", log_->batches()));
    v.push_back(StatValue::U("wal_syncs", log_->syncs()));
    v.push_back(StatValue::U("wal_file_bytes", log_->current_file_bytes()));
    v.push_back(StatValue::U("wal_generation", log_->current_generation()));
    v.push_back(StatValue::U("wal_broken", log_->broken().ok() ? 0 : 1));
    v.push_back(StatValue::U("snapshots_taken", snapshotter_->taken()));
    v.push_back(StatValue::U("snapshots_failed", snapshotter_->failed()));
    v.push_back(StatValue::U("snapshot_running", snapshotter_->running() ? 1 : 0));
    v.push_back(StatValue::U("snapshot_last_entries", snapshotter_->last_entries()));
    v.push_back(StatValue::U("snapshot_last_bytes", snapshotter_->last_bytes()));
    v.push_back(StatValue::U("snapshot_last_ms", snapshotter_->last_ms()));
  }
  return v;
}

std::string Server::StatsText() const { return FormatStats(CollectStats()); }

Status Server::StartMetrics() {
  if (opt_.metrics_host.empty()) return Status::Ok();
  metrics_ = std::make_unique<metrics::MetricsRegistry>(
      metrics::MetricsRegistry::Sources{[this] { return CollectStats(); }, &counters_.rpcs},
      std::chrono::milliseconds(100));
  metrics_http_ =
      std::make_unique<metrics::MetricsHttpServer>([this] { return metrics_->Render(); });
  const std::string where = opt_.metrics_host + ":" + std::to_string(opt_.metrics_port);
  Status s = metrics_http_->Start(opt_.metrics_host, opt_.metrics_port);
  if (!s.ok()) {
    metrics_http_.reset();
    return Status(Code::kInvalidArgument, "--metrics_listen=" + where + ": " + s.message());
  }
  LOG(INFO) << "metrics: http://" << opt_.metrics_host << ":" << metrics_http_->port()
            << "/metrics (Prometheus text format)";
  if (auth::IsWildcardHost(opt_.metrics_host))
    LOG(WARNING) << "--metrics_listen=" << where
                 << " is a wildcard address: any host that reaches the port can read the metrics "
                    "(no secrets: counters and load figures); prefer a management address";
  return Status::Ok();
}

Status Server::Start() {
  // Protected mode here too, so that every user of Server is covered, not only kvserver.
  Status s = auth::CheckListen(opt_.host, !opt_.auth_token.empty(), opt_.allow_unauthenticated);
  if (!s.ok()) return s;
  if (!opt_.auth_token.empty() && opt_.auth_token.size() < auth::kMinTokenSize)
    return Status(Code::kInvalidArgument,
                  "the auth token is " + std::to_string(opt_.auth_token.size()) +
                      " bytes; need at least " + std::to_string(auth::kMinTokenSize));
  // As kvserver's flag parsing: a negative or NaN limit must not mean "no limit".
  s = CheckLimitOptions(opt_);
  if (!s.ok()) return s;
  // The instance id is public (logs, STATS, OPEN replies); the hash seed must not be derivable
  // from it, so both are drawn independently from the kernel's CSPRNG.
  s = SecureRandom::U64(&instance_id_);
  if (!s.ok()) return Status(s.code(), "instance id: " + s.message());
  if (instance_id_ == 0) instance_id_ = 1;
  uint64_t seed = 0;
  s = SecureRandom::U64(&seed);
  if (!s.ok()) return Status(s.code(), "hash seed: " + s.message());

  cm_ = std::make_unique<CmAcceptor>();
  s = cm_->Listen(opt_.host, opt_.port, &ctx_);
  if (!s.ok()) return s;
  if (ctx_ == nullptr) {
    int n = 0;
    ibv_context** list = rdma_get_devices(&n);
    if (list == nullptr || n == 0) {
      if (list) rdma_free_devices(list);
      return Status(Code::kIoError, "no RDMA device found (ibv_devices lists none)");
    }
    ctx_ = list[0];
    rdma_free_devices(list);
  }
  pd_.reset(ibv_alloc_pd(ctx_));
  if (!pd_) return ErrnoStatus("ibv_alloc_pd", errno);

  // --cluster: the slot map's slot count sizes the ownership table, which follows the table's
  // bytes in the region (8 bytes per slot, page aligned; docs/cluster.md, "Ownership words").
  region_bytes_ = opt_.memory;
  if (!opt_.cluster.name.empty()) {
    cluster::ClusterNodeOptions co;
    co.cluster = opt_.cluster;
    co.etcd = opt_.cluster_etcd;
    co.host = opt_.host;
    co.port = cm_->bound_port();
    co.zone = opt_.zone;
    co.lease_ttl_s = opt_.cluster_lease_ttl_s;
    co.suspect_after_ms = opt_.cluster_suspect_after_ms;
    co.durable = !opt_.data_dir.empty();
    co.auth_token = opt_.auth_token;
    co.migration_rate = opt_.migration_rate;
    co.reply_spin_us = opt_.poll_spin_us;
    if (!opt_.data_dir.empty()) {  // log_ is opened below, before Join (which starts the checks)
      co.log_failures = [this] { return log_ ? log_->failures() : 0; };
      co.log_broken = [this] { return log_ ? log_->broken() : Status::Ok(); };
      co.disk_probe = [this] {
        return wal::ProbeDisk(wal::Env::Posix(), opt_.data_dir, wal::kDiskProbeBytes);
      };
      co.disk_hold_ms = opt_.cluster_disk_hold_ms;
    }
    s = cluster::ClusterNode::Prepare(co, &cluster_);
    if (!s.ok()) return s;
    owner_offset_ = (opt_.memory + 4095) / 4096 * 4096;
    region_bytes_ = owner_offset_ + (uint64_t{cluster_->num_slots()} * 8 + 4095) / 4096 * 4096;
  }
  void* mem = mmap(nullptr, region_bytes_, PROT_READ | PROT_WRITE,
                   MAP_PRIVATE | MAP_ANONYMOUS | MAP_POPULATE, -1, 0);
  if (mem == MAP_FAILED)
    return ErrnoStatus("mmap(" + std::to_string(region_bytes_) + " bytes for --memory)", errno);
  region_ = std::unique_ptr<uint8_t, Unmap>(static_cast<uint8_t*>(mem), Unmap{region_bytes_});
  if (cluster_)
    owners_ = std::make_unique<cluster::OwnershipTable>(
        reinterpret_cast<uint64_t*>(region_.get() + owner_offset_), cluster_->num_slots(),
        cluster_->slot_seed());
  layout::Geometry geo;
  if (!opt_.data_dir.empty()) {  // the data's seed: keys go back to the buckets they had
    wal::Env* env = wal::Env::Posix();
    s = env->CreateDirIfMissing(opt_.data_dir);
    if (s.ok()) s = dir_lock_.Lock(opt_.data_dir);
    if (s.ok()) s = wal::LoadOrCreateSeed(env, opt_.data_dir, seed, &seed);
    if (!s.ok()) return s;
  }
  if (!layout::ComputeGeometry(opt_.memory, opt_.buckets, opt_.index_fraction, seed, &geo))
    return Status(Code::kInvalidArgument, "--memory=" + std::to_string(opt_.memory) +
                                              " is too small for the index (" +
                                              std::to_string(opt_.buckets) + " buckets requested)");
  table_ = std::make_unique<Table>(region_.get(), geo);
  if (!opt_.data_dir.empty()) {
    s = OpenDurability();
    if (!s.ok()) return s;
  } else {
    LOG(WARNING) << "memory-only: no --data_dir, so every write is lost when kvserver stops";
  }
  // No remote access through this registration: each client reads through a window of its own
  // (remote READ only, zero-based) bound on its QP, or where the device has no type-2 windows
  // through a registration of its own (docs/security.md, "Private rkeys").
  ibv_device_attr dev{};
  if (ibv_query_device(ctx_, &dev) != 0) return ErrnoStatus("ibv_query_device", errno);
  windows_ = (dev.device_cap_flags & IBV_DEVICE_MEM_WINDOW_TYPE_2B) != 0 && !opt_.rkey_registration;
  // --reply_signal_every=0 (auto): one in min(credits, 16), except on soft-RoCE (rxe), where an
  // unsignalled reply measured 2.3x the PUT latency of a signalled one (docs/performance.md,
  // "Selective signalling on soft-RoCE"): there every reply is signalled.
  if (opt_.reply_signal_every == 0) {
    const std::string name = ibv_get_device_name(ctx_->device);
    const bool rxe = dev.vendor_id == 0xffffff || name.rfind("rxe", 0) == 0;
    opt_.reply_signal_every = rxe ? 1 : std::max(1, std::min(16, opt_.credits));
  }
  const int slots = Worker::ReplySlots(opt_);
  send_buf_.assign(size_t(opt_.max_connections) * size_t(slots) * Worker::kSendSlotSize, 0);
  if (windows_) {
    // Windows are bound over this registration; the QPs, the reply buffers and the SRQ share
    // the server's PD.
    region_mr_.reset(ibv_reg_mr(pd_.get(), region_.get(), region_bytes_, IBV_ACCESS_MW_BIND));
    if (!region_mr_) return ErrnoStatus("ibv_reg_mr(table region, MW_BIND)", errno);
    send_mr_.reset(ibv_reg_mr(pd_.get(), send_buf_.data(), send_buf_.size(), 0));
    if (!send_mr_) return ErrnoStatus("ibv_reg_mr(send buffers)", errno);
    s = SrqPool::Create(pd_.get(), opt_.srq_depth, std::max(1, opt_.srq_depth / 2), &srq_);
    if (!s.ok()) return s;
  }
  // Registration mode: nothing here. Each connection gets a PD of its own at accept with its
  // QP, a receive queue of its own and its share of send_buf_, and at OPEN its registration of
  // the region (server/conn/private_domain.h).

  RegionInfo region{0, 0, region_bytes_};  // PARAMS replies: no address, no shared rkey
  exec_ = std::make_unique<RpcExecutor>(table_.get(), &counters_, region,
                                        [this] { return StatsText(); });
  if (owners_) exec_->SetOwnership(owners_.get());
  if (cluster_)
    exec_->SetImportCheck([node = cluster_.get()](uint64_t nonce, const std::vector<uint32_t>& s) {
      return node->CheckImport(nonce, s);
    });
  cluster::Replicator* replicator =
      cluster_ ? cluster_->MakeReplicator(owners_.get(), table_.get()) : nullptr;
  // Log rings (docs/replication-rings.md): a memory-only server of a replicated cluster.
  cluster::RingDrainer* rings = nullptr;
  if (replicator != nullptr && opt_.replication_rings) {
    // Headroom (docs/replication-rings.md, "The capacity rule"): a ring is granted while the
    // table's entries are under 3/4 of its capacity and its heap, with every ring's bytes
    // counted as used, too; rings are kept while both stay under 7/8 (without the rings'
    // bytes): between the two bounds nothing flaps.
    rings = cluster_->MakeRingDrainer(
        [exec = exec_.get()](const cluster::ReplicaRing& r, const cluster::RingRecordView& v,
                             bool last_try) { return exec->ApplyRingRecord(r, v, last_try); },
        [table = table_.get()](bool for_grant, size_t ring_bytes) {
          const uint64_t num = for_grant ? 3 : 7, den = for_grant ? 4 : 8;
          const uint64_t heap = table->heap_capacity();
          const uint64_t used = table->heap_bytes_in_use() + (for_grant ? ring_bytes : 0);
          return table->entries() * den < table->entry_capacity() * num &&
                 (heap == 0 || used * den <= heap * num);
        });
    exec_->SetRingDrainer(rings);
  }
  if (replicator != nullptr) {
    exec_->SetReplicator(replicator);
    repl_writes_ = std::make_unique<WritePool>(
        exec_.get(), opt_.write_threads,
        size_t(opt_.max_connections) * size_t(Worker::CreditLimit(opt_)));
  }
  if (snapshotter_) {
    exec_->SetSnapshotHandler([this] {
      std::string message;
      snapshotter_->Request(&message);
      return message;
    });
  }
  // A cluster server always has one: MIGRATE_BEGIN's purge scans the table, which must not
  // hold up a worker (a memory-only server without replicas applies its other writes on the
  // worker: Worker::Offload).
  if (snapshotter_ || replicator != nullptr || owners_)
    writes_ = std::make_unique<WritePool>(
        exec_.get(), opt_.write_threads,
        size_t(opt_.max_connections) * size_t(Worker::CreditLimit(opt_)));
  registry_ = std::make_unique<ConnRegistry>(opt_.max_connections);
  WorkerEnv wenv;
  wenv.opt = &opt_;
  wenv.srq = srq_.get();
  wenv.exec = exec_.get();
  wenv.writes = writes_.get();
  wenv.repl_writes = repl_writes_.get();
  if (replicator != nullptr && opt_.replicate_on_worker) {
    replica_links_ = replicator->link_options();
    replica_links_.reply_spin_us = std::max(0, replica_links_.reply_spin_us);  // a channel
    wenv.replica_links = &replica_links_;
    wenv.owner_slots = owners_->num_slots();
  }
  wenv.log = log_.get();
  wenv.rings = rings;
  wenv.ring_bytes = opt_.replication_ring_bytes;
  if (cluster_) {
    // The node outlives the workers (destroyed after StopThreads joined them).
    const cluster::SenderAddresses* senders = &cluster_->senders();
    wenv.replicate_sender = [senders](uint32_t sender, uint64_t epoch, uint32_t peer) {
      return senders->Admit(sender, epoch, peer);
    };
  }
  wenv.registry = registry_.get();
  wenv.counters = &counters_;
  wenv.send_base = send_buf_.data();
  wenv.send_lkey = send_mr_ ? send_mr_->lkey : 0;
  // Small replies (PUT/DELETE answers, errors) go inline: 256 bytes or what the device allows.
  wenv.max_inline = ProbeMaxInline(ctx_, pd_.get(), 256, uint32_t(Worker::SendQueueDepth(opt_)),
                                   uint32_t(Worker::PrivateReceiveBuffers(opt_)));
  wenv.stop = &stop_;
  wenv.auth_token = opt_.auth_token;
  wenv.open_reply = MakeOpenReply();
  wenv.pd = pd_.get();
  wenv.region_mr = region_mr_.get();
  wenv.region = region_.get();
  wenv.region_size = region_bytes_;
  wenv.windows = windows_;
  if (writes_) {
    write_received_.assign(size_t(opt_.max_connections) * size_t(Worker::CreditLimit(opt_) + 1),
                           {});
    write_ring_head_.assign(size_t(opt_.max_connections), 0);
    wenv.write_received = write_received_.data();
    wenv.write_ring_head = write_ring_head_.data();
  }
  // Every QP of a worker may have its full send queue and its share of receives outstanding.
  int per_worker = (opt_.max_connections + opt_.workers - 1) / opt_.workers;
  int cqe =
      srq_ ? int(srq_->buffers()) + per_worker * Worker::SendQueueDepth(opt_) + 64
           : per_worker * (Worker::SendQueueDepth(opt_) + Worker::PrivateReceiveBuffers(opt_) + 1) +
                 64;
  for (int w = 0; w < opt_.workers; ++w) {
    workers_.push_back(std::make_unique<Worker>(w, wenv));
    s = workers_.back()->Init(ctx_, cqe);
    if (!s.ok()) return s;
  }

  AcceptEnv aenv;
  aenv.opt = &opt_;
  aenv.ctx = ctx_;
  aenv.pd = pd_.get();
  aenv.max_inline = wenv.max_inline;
  aenv.srq = srq_.get();
  aenv.send_base = send_buf_.data();
  for (auto& w : workers_) aenv.workers.push_back(w.get());
  aenv.registry = registry_.get();
  SourceLimiter::Limits limits;
  limits.max_conns_per_source = uint32_t(std::max(0, opt_.max_conns_per_source));
  limits.max_pending_per_source = uint32_t(EffectivePendingPerSource(opt_));
  limits.attempts_per_s = opt_.connects_per_source_per_s;
  limits.attempt_burst = uint32_t(std::max(1, opt_.connect_burst_per_source));
  limits.max_sources = size_t(opt_.max_connections) + 4096;  // addresses holding connections fit
  limiter_ = std::make_unique<SourceLimiter>(limits);
  aenv.limiter = limiter_.get();
  aenv.counters = &counters_;
  aenv.hello = MakeHello();
  aenv.region = region;
  aenv.next_serial = &next_serial_;
  aenv.stop = &stop_;
  cm_->SetEnv(aenv);
  async_ = std::make_unique<AsyncEvents>(ctx_, registry_.get(), srq_.get(), &counters_, &stop_);

  if (opt_.exchange.method != Exchange::kRdmaCm) {
    std::unique_ptr<ExchangeListener> listener;
    s = ListenExchange(opt_.exchange, opt_.host, cm_->bound_port(), &listener);
    if (!s.ok()) return s;
    // Fail now, not at the first client, if the settings do not fit the device.
    ConnParams probe;
    s = FillLocalParams(ctx_, opt_.qp, &probe);
    if (!s.ok()) return Status(s.code(), "connection settings: " + s.message());
    manual_ = std::make_unique<ManualAcceptor>(aenv, std::move(listener));
    LOG(INFO) << "manual-mode connections: parameters exchanged over " << manual_->Describe();
  }

  if (cluster_) {
    // Once the record is in etcd, clients and the coordinator may count on this server. Before
    // the metrics endpoint starts: it reads the node's parts, which Join creates.
    s = cluster_->Join(owners_.get(), table_.get(), cm_->bound_port());
    if (!s.ok()) return s;
  }
  s = StartMetrics();
  if (!s.ok()) return s;
  LOG(INFO) << "kvserver listening on " << opt_.host << ":" << cm_->bound_port() << " device "
            << ibv_get_device_name(ctx_->device) << " instance " << instance_id_;
  if (opt_.auth_token.empty())
    LOG(WARNING) << "no --auth_token_file: any host that can reach " << opt_.host << ":"
                 << cm_->bound_port() << " can read and write every key";
  else
    LOG(INFO) << "authentication on: clients must prove the token of --auth_token_file";
  LOG(INFO) << "private rkeys: "
            << (windows_ ? "a type-2 memory window per client (zero-based, remote READ)"
                         : "a registration per client (ibv_reg_mr_iova, iova 0, remote READ)");
  LOG(INFO) << "region size " << opt_.memory << " buckets " << geo.num_buckets << " overflow_slots "
            << geo.overflow_slots << " entry_capacity " << geo.entry_capacity() << " heap "
            << (opt_.memory - geo.heap_offset) << " bytes, workers " << opt_.workers
            << " (poll spin " << opt_.poll_spin_us << " us), replies inline up to "
            << wenv.max_inline << " bytes, signalled one in " << opt_.reply_signal_every;
  LOG(INFO) << "limits: max_connections " << opt_.max_connections << ", max_pending "
            << opt_.max_pending << ", request credits " << opt_.credits << ", peer_timeout "
            << opt_.peer_timeout_ms << " ms, accept_timeout " << opt_.accept_timeout_ms << " ms, "
            << (srq_ ? "srq_depth " + std::to_string(opt_.srq_depth) + " (+" +
                           std::to_string(srq_->buffers() - opt_.srq_depth) + " reserve)"
                     : "a receive queue per connection, " +
                           std::to_string(Worker::PrivateReceiveBuffers(opt_)) +
                           " buffers once open (registration mode: no shared SRQ)");
  return Status::Ok();
}

Status Server::Run() {
  for (auto& w : workers_) w->Start();
  if (writes_) writes_->Start();
  if (repl_writes_) repl_writes_->Start();
  if (snapshotter_) snapshotter_->Start();
  Status s = async_->Start();
  if (!s.ok()) {
    StopThreads();
    return s;
  }
  if (manual_) manual_->Start();
  Status result = cm_->Run();
  StopThreads();
  return result;
}

wire::ServerHello Server::MakeHello() const {
  wire::ServerHello h{};
  h.magic = wire::kHelloMagic;
  h.version = wire::kProtocolVersion;
  h.flags = opt_.auth_token.empty() ? 0 : wire::kHelloAuthRequired;
  h.credits = uint32_t(opt_.credits);
  return h;
}

wire::OpenReply Server::MakeOpenReply() const {
  const layout::Geometry& g = table_->geometry();
  wire::OpenReply h{};
  h.magic = wire::kHelloMagic;
  h.version = wire::kProtocolVersion;
  h.flags = opt_.auth_token.empty() ? 0 : wire::kHelloAuthRequired;
  h.instance_id = instance_id_;
  h.region_addr = 0;  // zero-based window / registration
  h.region_size = region_bytes_;
  h.owner_slots = owners_ ? owners_->num_slots() : 0;
  h.owner_offset = owners_ ? owner_offset_ : 0;
  h.rkey = 0;  // per connection (Worker::Grant)
  h.num_buckets = g.num_buckets;
  h.hash_seed = g.seed;
  h.bucket_size = layout::kBucketSize;
  h.slot_size = layout::kSlotSize;
  h.overflow_offset = g.overflow_offset;
  h.overflow_slots = g.overflow_slots;
  h.max_key_size = wire::kMaxKeySize;
  h.max_value_size = wire::kMaxValueSize;
  h.max_request_size = wire::kMaxRequestSize;
  h.credits = uint32_t(opt_.credits);
  return h;
}

}  // namespace rkv
