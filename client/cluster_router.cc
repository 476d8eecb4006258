// SPDX-License-Identifier: Apache-2.0
#include "client/cluster_router.h"

#include <algorithm>
#include <chrono>
#include <set>
#include <sstream>
#include <thread>

#include "client/connection.h"
#include "client/failover_watch.h"
#include "common/cluster/map_lease.h"

namespace rkv {

namespace {
using SteadyClock = std::chrono::steady_clock;
constexpr int kMaxBackoffUs = 50000;
// Figures summed over the servers by Stats (the rest are per server only).
bool Additive(const std::string& name) {
  static const std::set<std::string> kNot = {
      "instance_id",    "load_factor", "request_credits",    "num_buckets",
      "workers",        "durable",     "cluster_server_id",  "cluster_epoch",
      "wal_generation", "wal_broken",  "cluster_coordinator"};
  return kNot.count(name) == 0;
}
}  // namespace

Status ClusterRouter::Open(const cluster::ClusterAddress& address, const Options& options,
                           std::unique_ptr<ClusterRouter>* out) {
  Status s = ClientImpl::ValidateOptions(options);
  if (!s.ok()) return s;
  std::unique_ptr<ClusterRouter> r(new ClusterRouter(address, options));
  EtcdSettings e;
  e.endpoints = address.endpoints;
  e.cacert = options.exchange.etcd_cacert;
  e.cert = options.exchange.etcd_cert;
  e.key = options.exchange.etcd_key;
  e.user = options.exchange.etcd_user;
  e.password_file = options.exchange.etcd_password_file;
  s = EtcdClient::Open(e, &r->etcd_);
  if (!s.ok()) return s;
  s = cluster::MapWatcher::Start(r->etcd_.get(), address, nullptr, &r->watcher_,
                                 options.watch_cluster_map, /*keep_confirmed=*/true);
  if (!s.ok()) return s;
  *out = std::move(r);
  return Status::Ok();
}

ClusterRouter::~ClusterRouter() {
  conns_.clear();
  watcher_.reset();  // before the etcd client it borrows
}

void ClusterRouter::Drop(uint32_t id) {
  auto it = conns_.find(id);
  if (it == conns_.end()) return;
  closed_ += it->second->counters();
  conns_.erase(it);
}

ClientImpl* ClusterRouter::ConnectionTo(const cluster::SlotMap& map, uint16_t index, Status* s,
                                        uint32_t slot) {
  const cluster::ServerEntry& e = map.servers()[index];
  const std::string where =
      "server " + std::to_string(e.id) + " (" + e.host + ":" + std::to_string(e.port) + ")";
  auto it = conns_.find(e.id);
  if (it != conns_.end() && !it->second->broken()) return it->second.get();
  if (it != conns_.end()) Drop(e.id);
  auto down = down_until_.find(e.id);
  if (down != down_until_.end() && SteadyClock::now() < down->second) {
    *s = Status(Code::kUnavailable,
                where + " could not be reached a moment ago: " + down_why_[e.id]);
    return nullptr;
  }
  auto c = std::make_unique<ClientImpl>(e.host, e.port, options_);
  Status o;
  bool abandoned = false;
  if (map.replicas() > 1 && slot != kAnySlot) {
    FailoverWatch watch(watcher_.get(), c.get(), slot, e.id, map.epoch(), kAbandonAfterMs);
    o = c->Open();
    abandoned = watch.abandoned();
    if (abandoned) ++abandoned_waits_;
  } else {
    o = c->Open();
  }
  if (o.ok() && c->owner_slots() != map.num_slots())
    o = Status(Code::kProtocolError, "it has no ownership table for cluster '" + address_.name +
                                         "' (" + std::to_string(c->owner_slots()) +
                                         " slots, the map has " + std::to_string(map.num_slots()) +
                                         ")");
  if (!o.ok()) {
    // A dead server is not dialled again for a second: its slots fail fast meanwhile. (Not
    // one whose connect was given up because the map moved on: it may be well.)
    if (!abandoned) {
      down_until_[e.id] = SteadyClock::now() + std::chrono::seconds(1);
      down_why_[e.id] = o.ToString();
    }
    *s = Status(Code::kUnavailable, where + " cannot be reached: " + o.ToString());
    return nullptr;
  }
  down_until_.erase(e.id);
  info_ = c->info();
  ClientImpl* p = c.get();
  conns_[e.id] = std::move(c);
  return p;
}

Status ClusterRouter::Route(Kind kind, std::string_view key, std::string_view value,
                            std::string* result) {
  if (key.empty()) return Status(Code::kInvalidArgument, "empty key");
  const auto deadline =
      SteadyClock::now() + std::chrono::milliseconds(std::max(0, options_.rpc_timeout_ms));
  int backoff_us = 200;
  bool refreshed_unassigned = false, retried_lost = false;
  for (;;) {
    const cluster::SlotMap* map = Map();
    const uint32_t slot = map->SlotOf(key);
    const uint16_t owner = map->OwnerIndex(slot);
    if (owner == cluster::kUnassigned) {
      if (!refreshed_unassigned) {  // maybe our map is old
        refreshed_unassigned = true;
        ++map_refreshes_;
        if (watcher_->Refresh().ok() && watcher_->epoch() > map->epoch()) continue;
      }
      return Status(Code::kUnavailable, "slot " + std::to_string(slot) + " of cluster '" +
                                            address_.name + "' has no owner (map epoch " +
                                            std::to_string(map->epoch()) +
                                            "); kvctl cluster rebalance assigns it");
    }
    Status s;
    ClientImpl* c = ConnectionTo(*map, owner, &s, slot);
    if (c == nullptr) {
      if (watcher_->epoch() > map->epoch())
        continue;  // a newer map (the connect may have
                   // been abandoned for it): route again
      // With replicas the owner may have failed over: a newer map names another (read at most
      // every kDownRefreshMs, so a dead server does not turn every call into an etcd read).
      if (map->replicas() > 1 && SteadyClock::now() >= next_down_refresh_) {
        next_down_refresh_ = SteadyClock::now() + std::chrono::milliseconds(kDownRefreshMs);
        ++map_refreshes_;
        if (watcher_->Refresh().ok() && watcher_->epoch() > map->epoch()) continue;
      }
      return s;
    }
    const uint64_t rpcs = c->counters().rpcs;
    switch (kind) {
      case Kind::kGet:
        if (!LeaseHeld(*map, &s)) return s;
        if (watcher_->epoch() > map->epoch()) continue;  // the confirming read found a new map
        c->ExpectOwner(slot, map->epoch());
        s = ReadAt(c, *map, owner, slot, key, result);
        // The value was read before now: good only if the lease on this very map still held
        // (map_lease.h); else read again (the map is confirmed or renewed first).
        if ((s.ok() || s.IsNotFound()) && map->replicas() > 1 &&
            (!watcher_->Confirmed() || watcher_->epoch() != map->epoch())) {
          if (SteadyClock::now() >= deadline)
            return Status(Code::kUnavailable,
                          "the cluster map's lease ran out during every read "
                          "of " +
                              std::to_string(options_.rpc_timeout_ms) + " ms");
          continue;
        }
        break;
      case Kind::kPut:
      case Kind::kDelete:
        s = Write(c, *map, owner, slot, kind == Kind::kPut, key, value);
        break;
    }
    if (s.code() == Code::kMoved || s.code() == Code::kTryAgain) {
      ++redirects_;
      if (SteadyClock::now() >= deadline)
        return Status(s.code(), s.message() + "; still so at rpc_timeout_ms (" +
                                    std::to_string(options_.rpc_timeout_ms) + " ms)");
      if (s.code() == Code::kMoved) {
        ++map_refreshes_;
        if (watcher_->Refresh().ok() && watcher_->epoch() > map->epoch()) continue;
      }
      std::this_thread::sleep_for(std::chrono::microseconds(backoff_us));
      backoff_us = std::min(backoff_us * 2, kMaxBackoffUs);
      continue;
    }
    if (!c->broken()) return s;
    const bool rpcs_sent = c->counters().rpcs != rpcs;
    // The connection failed: drop it (the next use opens a new one). `c` dies here.
    const uint32_t id = map->servers()[owner].id;
    const std::string where =
        map->servers()[owner].host + ":" + std::to_string(map->servers()[owner].port);
    Drop(id);
    if (kind == Kind::kGet) {
      if (retried_lost) return s;
      retried_lost = true;  // a read is safe to repeat, once, on a new connection
      continue;
    }
    const char* op = kind == Kind::kPut ? "PUT" : "DELETE";
    return Status(
        Code::kConnectionLost,
        std::string(op) + " to " + where + ": " + s.ToString() +
            (rpcs_sent ? "; the write was not retried: it may or may not have been applied"
                       : "; the write was not sent"));
  }
}

Status ClusterRouter::Write(ClientImpl* c, const cluster::SlotMap& map, uint16_t owner,
                            uint32_t slot, bool put, std::string_view key, std::string_view value) {
  if (map.replicas() <= 1) return put ? c->Put(key, value) : c->Delete(key);
  // The slot's primary may be failed over while this write waits for its reply (it was
  // stopped or cut off: no reply, no disconnect): the wait then ends, outcome unknown.
  FailoverWatch watch(watcher_.get(), c, slot, map.servers()[owner].id, map.epoch(),
                      kAbandonAfterMs);
  Status s = put ? c->Put(key, value) : c->Delete(key);
  if (watch.abandoned()) ++abandoned_waits_;
  return s;
}

Status ClusterRouter::ReadAt(ClientImpl* c, const cluster::SlotMap& map, uint16_t owner,
                             uint32_t slot, std::string_view key, std::string* value) {
  if (map.replicas() <= 1) return c->Get(key, value);
  // A cut-off primary completes no READ: once the map names another, the READ wait ends
  // (the connection broken) and Route reads again at the new primary.
  FailoverWatch watch(watcher_.get(), c, slot, map.servers()[owner].id, map.epoch(),
                      kAbandonAfterMs);
  Status s = c->Get(key, value);
  if (watch.abandoned()) ++abandoned_waits_;
  return s;
}

Status ClusterRouter::Get(std::string_view key, std::string* value) {
  return Route(Kind::kGet, key, {}, value);
}
Status ClusterRouter::Put(std::string_view key, std::string_view value) {
  return Route(Kind::kPut, key, value, nullptr);
}
Status ClusterRouter::Delete(std::string_view key) {
  return Route(Kind::kDelete, key, {}, nullptr);
}

bool ClusterRouter::LeaseHeld(const cluster::SlotMap& map, Status* s) {
  if (map.replicas() <= 1 || watcher_->Confirmed()) return true;
  // etcd answering, but each read slower than the lease (a loaded host): asked again until
  // rpc_timeout_ms; etcd failing, or its map not adopted (refused): at once.
  const auto deadline =
      SteadyClock::now() + std::chrono::milliseconds(std::max(0, options_.rpc_timeout_ms));
  Status r;
  bool slow = false;
  do {
    ++map_refreshes_;
    const auto asked = SteadyClock::now();
    r = watcher_->Refresh();
    if (watcher_->Confirmed()) return true;
    slow = SteadyClock::now() - asked >= std::chrono::milliseconds(cluster::kMapLeaseMs);
  } while (r.ok() && slow && SteadyClock::now() < deadline);
  *s = Status(Code::kUnavailable,
              "cluster '" + address_.name + "': the slot map could not be confirmed within its " +
                  std::to_string(cluster::kMapLeaseMs) + " ms lease (" +
                  (!r.ok() ? r.ToString()
                   : slow  ? "etcd answered slower than that until rpc_timeout_ms, " +
                                std::to_string(options_.rpc_timeout_ms) + " ms"
                          : std::string("the map etcd holds was not adopted")) +
                  "); a GET cannot be trusted without it");
  return false;
}

Status ClusterRouter::Stats(std::string* text) {
  std::shared_ptr<const cluster::SlotMap> map = watcher_->current();
  std::map<std::string, uint64_t> sums;
  std::vector<std::string> order;
  std::ostringstream per;
  uint32_t unreachable = 0;  // listed, not an error: the others' figures stay useful
  for (uint16_t i = 0; i < map->servers().size(); ++i) {
    const uint32_t id = map->servers()[i].id;
    Status s;
    ClientImpl* c = ConnectionTo(*map, i, &s);
    std::string t;
    if (c != nullptr) s = c->Stats(&t);
    if (!s.ok()) {
      per << "server" << id << ".unreachable 1\n";
      ++unreachable;
      continue;
    }
    std::istringstream in(t);
    std::string name, v;
    while (in >> name >> v) {
      per << "server" << id << "." << name << " " << v << "\n";
      if (!Additive(name) || v.empty() || v.size() > 19 ||
          v.find_first_not_of("0123456789") != std::string::npos)
        continue;
      if (!sums.count(name)) order.push_back(name);
      sums[name] += std::stoull(v);
    }
  }
  std::ostringstream out;
  out << "cluster_servers " << map->servers().size() << "\ncluster_servers_unreachable "
      << unreachable << "\ncluster_epoch " << map->epoch() << "\n";
  for (const std::string& name : order) out << name << " " << sums[name] << "\n";
  *text = out.str() + per.str();
  return Status::Ok();
}

Status ClusterRouter::Reconnect() {
  std::vector<uint32_t> ids;
  for (const auto& [id, c] : conns_) ids.push_back(id);
  for (uint32_t id : ids) Drop(id);
  down_until_.clear();
  return watcher_->Refresh();
}

const ClientCounters& ClusterRouter::counters() {
  sum_ = closed_;
  for (const auto& [id, c] : conns_) sum_ += c->counters();
  sum_.redirects = redirects_;
  sum_.map_refreshes = map_refreshes_;
  sum_.abandoned_waits = abandoned_waits_;
  return sum_;
}

}  // namespace rkv
