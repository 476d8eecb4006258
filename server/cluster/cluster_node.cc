// SPDX-License-Identifier: Apache-2.0
#include "server/cluster/cluster_node.h"

#include <glog/logging.h>

#include <algorithm>
#include <chrono>
#include <thread>

#include "common/cluster/map_lease.h"
#include "common/cluster/member_record.h"
#include "common/wire.h"
#include "server/cluster/import_check.h"

namespace rkv::cluster {

Status ClusterNode::Prepare(ClusterNodeOptions o, std::unique_ptr<ClusterNode>* out) {
  std::unique_ptr<ClusterNode> n(new ClusterNode(std::move(o)));
  EtcdSettings settings = n->o_.etcd;
  settings.endpoints = n->o_.cluster.endpoints;
  Status s = EtcdClient::Open(settings, &n->etcd_);
  if (!s.ok()) return s;
  bool found = false;
  EtcdKv kv;
  int64_t revision = 0;
  s = n->etcd_->Get(n->o_.cluster.Prefix() + "map", &found, &kv, &revision);
  if (!s.ok()) return Status(s.code(), "--cluster: reading the slot map: " + s.message());
  if (!found)
    return Status(Code::kNotFound, "--cluster: cluster '" + n->o_.cluster.name +
                                       "' does not exist (create it with kvctl cluster init)");
  SlotMap map;
  s = SlotMap::Decode(kv.value, &map);
  if (!s.ok())
    return Status(Code::kProtocolError,
                  "--cluster: the cluster's slot map does not decode: " + s.message());
  n->num_slots_ = map.num_slots();
  n->slot_seed_ = map.slot_seed();
  n->replicas_ = map.replicas();
  *out = std::move(n);
  return Status::Ok();
}

Replicator* ClusterNode::MakeReplicator(OwnershipTable* owners, Table* table) {
  if (replicas_ <= 1) return nullptr;
  ReplicatorOptions ro;
  ro.client.auth_token = o_.auth_token;
  ro.client.location_cache_entries = 0;
  ro.client.connect_timeout_ms = 2000;
  ro.client.rpc_timeout_ms = 2000;
  ro.client.reply_spin_us = o_.reply_spin_us;
  ro.client.local_address = o_.host;  // backups check REPLICATE's sender by it
  replicator_ = std::make_unique<Replicator>(owners, table, ro);
  return replicator_.get();
}

RingDrainer* ClusterNode::MakeRingDrainer(RingDrainer::ApplyFn apply,
                                          RingDrainer::HeadroomFn headroom) {
  if (replicas_ <= 1 || o_.durable) return nullptr;  // a durable backup's OK follows its log
  rings_ = std::make_unique<RingDrainer>(std::move(apply), std::move(headroom));
  rings_->Start();
  return rings_.get();
}

ClusterNode::~ClusterNode() {
  ring_loss_.reset();
  disk_.reset();
  sweeper_.reset();  // takes words_mu_ and reports to the reclaimer
  {
    std::lock_guard<std::mutex> l(words_mu_);
    stop_ = true;
  }
  promote_cv_.notify_all();
  if (promoter_.joinable()) promoter_.join();
  if (replicator_) replicator_->SetSuspects(nullptr);
  suspects_.reset();
  migrator_.reset();
  coordinator_.reset();  // resigns first: the next candidate leads at once
  probe_.reset();
  watcher_.reset();
  rings_.reset();       // after the watcher (Apply revokes through it); applies nothing more
  reclaimer_.reset();   // after the watcher: Apply reports to it
  membership_.reset();  // revokes the lease
}

Status ClusterNode::AwaitOwnFailover(const std::string& host, uint16_t port) {
  bool found = false;
  EtcdKv kv;
  Status s = etcd_->Get(o_.cluster.Prefix() + "ids/" + host + ":" + std::to_string(port), &found,
                        &kv, nullptr);
  uint32_t id = 0;
  if (!s.ok() || !found || !DecodeId(kv.value, &id)) return s;  // a new server: nothing to wait
  const auto deadline =
      std::chrono::steady_clock::now() + std::chrono::seconds(3 * o_.lease_ttl_s + 10);
  for (bool logged = false;; logged = true) {
    SlotMap map;
    std::vector<EtcdKv> members;
    bool more = false;
    s = etcd_->Get(o_.cluster.Prefix() + "map", &found, &kv, nullptr);
    if (s.ok() && found) s = SlotMap::Decode(kv.value, &map);
    if (s.ok())
      s = etcd_->GetPrefix(o_.cluster.Prefix() + "servers/", &members, nullptr, false, &more);
    if (!s.ok()) return Status(s.code(), "--cluster: reading the map and members: " + s.message());
    std::vector<bool> live(map.servers().size(), false);
    for (const EtcdKv& m : members) {
      MemberRecord r;
      if (MemberRecord::Decode(m.value, &r).ok() && map.IndexOf(r.id) != kUnassigned)
        live[map.IndexOf(r.id)] = r.id != id;  // our own record may be our former process's
    }
    const uint16_t me = map.IndexOf(id);
    uint32_t waiting = 0;
    for (uint32_t slot = 0; me != kUnassigned && slot < map.num_slots(); ++slot) {
      bool mine = false, other_live = false;
      for (uint16_t r = 0; r < map.replicas(); ++r) {
        const uint16_t o = map.OwnerIndex(slot, r);
        mine = mine || o == me;
        other_live = other_live || (o != kUnassigned && o != me && live[o]);
      }
      waiting += mine && other_live;
    }
    if (waiting == 0) {
      // A memory-only server restarted empty: what the map still gives it (slots whose other
      // replicas are all down) it must not serve empty (false NOT_FOUNDs): those roles stay
      // unserved until a copy reaches it (Apply).
      for (uint32_t slot = 0; !o_.durable && me != kUnassigned && slot < map.num_slots(); ++slot)
        for (uint16_t r = 0; r < map.replicas(); ++r)
          if (map.OwnerIndex(slot, r) == me) stale_role_[slot] = 1;
      return Status::Ok();
    }
    if (std::chrono::steady_clock::now() >= deadline)
      return Status(Code::kUnavailable,
                    "--cluster: the map still names server " + std::to_string(id) + " (" + host +
                        ":" + std::to_string(port) + ") in " + std::to_string(waiting) +
                        " slot(s) whose other replicas are live; it must not take them back "
                        "with the data it has (is its coordinator running?)");
    if (!logged)
      LOG(INFO) << "cluster: this server (id " << id << ") held " << waiting
                << " replicated slot(s) before it restarted; waiting for them to fail over "
                   "(its data may be older than its replicas')";
    std::this_thread::sleep_for(std::chrono::milliseconds(250));
  }
}

Status ClusterNode::Join(OwnershipTable* owners, Table* table, uint16_t port) {
  owners_ = owners;
  stale_role_.assign(owners->num_slots(), 0);
  if (replicas_ > 1) {
    Status w = AwaitOwnFailover(o_.host, o_.port != 0 ? o_.port : port);
    if (!w.ok()) return w;
  }
  Membership::Options m;
  m.cluster = o_.cluster;
  m.etcd = o_.etcd;
  m.host = o_.host;
  m.port = o_.port != 0 ? o_.port : port;
  m.zone = o_.zone;
  m.lease_ttl_s = o_.lease_ttl_s;
  Status s = Membership::Join(m, &membership_);
  if (!s.ok()) return Status(s.code(), "--cluster: joining: " + s.message());
  if (replicator_) replicator_->SetId(membership_->id());
  // Before the watcher: Apply reports the slots it releases to it.
  reclaimer_ = std::make_unique<SlotReclaimer>(table, owners);
  reclaimer_->Start();
  s = MapWatcher::Start(
      etcd_.get(), o_.cluster, [this](const SlotMap& map) { Apply(map); }, &watcher_);
  if (!s.ok()) return s;
  Membership* mem = membership_.get();
  if (replicas_ > 1) probe_ = std::make_unique<LivenessProbe>(o_.auth_token);
  coordinator_ = std::make_unique<Coordinator>(
      etcd_.get(), o_.cluster, mem->id(), [mem] { return mem->lease(); }, probe_.get());
  coordinator_->Start();
  MigratorOptions mo;
  mo.cluster = o_.cluster;
  mo.my_id = mem->id();
  mo.client.auth_token = o_.auth_token;
  mo.client.location_cache_entries = 0;
  mo.client.reply_spin_us = o_.reply_spin_us;
  mo.rate_bytes_s = o_.migration_rate;
  mo.applied_epoch = [this] { return applied_epoch_.load(); };
  mo.lease = [mem] { return mem->lease(); };
  if (replicator_) {
    Replicator* r = replicator_.get();
    mo.has_kept = [r](uint32_t slot) { return r->HasKept(slot); };
    mo.settle_kept = [r](uint32_t slot) { return r->Settle(slot); };
    mo.lacks_write = [r](uint32_t slot) { return r->LacksWrite(slot); };
    SuspectReporterOptions so;
    so.etcd = etcd_.get();
    so.cluster = o_.cluster;
    so.my_id = [id = mem->id()] { return id; };
    so.lease = [mem] { return mem->lease(); };
    so.map_epoch = [this] { return applied_epoch_.load(); };
    so.client.auth_token = o_.auth_token;
    so.suspect_after_ms = o_.suspect_after_ms;
    suspects_ = std::make_unique<SuspectReporter>(so);
    r->SetSuspects(suspects_.get());
    if (rings_) {  // a backup that takes log rings reports the slots it refused a record of
      RingLossReporterOptions ro;
      ro.etcd = etcd_.get();
      ro.cluster = o_.cluster;
      ro.owners = owners_;
      ro.my_id = mem->id();
      ro.lease = [mem] { return mem->lease(); };
      ro.map_epoch = [this] { return applied_epoch_.load(); };
      ring_loss_ = std::make_unique<RingLossReporter>(ro);
    }
    if (o_.log_failures && o_.log_broken && o_.disk_probe) {
      DiskStepDownOptions d;
      d.etcd = etcd_.get();
      d.cluster = o_.cluster;
      d.my_id = mem->id();
      d.lease = [mem] { return mem->lease(); };
      d.map_epoch = [this] { return applied_epoch_.load(); };
      d.failures = o_.log_failures;
      d.broken = o_.log_broken;
      d.probe = o_.disk_probe;
      d.first_hold_ms = o_.disk_hold_ms;
      d.max_hold_ms = std::max(o_.disk_hold_ms, 600000);
      disk_ = std::make_unique<DiskStepDown>(d);
    }
  }
  migrator_ = std::make_unique<Migrator>(etcd_.get(), table, owners, mo);
  migrator_->Start();
  promoter_ = std::thread([this] { Promote(); });
  ImportSweeperOptions io;
  io.etcd = etcd_.get();
  io.cluster = o_.cluster;
  io.my_id = mem->id();
  io.owners = owners;
  io.reclaimer = reclaimer_.get();
  io.applied_epoch = [this] { return applied_epoch_.load(); };
  io.under_map_lock = [this](const std::function<void()>& release) {
    std::lock_guard<std::mutex> l(words_mu_);
    release();
  };
  sweeper_ = std::make_unique<ImportSweeper>(io);
  sweeper_->Start();
  LOG(INFO) << "cluster '" << o_.cluster.name << "': joined as server " << mem->id() << " ("
            << m.host << ":" << m.port << "), map epoch " << watcher_->epoch() << ", "
            << owners_->CountOwned() << " slot(s) owned";
  return Status::Ok();
}

Status ClusterNode::CheckImport(uint64_t nonce, const std::vector<uint32_t>& slots) const {
  return CheckImportRecord(etcd_.get(), o_.cluster, id(), nonce, slots);
}

void ClusterNode::AppendStats(std::vector<StatValue>* v) const {
  v->push_back(StatValue::U("cluster_server_id", id()));
  v->push_back(StatValue::U("cluster_epoch", applied_epoch_.load()));
  v->push_back(StatValue::U("cluster_slots_owned", owners_ ? owners_->CountOwned() : 0));
  v->push_back(StatValue::U("cluster_bad_maps", watcher_ ? watcher_->bad_maps() : 0));
  v->push_back(
      StatValue::U("cluster_reregistrations", membership_ ? membership_->reregistrations() : 0));
  v->push_back(StatValue::U("cluster_coordinator", coordinator_ && coordinator_->leading()));
  v->push_back(StatValue::U("cluster_found_dead", probe_ ? probe_->found_dead() : 0));
  v->push_back(StatValue::U("migrations_out", migrator_ ? migrator_->batches_done() : 0));
  v->push_back(StatValue::U("migrations_failed", migrator_ ? migrator_->batches_failed() : 0));
  v->push_back(StatValue::U("migrated_keys_out", migrator_ ? migrator_->keys_sent() : 0));
  v->push_back(StatValue::U("cluster_backup_slots", owners_ ? owners_->CountBackups() : 0));
  v->push_back(StatValue::U("cluster_promotions", promotions_.load()));
  v->push_back(StatValue::U("cluster_reclaimed_keys", reclaimer_ ? reclaimer_->reclaimed() : 0));
  v->push_back(StatValue::U("cluster_slots_importing",
                            owners_ ? owners_->CountState(SlotState::kImporting) : 0));
  v->push_back(StatValue::U("cluster_abandoned_imports", sweeper_ ? sweeper_->released() : 0));
  v->push_back(StatValue::U("repl_writes", replicator_ ? replicator_->writes() : 0));
  v->push_back(StatValue::U("repl_retries", replicator_ ? replicator_->retries() : 0));
  v->push_back(StatValue::U("repl_failures", replicator_ ? replicator_->failures() : 0));
  v->push_back(StatValue::U("repl_kept", replicator_ ? replicator_->kept() : 0));
  v->push_back(StatValue::U("repl_reverts", replicator_ ? replicator_->reverts() : 0));
  v->push_back(StatValue::U("repl_resyncs", replicator_ ? replicator_->resyncs() : 0));
  v->push_back(StatValue::U("repl_resync_writes", replicator_ ? replicator_->resync_writes() : 0));
  v->push_back(StatValue::U("repl_fast_writes", replicator_ ? replicator_->fast_writes() : 0));
  v->push_back(
      StatValue::U("repl_fast_continued", replicator_ ? replicator_->fast_continued() : 0));
  v->push_back(StatValue::U("repl_ring_records", rings_ ? rings_->applied() : 0));
  v->push_back(StatValue::U("repl_ring_refused", rings_ ? rings_->refused() : 0));
  v->push_back(StatValue::U("repl_ring_kept", rings_ ? rings_->kept() : 0));
  v->push_back(StatValue::U("repl_ring_waits", rings_ ? rings_->waited() : 0));
  v->push_back(StatValue::U("repl_rings", rings_ ? rings_->rings() : 0));
  v->push_back(
      StatValue::U("repl_ring_headroom_revocations", rings_ ? rings_->headroom_revocations() : 0));
  v->push_back(StatValue::U("repl_ring_loss_slots", ring_loss_ ? ring_loss_->reported() : 0));
  v->push_back(StatValue::U("repl_ring_loss_reports", ring_loss_ ? ring_loss_->reports() : 0));
  v->push_back(
      StatValue::U("cluster_ring_loss_drops", coordinator_ ? coordinator_->ring_loss_drops() : 0));
  v->push_back(StatValue::U("cluster_suspects_reported", suspects_ ? suspects_->reported() : 0));
  v->push_back(StatValue::U("cluster_suspects_healed", suspects_ ? suspects_->healed() : 0));
  v->push_back(StatValue::U("cluster_suspects", suspects_ ? suspects_->suspected() : 0));
  v->push_back(
      StatValue::U("cluster_suspect_drops", coordinator_ ? coordinator_->suspect_drops() : 0));
  v->push_back(StatValue::U("cluster_disk_step_downs", disk_ ? disk_->step_downs() : 0));
  v->push_back(StatValue::U("cluster_disk_down", disk_ && disk_->down()));
}

}  // namespace rkv::cluster
