// SPDX-License-Identifier: Apache-2.0
// import_probe: begins an import on a server and walks away, as a migration source that died
// mid-copy (or a process with the cluster's token and bad intent) would: the abandoned-import
// case of tests/integration/cluster.sh (server/cluster/import_sweeper.h).
//   import_probe --cluster=etcd://H:P/NAME --server=HOST:PORT [--keys=N]
// It reads the slot map, picks a slot the server holds no replica of, and puts NAME/migration:
// a COPY of that slot to the server, as a coordinator would (no migration may be under way),
// from a source id no server has (the probe plays the source).
// It sends the server a MIGRATE_BEGIN with another nonce (refused: INVALID_ARGUMENT, the
// record's nonce is the only one taken), one naming the slot twice (BAD_REQUEST), then the
// right one, N MIGRATE_PUTs of keys of that slot, closes the connection with no commit, and
// marks the record FAILED (the coordinator's cancellation of a source that died).
// Prints `import_probe: slot S on server ID: N keys imported ...`; exit 0 when every step was
// answered as expected, 1 otherwise, 2 on a setup failure.
#include <gflags/gflags.h>

#include <cstdio>
#include <memory>
#include <string>

#include "client/client_impl.h"
#include "common/cluster/cluster_address.h"
#include "common/cluster/migration_record.h"
#include "common/cluster/slot_map.h"
#include "common/etcd/etcd_client.h"
#include "common/wire.h"
#include "tests/integration/read_slot_map.h"

DEFINE_string(cluster, "", "etcd://HOST:PORT/NAME");
DEFINE_string(server, "", "HOST:PORT of the server to begin the import on");
DEFINE_int32(keys, 200, "MIGRATE_PUTs sent after the MIGRATE_BEGIN");

namespace {
int Setup(const std::string& what, const rkv::Status& s) {
  std::fprintf(stderr, "import_probe: %s: %s\n", what.c_str(), s.ToString().c_str());
  return 2;
}
std::string Nonce(uint64_t n) {
  std::string v;
  for (int b = 0; b < 8; ++b) v.push_back(char((n >> (8 * b)) & 0xff));
  return v;
}
std::string SlotList(uint32_t slot, int times) {
  std::string k;
  for (int t = 0; t < times; ++t)
    for (int b = 0; b < 4; ++b) k.push_back(char((slot >> (8 * b)) & 0xff));
  return k;
}
}  // namespace

int main(int argc, char** argv) {
  gflags::ParseCommandLineFlags(&argc, &argv, true);
  rkv::cluster::SlotMap map;
  rkv::Status s = rkv::integration::ReadSlotMap(FLAGS_cluster, &map);
  if (!s.ok()) return Setup("setup", s);
  const size_t colon = FLAGS_server.rfind(':');
  if (colon == std::string::npos) return Setup("--server", rkv::Status(rkv::Code::kBadRequest, ""));
  const std::string host = FLAGS_server.substr(0, colon);
  const uint16_t port = uint16_t(std::stoi(FLAGS_server.substr(colon + 1)));
  const rkv::cluster::ServerEntry* me = nullptr;
  for (const rkv::cluster::ServerEntry& e : map.servers())
    if (e.host == host && e.port == port) me = &e;
  if (me == nullptr) return Setup("the map does not name " + FLAGS_server, rkv::Status());
  const uint16_t idx = map.IndexOf(me->id);
  uint32_t slot = map.num_slots();
  for (uint32_t v = 0; v < map.num_slots() && slot == map.num_slots(); ++v) {
    bool held = false;
    for (uint16_t r = 0; r < map.replicas(); ++r) held = held || map.OwnerIndex(v, r) == idx;
    if (!held) slot = v;
  }
  if (slot == map.num_slots()) return Setup("the server holds every slot", rkv::Status());
  // The record a coordinator would put.
  rkv::cluster::ClusterAddress address;
  s = rkv::cluster::ParseClusterAddress(FLAGS_cluster, &address);
  rkv::EtcdSettings settings;
  settings.endpoints = address.endpoints;
  std::unique_ptr<rkv::EtcdClient> etcd;
  if (s.ok()) s = rkv::EtcdClient::Open(settings, &etcd);
  if (!s.ok()) return Setup("etcd", s);
  rkv::cluster::MigrationRecord rec;
  rec.kind = map.replicas() > 1 ? rkv::cluster::MigrationRecord::kAddReplica
                                : rkv::cluster::MigrationRecord::kMove;
  rec.nonce = 0x5eed0000u + slot;
  rec.to_id = me->id;
  // A source no server is (a live one's migrator would run the record itself): the probe.
  rec.from_id = 0x7fffffff;
  rec.slots = {slot};
  s = etcd->Put(address.Prefix() + "migration", rec.Encode());
  if (!s.ok()) return Setup("putting the migration record", s);
  rkv::Options o;
  o.location_cache_entries = 0;
  auto raw = std::make_unique<rkv::ClientImpl>(host, port, o);
  s = raw->Open();
  if (!s.ok()) return Setup("connecting to " + FLAGS_server, s);
  std::string reply;
  rkv::Status forged =
      raw->Call(rkv::wire::Op::kMigrateBegin, SlotList(slot, 1), Nonce(rec.nonce + 1), &reply);
  rkv::Status twice =
      raw->Call(rkv::wire::Op::kMigrateBegin, SlotList(slot, 2), Nonce(rec.nonce), &reply);
  s = raw->Call(rkv::wire::Op::kMigrateBegin, SlotList(slot, 1), Nonce(rec.nonce), &reply);
  if (!s.ok()) {
    std::printf("import_probe: MIGRATE_BEGIN of slot %u refused: %s\n", slot, s.ToString().c_str());
    return 1;
  }
  int put = 0;
  for (int i = 0; put < FLAGS_keys && i < 100 * FLAGS_keys * int(map.num_slots()); ++i) {
    const std::string k = "abandoned-" + std::to_string(i);
    if (map.SlotOf(k) != slot) continue;
    s = raw->Call(rkv::wire::Op::kMigratePut, k, "partial copy", &reply);
    if (!s.ok()) {
      std::printf("import_probe: MIGRATE_PUT %s refused: %s\n", k.c_str(), s.ToString().c_str());
      return 1;
    }
    ++put;
  }
  raw.reset();  // walks away: the connection closes
  rec.state = rkv::cluster::MigrationRecord::kFailed;
  s = etcd->Put(address.Prefix() + "migration", rec.Encode());
  if (!s.ok()) return Setup("marking the migration record FAILED", s);
  std::printf(
      "import_probe: slot %u on server %u: %d keys imported, record FAILED; a BEGIN with "
      "another nonce: %s; one naming the slot twice: %s\n",
      slot, me->id, put, forged.ToString().c_str(), twice.ToString().c_str());
  return forged.code() == rkv::Code::kInvalidArgument && twice.code() == rkv::Code::kBadRequest &&
                 put == FLAGS_keys
             ? 0
             : 1;
}
