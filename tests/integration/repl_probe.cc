// SPDX-License-Identifier: Apache-2.0
// repl_probe: sends a backup a REPLICATE request that must be refused (bad-input cases of
// tests/integration/replicas.sh; the rules in server/rpc_executor_replication.cc).
//   repl_probe --cluster=etcd://H:P/NAME
//     --test_case=old_epoch|forged|gap|old_sequence|not_backup|short|bad_digest|elsewhere
// It reads the slot map, picks a key whose slot has a primary and a backup, writes it through
// the cluster (value "v1"), then sends one REPLICATE for that key with value "forged" as the
// case says (old_epoch: epoch 1; forged: the backup's own id as sender; gap: a sequence far
// ahead; old_sequence: sequence 1, long applied, with another write's digest; not_backup: to
// the primary; short: a key shorter than the header; bad_digest: a digest that does not match)
// and reads the key back through the cluster. Every case connects from the primary's
// registered address (Options::local_address; forged: from the backup's, the id it names), so
// the backup's later checks are reached;
// elsewhere: from another server's address (a process that has the token but is not the
// primary), refused for its address whatever the rest of the message says.
// Prints `repl_probe: CASE: reply CODE: message; value intact|CHANGED`; exit 0 when the reply
// is the expected refusal and the value is intact, 1 otherwise, 2 on a setup failure, 3 when
// the case cannot be made here (elsewhere: every server registered the same address).
// query, query_forged, query_short, query_slot: REPLICATE kind QUERY to the backup (Query
// below); query must be answered with the key's last write, the others refused.
// ring_grant: RING_GRANT requests to the backup (RingGrant below): a short request, writer 0,
// a writer named from another server's address, an epoch this backup has not applied, then a
// valid grant (as the primary, from its address) and a second one on the same connection. Each
// must get its refusal and the valid one a ring; against servers with
// --replication_rings=false every request is refused as such ("rings off" is printed).
//   repl_probe --cluster=... --test_case=ring_loss  (R = 2, backups taking log rings)
// makes a backup refuse a log ring record after its primary was told it was placed: picks a
// key K whose slot has a primary P and a backup B, writes "v1" through the cluster, sends B, as
// P, a REPLICATE of "forged" for K at the next number there, then PUTs "acked" through the
// cluster (asked again until it succeeds): P's ring record at that number is refused by B,
// which marks the slot and must report it (NAME/ringloss/). Prints
// `repl_probe: ring_loss: K=KEY slot=S P=HOST:PORT B=HOST:PORT`; exit 0, or 2 on a failure.
//   repl_probe --cluster=... --test_case=diverge --primary=HOST:PORT  (R = 3)
// makes the replicas of two slots differ as a primary that failed mid-write leaves them: picks
// keys A and B of slots whose primary is --primary and whose backups X (replica 1) and Y
// (replica 2) are the same, writes "v1" to both through the cluster, then sends, as the
// primary, a REPLICATE of "diverged" for A to Y only and for B to X only (each at the next
// sequence number there, found by trying 1, 2, ...). Prints
// `repl_probe: diverge: A=KEY B=KEY X=HOST:PORT Y=HOST:PORT`; exit 0, or 2 on a failure.
#include <gflags/gflags.h>

#include <chrono>
#include <cstdio>
#include <cstring>
#include <memory>
#include <string>
#include <thread>

#include "client/client_impl.h"
#include "common/cluster/slot_map.h"
#include "common/wire.h"
#include "rkv/client.h"
#include "tests/integration/read_slot_map.h"

DEFINE_string(cluster, "", "etcd://HOST:PORT/NAME of a replicated cluster");
DEFINE_string(primary, "", "diverge: HOST:PORT of the primary whose slots to use");
DEFINE_string(
    test_case, "",
    "old_epoch | forged | gap | old_sequence | not_backup | short | bad_digest | "
    "elsewhere | query | query_forged | query_short | query_slot | ring_grant | ring_loss | "
    "diverge");

namespace {
int Setup(const std::string& what, const rkv::Status& s) {
  std::fprintf(stderr, "repl_probe: %s: %s\n", what.c_str(), s.ToString().c_str());
  return 2;
}
// One REPLICATE of `value` for `key` from `primary` to `to`, at the next sequence number there.
rkv::Status ForgeNext(const rkv::cluster::SlotMap& map, const rkv::cluster::ServerEntry& primary,
                      const rkv::cluster::ServerEntry& to, const std::string& key,
                      const std::string& value) {
  rkv::Options o;
  o.location_cache_entries = 0;
  o.local_address = primary.host;  // the sender's registered address
  rkv::ClientImpl raw(to.host, to.port, o);
  rkv::Status s = raw.Open();
  if (!s.ok()) return s;
  for (uint64_t seq = 1; seq <= 100000; ++seq) {
    rkv::wire::ReplicateHeader h{};
    h.epoch = map.epoch();
    h.sequence = seq;
    h.sender_id = primary.id;
    h.kind = rkv::wire::kReplicatePut;
    h.digest = rkv::wire::ReplicateDigest(h.kind, key, value);
    std::string msg(sizeof h, '\0');
    std::memcpy(msg.data(), &h, sizeof h);
    msg += key;
    std::string reply;
    s = raw.Call(rkv::wire::Op::kReplicate, msg, value, &reply);
    if (s.ok()) return s;
    if (s.code() != rkv::Code::kInvalidArgument ||
        s.message().find("is not the next one") == std::string::npos)
      return s;
  }
  return rkv::Status(rkv::Code::kNotFound, "no sequence number accepted");
}

int Diverge(const rkv::cluster::SlotMap& map) {
  using rkv::cluster::ServerEntry;
  const ServerEntry* p = nullptr;
  for (const ServerEntry& e : map.servers())
    if (e.host + ":" + std::to_string(e.port) == FLAGS_primary) p = &e;
  if (p == nullptr || map.replicas() != 3)
    return Setup("diverge", rkv::Status(rkv::Code::kInvalidArgument,
                                        "--primary is no server of an R=3 map: " + FLAGS_primary));
  std::string a, b;
  const ServerEntry *x = nullptr, *y = nullptr;
  for (int i = 0; i < 100000 && b.empty(); ++i) {
    const std::string k = "probe-diverge-" + std::to_string(i);
    const uint32_t slot = map.SlotOf(k);
    const ServerEntry* o0 = map.Owner(slot, 0);
    const ServerEntry* o1 = map.Owner(slot, 1);
    const ServerEntry* o2 = map.Owner(slot, 2);
    if (o0 == nullptr || o0->id != p->id || o1 == nullptr || o2 == nullptr) continue;
    if (a.empty()) {
      a = k;
      x = o1;
      y = o2;
    } else if (o1->id == x->id && o2->id == y->id && slot != map.SlotOf(a)) {
      b = k;
    }
  }
  if (b.empty()) return Setup("diverge", rkv::Status(rkv::Code::kNotFound, "no two such slots"));
  std::unique_ptr<rkv::Client> cl;
  rkv::Status s = rkv::Client::Connect(FLAGS_cluster, rkv::Options(), &cl);
  if (s.ok()) s = cl->Put(a, "v1");
  if (s.ok()) s = cl->Put(b, "v1");
  if (!s.ok()) return Setup("writing through the cluster", s);
  s = ForgeNext(map, *p, *y, a, "diverged");
  if (!s.ok()) return Setup("forging A's write to Y", s);
  s = ForgeNext(map, *p, *x, b, "diverged");
  if (!s.ok()) return Setup("forging B's write to X", s);
  std::printf("repl_probe: diverge: A=%s B=%s X=%s:%u Y=%s:%u\n", a.c_str(), b.c_str(),
              x->host.c_str(), x->port, y->host.c_str(), y->port);
  return 0;
}
int RingLoss(const rkv::cluster::SlotMap& map) {
  std::string k;
  for (int i = 0; i < 100000 && k.empty(); ++i) {
    const std::string c = "probe-ring_loss-" + std::to_string(i);
    const uint32_t slot = map.SlotOf(c);
    if (map.Owner(slot, 0) != nullptr && map.Owner(slot, 1) != nullptr) k = c;
  }
  if (k.empty()) return Setup("ring_loss", rkv::Status(rkv::Code::kNotFound, "no such slot"));
  const uint32_t slot = map.SlotOf(k);
  const rkv::cluster::ServerEntry& p = *map.Owner(slot, 0);
  const rkv::cluster::ServerEntry& b = *map.Owner(slot, 1);
  std::unique_ptr<rkv::Client> cl;
  rkv::Status s = rkv::Client::Connect(FLAGS_cluster, rkv::Options(), &cl);
  // Several writes first: a two-sided one makes the primary's link read the backup's ring
  // control block (its applied epoch), so the write after the forgery can go to the ring.
  for (int i = 0; i < 10 && s.ok(); ++i) {
    s = cl->Put(k, "v1");
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  if (!s.ok()) return Setup("writing through the cluster", s);
  s = ForgeNext(map, p, b, k, "forged");
  if (!s.ok()) return Setup("forging K's write to B", s);
  for (int i = 0; i < 100; ++i) {
    s = cl->Put(k, "acked");
    if (s.ok()) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  if (!s.ok()) return Setup("writing \"acked\" through the cluster", s);
  std::printf("repl_probe: ring_loss: K=%s slot=%u P=%s:%u B=%s:%u\n", k.c_str(), slot,
              p.host.c_str(), p.port, b.host.c_str(), b.port);
  return 0;
}
// The QUERY cases (a promoted primary's question, wire::kReplicateQuery), to the backup: query
// (from the primary, at the map's epoch: answered OK, naming the last write of the slot,
// which is `key`'s "v1"), query_forged (sender: the backup itself, from its own address, so
// that the primary check refuses it: INVALID_ARGUMENT),
// query_short (a 2-byte slot: BAD_REQUEST), query_slot (a slot past the table: BAD_REQUEST).
int Query(const std::string& c, const rkv::cluster::SlotMap& map,
          const rkv::cluster::ServerEntry& primary, const rkv::cluster::ServerEntry& backup,
          uint32_t slot, const std::string& key, rkv::ClientImpl* raw) {
  rkv::wire::ReplicateHeader h{};
  h.epoch = map.epoch();
  h.sender_id = c == "query_forged" ? backup.id : primary.id;
  h.kind = rkv::wire::kReplicateQuery;
  uint32_t s32 = c == "query_slot" ? map.num_slots() + 7 : slot;
  std::string body(reinterpret_cast<const char*>(&s32), sizeof s32);  // little-endian
  if (c == "query_short") body.resize(2);
  h.digest = rkv::wire::ReplicateDigest(h.kind, body, "");
  std::string msg(sizeof h, '\0');
  std::memcpy(msg.data(), &h, sizeof h);
  msg += body;
  std::string reply;
  rkv::Status s = raw->Call(rkv::wire::Op::kReplicate, msg, "", &reply);
  bool ok = false;
  std::string named;
  if (c == "query") {
    rkv::wire::ReplicaLastWrite last{};
    if (s.ok() && reply.size() >= sizeof last) {
      std::memcpy(&last, reply.data(), sizeof last);
      named = reply.substr(sizeof last);
      ok = last.has == 1 && last.key_size == named.size() && named == key &&
           last.digest == rkv::wire::ReplicateDigest(rkv::wire::kReplicatePut, key, "v1");
    }
  } else {
    ok = c == "query_forged" ? s.code() == rkv::Code::kInvalidArgument &&
                                   s.message().find("is not slot") != std::string::npos
                             : s.code() == rkv::Code::kBadRequest;
  }
  std::printf("repl_probe: %s: slot %u to server %u: reply %s%s\n", c.c_str(), slot, backup.id,
              s.ToString().c_str(), named.empty() ? "" : ("; names " + named).c_str());
  return ok ? 0 : 1;
}
// One RING_GRANT request on `raw`; its reply's payload in *reply.
rkv::Status Grant(rkv::ClientImpl* raw, uint64_t epoch, uint32_t writer, size_t size,
                  std::string* reply) {
  rkv::wire::RingGrantRequest g{};
  g.epoch = epoch;
  g.writer_id = writer;
  std::string key(reinterpret_cast<const char*>(&g), sizeof g);
  key.resize(size);
  return raw->Call(rkv::wire::Op::kRingGrant, key, "", reply);
}

int RingGrant(const rkv::cluster::SlotMap& map, const rkv::cluster::ServerEntry& primary,
              const rkv::cluster::ServerEntry& backup) {
  using rkv::Code;
  struct Case {
    const char* name;
    std::string from;  // the connection's local address
    uint64_t epoch;
    uint32_t writer;
    size_t size;
    Code want;
    const char* says;
  };
  const uint64_t e = map.epoch();
  const Case cases[] = {
      {"short request", primary.host, e, primary.id, 8, Code::kInvalidArgument, "16-byte"},
      {"writer 0", primary.host, e, 0, 16, Code::kInvalidArgument, "malformed"},
      {"another server's id", primary.host, e, backup.id, 16, Code::kInvalidArgument,
       "does not come from the address"},
      {"an epoch not applied", primary.host, e + 1000, primary.id, 16, Code::kUnavailable,
       "cannot check"},
  };
  rkv::Options o;
  o.location_cache_entries = 0;
  int bad = 0;
  bool off = false;
  auto check = [&](const std::string& name, const rkv::Status& s, Code want, const char* says) {
    const bool rings_off = s.code() == Code::kInvalidArgument &&
                           s.message().find("takes no log rings") != std::string::npos;
    off = off || rings_off;
    const bool ok =
        rings_off || (s.code() == want && (s.ok() || s.message().find(says) != std::string::npos));
    std::printf("repl_probe: ring_grant: %s: reply %s%s\n", name.c_str(), s.ToString().c_str(),
                ok ? "" : " (UNEXPECTED)");
    if (!ok) ++bad;
  };
  for (const Case& c : cases) {
    if (c.writer == backup.id && backup.host == primary.host) continue;  // one address: no case
    o.local_address = c.from;
    rkv::ClientImpl raw(backup.host, backup.port, o);
    rkv::Status s = raw.Open();
    if (!s.ok()) return Setup("connecting to " + backup.host, s);
    std::string reply;
    check(c.name, Grant(&raw, c.epoch, c.writer, c.size, &reply), c.want, c.says);
  }
  o.local_address = primary.host;
  rkv::ClientImpl raw(backup.host, backup.port, o);
  rkv::Status s = raw.Open();
  if (!s.ok()) return Setup("connecting to " + backup.host, s);
  std::string reply;
  // UNAVAILABLE while the backup applies a map: asked again, as the primary would.
  for (int i = 0; i < 50; ++i) {
    s = Grant(&raw, e, primary.id, 16, &reply);
    if (s.code() != Code::kUnavailable) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  check("as the primary", s, Code::kOk, "");
  if (s.ok()) {
    rkv::wire::RingGrantReply r{};
    if (reply.size() != sizeof r) {
      std::printf("repl_probe: ring_grant: a reply of %zu bytes (UNEXPECTED)\n", reply.size());
      ++bad;
    } else {
      std::memcpy(&r, reply.data(), sizeof r);
      std::printf("repl_probe: ring_grant: ring of %u bytes at grant epoch %llu\n", r.size,
                  static_cast<unsigned long long>(r.epoch));
      if (r.size < 64 * 1024 || r.epoch < e) ++bad;
    }
    check("a second ring on the connection", Grant(&raw, e, primary.id, 16, &reply),
          Code::kInvalidArgument, "holds a log ring already");
  }
  std::printf("repl_probe: ring_grant: %s, %d unexpected\n", off ? "rings off" : "rings on", bad);
  return bad == 0 ? 0 : 1;
}
}  // namespace

int main(int argc, char** argv) {
  gflags::ParseCommandLineFlags(&argc, &argv, true);
  const std::string c = FLAGS_test_case;
  using rkv::Code;
  rkv::cluster::SlotMap map;
  rkv::Status s = rkv::integration::ReadSlotMap(FLAGS_cluster, &map);
  if (!s.ok()) return Setup("setup", s);
  if (c == "diverge") return Diverge(map);
  if (c == "ring_loss") return RingLoss(map);
  std::string key;
  uint32_t slot = 0;
  for (int i = 0; i < 100000 && key.empty(); ++i) {
    const std::string k = "probe-" + c + "-" + std::to_string(i);
    slot = map.SlotOf(k);
    if (map.Owner(slot, 0) != nullptr && map.replicas() > 1 && map.Owner(slot, 1) != nullptr)
      key = k;
  }
  if (key.empty()) return Setup("no slot with a backup", rkv::Status(Code::kNotFound, ""));
  std::unique_ptr<rkv::Client> cl;
  s = rkv::Client::Connect(FLAGS_cluster, rkv::Options(), &cl);
  if (s.ok()) s = cl->Put(key, "v1");
  if (!s.ok()) return Setup("writing " + key + " through the cluster", s);
  const rkv::cluster::ServerEntry& primary = *map.Owner(slot, 0);
  const rkv::cluster::ServerEntry& backup = *map.Owner(slot, 1);
  const rkv::cluster::ServerEntry& to = c == "not_backup" ? primary : backup;
  rkv::Options o;
  o.location_cache_entries = 0;
  // forged: from the address of the server it names (the backup itself), so that the
  // backup's primary check is what refuses it.
  o.local_address = c == "forged" || c == "query_forged" ? backup.host : primary.host;
  if (c == "elsewhere") {
    o.local_address.clear();
    for (const rkv::cluster::ServerEntry& e : map.servers())
      if (e.host != primary.host) o.local_address = e.host;
    if (o.local_address.empty()) {
      std::printf("repl_probe: elsewhere: every server registered %s: not applicable\n",
                  primary.host.c_str());
      return 3;
    }
  }
  rkv::ClientImpl raw(to.host, to.port, o);
  s = raw.Open();
  if (!s.ok()) return Setup("connecting to " + to.host, s);
  if (c == "ring_grant") return RingGrant(map, primary, backup);
  if (c.rfind("query", 0) == 0) return Query(c, map, primary, backup, slot, key, &raw);
  rkv::wire::ReplicateHeader h{};
  h.epoch = c == "old_epoch" ? 1 : map.epoch();
  h.sequence = c == "gap" || c == "forged" || c == "elsewhere" ? uint64_t{1} << 40 : 1;
  h.sender_id = c == "forged" ? backup.id : primary.id;
  h.kind = rkv::wire::kReplicatePut;
  h.digest = rkv::wire::ReplicateDigest(h.kind, key, "forged");
  if (c == "bad_digest") h.digest ^= 1;
  std::string msg(sizeof h, '\0');
  std::memcpy(msg.data(), &h, sizeof h);
  msg += key;
  if (c == "short") msg.resize(10);
  std::string reply;
  s = raw.Call(rkv::wire::Op::kReplicate, msg, "forged", &reply);
  std::string value;
  rkv::Status g = cl->Get(key, &value);
  const bool intact = g.ok() && value == "v1";
  Code want = Code::kInvalidArgument;
  if (c == "short" || c == "bad_digest") want = Code::kBadRequest;
  if (c == "not_backup") want = Code::kUnavailable;
  std::printf("repl_probe: %s: key %s slot %u to server %u: reply %s; value %s\n", c.c_str(),
              key.c_str(), slot, to.id, s.ToString().c_str(),
              intact ? "intact" : ("CHANGED (" + g.ToString() + " " + value + ")").c_str());
  // Refused for its address, not for its (far-ahead) sequence number.
  const bool why = c == "elsewhere"
                       ? s.message().find("does not come from the address") != std::string::npos
                   : c == "forged" ? s.message().find("is not slot") != std::string::npos
                                   : true;
  return s.code() == want && why && intact ? 0 : 1;
}
