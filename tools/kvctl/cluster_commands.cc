// SPDX-License-Identifier: Apache-2.0
#include "tools/kvctl/cluster_commands.h"

#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <iostream>
#include <map>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string_view>
#include <thread>

#include "common/cluster/cluster_request.h"
#include "common/cluster/drain_record.h"
#include "common/cluster/leased_records.h"
#include "common/cluster/member_record.h"
#include "common/cluster/slot_map.h"
#include "common/cluster/suspect_record.h"
#include "common/etcd/etcd_client.h"
#include "common/secure_random.h"

namespace rkv::kvctl {
namespace {

int Fail(const std::string& what) {
  std::cerr << "kvctl: " << what << "\n";
  return 2;
}
int Fail(const Status& s) { return Fail(s.ToString()); }

int Init(EtcdClient* etcd, const ClusterArgs& a) {
  cluster::SlotMap map;
  uint64_t seed = 0;
  Status s = SecureRandom::Fill(&seed, sizeof seed);
  if (s.ok())
    s = cluster::SlotMap::Create(a.slots, uint16_t(a.replicas > 65535 ? 0 : a.replicas), seed,
                                 &map);
  if (!s.ok()) return Fail(s);
  map.set_epoch(1);
  std::string bytes;
  map.Encode(&bytes);
  const std::string key = a.address.Prefix() + "map";
  using C = EtcdClient::Compare;
  bool created = false;
  s = etcd->Txn({C{key, C::kCreateRevision, C::kEqual, 0, {}}}, {EtcdClient::Op::Put(key, bytes)},
                {}, &created);
  if (!s.ok()) return Fail(s);
  if (!created) {
    // Our own map (a first run whose answer was lost, retried on another member): the random
    // seed makes it unique.
    bool found = false;
    EtcdKv kv;
    s = etcd->Get(key, &found, &kv, nullptr);
    if (!s.ok()) return Fail(s);
    if (!found || kv.value != bytes)
      return Fail("cluster '" + a.address.name + "' already exists (its slot map is in etcd at " +
                  key + ")");
  }
  std::cout << "cluster " << a.address.name << " created: " << a.slots << " slots, " << a.replicas
            << " replica(s), epoch 1\n";
  return 0;
}

int StatusCmd(EtcdClient* etcd, const ClusterArgs& a) {
  const std::string prefix = a.address.Prefix();
  bool found = false;
  EtcdKv kv;
  Status s = etcd->Get(prefix + "map", &found, &kv, nullptr);
  if (!s.ok()) return Fail(s);
  if (!found) return Fail("cluster '" + a.address.name + "' does not exist (kvctl cluster init)");
  cluster::SlotMap map;
  s = cluster::SlotMap::Decode(kv.value, &map);
  if (!s.ok()) return Fail(s);
  std::vector<EtcdKv> records;
  bool more = false;
  s = etcd->GetPrefix(prefix + "servers/", &records, nullptr, false, &more);
  if (!s.ok()) return Fail(s);
  if (more) return Fail("more than " + std::to_string(EtcdClient::kMaxRangeKeys) + " servers");
  struct Row {
    std::string address, zone;
    bool live = false, in_map = false;
    int64_t lease = 0;  // its member record's
    uint32_t slots = 0;
    uint32_t backups = 0;  // slots this server is a backup of
  };
  std::map<uint32_t, Row> rows;
  for (const cluster::ServerEntry& e : map.servers()) {
    Row& r = rows[e.id];
    r.address = e.host + ":" + std::to_string(e.port);
    r.in_map = true;
    r.slots = map.SlotsOwnedBy(map.IndexOf(e.id));
  }
  int bad_records = 0;
  for (const EtcdKv& e : records) {
    cluster::MemberRecord m;
    // The record must be at its own id's key (servers/ID).
    if (!cluster::MemberRecord::Decode(e.value, &m).ok() ||
        e.key != prefix + "servers/" + std::to_string(m.id)) {
      ++bad_records;
      continue;
    }
    Row& r = rows[m.id];
    r.live = true;
    r.lease = e.lease;
    r.zone = m.zone;
    if (r.address.empty()) r.address = m.host + ":" + std::to_string(m.port);
  }
  // Partial partitions (backups their primary reported unreachable) and servers `cluster
  // remove` is taking out of a replicated cluster (docs/cluster.md), counted as the
  // coordinator counts them: under their server's current membership lease.
  std::map<uint32_t, int64_t> leases;
  for (const auto& [id, row] : rows)
    if (row.live) leases[id] = row.lease;
  cluster::LeasedRecords<cluster::SuspectRecord> suspect_read;
  s = cluster::ReadLeasedRecords(etcd, prefix, "suspects/", leases,
                                 &cluster::SuspectRecord::reporter, &suspect_read);
  if (!s.ok()) return Fail(s);
  const std::vector<cluster::SuspectRecord>& suspects = suspect_read.kept;
  cluster::LeasedRecords<cluster::DrainRecord> drain_read;
  s = cluster::ReadLeasedRecords(etcd, prefix, "draining/", leases, &cluster::DrainRecord::server,
                                 &drain_read);
  if (!s.ok()) return Fail(s);
  bad_records += int(suspect_read.malformed.size() + drain_read.malformed.size());
  std::vector<uint32_t> draining;
  for (const cluster::DrainRecord& r : drain_read.kept) draining.push_back(r.server);
  uint32_t unassigned = 0;
  // Replication health: a backup in the map is in sync by construction (it enters the map only
  // once its copy is complete, and every write waits for it), so what counts is liveness.
  uint32_t full = 0, degraded = 0, stranded = 0, min_live = map.replicas();
  nlohmann::json slot_replicas = nlohmann::json::array();
  for (uint32_t slot = 0; slot < map.num_slots(); ++slot) {
    unassigned += map.OwnerIndex(slot, 0) == cluster::kUnassigned;
    if (map.OwnerIndex(slot, 0) == cluster::kUnassigned) {
      if (a.json) slot_replicas.push_back(nlohmann::json::array());
      continue;
    }
    uint32_t live = 0;
    nlohmann::json ids = nlohmann::json::array();
    for (uint16_t r = 0; r < map.replicas(); ++r) {
      const cluster::ServerEntry* e = map.Owner(slot, r);
      if (e == nullptr) continue;
      if (r > 0) ++rows[e->id].backups;
      live += rows[e->id].live ? 1 : 0;
      if (a.json) ids.push_back(e->id);
    }
    if (a.json) slot_replicas.push_back(std::move(ids));
    min_live = std::min(min_live, live);
    if (live == map.replicas()) {
      ++full;
    } else if (live > 0) {
      ++degraded;
    } else {
      ++stranded;
    }
  }
  if (a.json) {
    nlohmann::json j = {{"name", a.address.name},
                        {"epoch", map.epoch()},
                        {"slots", map.num_slots()},
                        {"replicas", map.replicas()},
                        {"unassigned_slots", unassigned},
                        {"unreadable_records", bad_records},
                        {"slots_fully_replicated", full},
                        {"slots_degraded", degraded},
                        {"slots_without_live_replica", stranded},
                        {"min_live_replicas", min_live},
                        {"slot_replicas", std::move(slot_replicas)},
                        {"suspects", nlohmann::json::array()},
                        {"draining", draining},
                        {"servers", nlohmann::json::array()}};
    for (const cluster::SuspectRecord& x : suspects)
      j["suspects"].push_back({{"reporter", x.reporter}, {"backup", x.backup}});
    for (const auto& [id, r] : rows)
      j["servers"].push_back({{"id", id},
                              {"address", r.address},
                              {"zone", r.zone},
                              {"live", r.live},
                              {"in_map", r.in_map},
                              {"slots", r.slots},
                              {"backups", r.backups}});
    std::cout << j.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace) << "\n";
    return 0;
  }
  std::ostringstream out;
  out << "cluster " << a.address.name << " epoch " << map.epoch() << " slots " << map.num_slots()
      << " replicas " << map.replicas() << " unassigned " << unassigned << "\n";
  if (map.replicas() > 1)
    out << "replicas: " << full << " slot(s) with all " << map.replicas() << " live, " << degraded
        << " degraded (a replica down or missing), " << stranded
        << " with no live replica; at least " << min_live << " live per slot\n";
  for (const auto& [id, r] : rows)
    out << "server " << id << " " << r.address << " " << (r.live ? "live" : "down") << " slots "
        << r.slots << (map.replicas() > 1 ? " backups " + std::to_string(r.backups) : "")
        << (r.zone.empty() ? "" : " zone " + r.zone) << (r.in_map ? "" : " (not in the map yet)")
        << "\n";
  for (const cluster::SuspectRecord& x : suspects)
    out << "suspect: server " << x.backup << " unreachable from server " << x.reporter
        << " (its primary reported it; kept out of its slots)\n";
  for (uint32_t id : draining)
    out << "draining: server " << id << " (cluster remove: leaving every slot)\n";
  if (bad_records > 0)
    out << "unreadable membership, suspect or drain records: " << bad_records << "\n";
  std::cout << out.str();
  return 0;
}

// rebalance | remove ADDR:PORT: one request at a time (create-if-absent), then its answer.
int Request(EtcdClient* etcd, const ClusterArgs& a) {
  const std::string prefix = a.address.Prefix();
  cluster::ClusterRequest req;
  Status s = SecureRandom::Fill(&req.nonce, sizeof req.nonce);
  if (!s.ok()) return Fail(s);
  bool found = false;
  EtcdKv kv;
  s = etcd->Get(prefix + "map", &found, &kv, nullptr);
  if (!s.ok()) return Fail(s);
  if (!found) return Fail("cluster '" + a.address.name + "' does not exist (kvctl cluster init)");
  if (a.words[0] == "remove") {
    req.kind = cluster::ClusterRequest::kRemove;
    s = etcd->Get(prefix + "ids/" + a.words[1], &found, &kv, nullptr);
    if (!s.ok()) return Fail(s);
    if (!found || !cluster::DecodeId(kv.value, &req.server_id) || req.server_id == 0)
      return Fail("no server " + a.words[1] + " ever joined cluster '" + a.address.name + "'");
  }
  using C = EtcdClient::Compare;
  bool created = false;
  int64_t revision = 0;
  s = etcd->Txn({C{prefix + "request", C::kCreateRevision, C::kEqual, 0, {}}},
                {EtcdClient::Op::Put(prefix + "request", req.Encode())}, {}, &created, &revision);
  if (!s.ok()) return Fail(s);
  if (!created) {
    s = etcd->Get(prefix + "request", &found, &kv, nullptr);
    if (!s.ok()) return Fail(s);
    if (!found || kv.value != req.Encode())
      return Fail("another request is pending at " + prefix +
                  "request; wait for it (or delete that key if no coordinator runs)");
  }
  // Wait for NAME/result with our nonce.
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(a.wait_ms);
  while (std::chrono::steady_clock::now() < deadline) {
    s = etcd->Get(prefix + "result", &found, &kv, nullptr);
    cluster::ClusterResult res;
    if (s.ok() && found && cluster::ClusterResult::Decode(kv.value, &res).ok() &&
        res.nonce == req.nonce) {
      if (res.code != Code::kOk) return Fail(Status(res.code, res.message));
      std::cout << "cluster " << a.address.name << " " << a.words[0] << ": " << res.message << "\n";
      return 0;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(200));
  }
  return Fail(Status(Code::kTimeout, "no answer from the cluster's coordinator within " +
                                         std::to_string(a.wait_ms) +
                                         " ms (is a kvserver of the cluster running?); the "
                                         "request stays pending"));
}

}  // namespace

int RunClusterCommand(const ClusterArgs& a) {
  const bool ok = a.words.size() == 1 &&
                  (a.words[0] == "init" || a.words[0] == "status" || a.words[0] == "rebalance");
  if (!ok && !(a.words.size() == 2 && a.words[0] == "remove"))
    return Fail(
        "usage: kvctl --server=etcd://HOST:PORT/NAME cluster init [--slots=N] "
        "[--replicas=R] | cluster status [--json] | cluster rebalance | cluster remove "
        "ADDR:PORT");
  if (a.json && a.words[0] != "status") return Fail("--json applies to cluster status");
  EtcdSettings e = a.etcd;
  e.endpoints = a.address.endpoints;
  std::unique_ptr<EtcdClient> etcd;
  Status s = EtcdClient::Open(e, &etcd);
  if (!s.ok()) return Fail(s);
  if (a.words[0] == "init") return Init(etcd.get(), a);
  if (a.words[0] == "status") return StatusCmd(etcd.get(), a);
  return Request(etcd.get(), a);
}

}  // namespace rkv::kvctl
