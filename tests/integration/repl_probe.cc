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
#include <gflags/gflags.h>

#include <cstdio>
#include <cstring>
#include <memory>
#include <string>

#include "client/client_impl.h"
#include "common/cluster/slot_map.h"
#include "common/wire.h"
#include "rkv/client.h"
#include "tests/integration/read_slot_map.h"

DEFINE_string(cluster, "", "etcd://HOST:PORT/NAME of a replicated cluster");
DEFINE_string(test_case, "",
              "old_epoch | forged | gap | old_sequence | not_backup | short | bad_digest | "
              "elsewhere");

namespace {
int Setup(const std::string& what, const rkv::Status& s) {
  std::fprintf(stderr, "repl_probe: %s: %s\n", what.c_str(), s.ToString().c_str());
  return 2;
}
}  // namespace

int main(int argc, char** argv) {
  gflags::ParseCommandLineFlags(&argc, &argv, true);
  const std::string c = FLAGS_test_case;
  using rkv::Code;
  rkv::cluster::SlotMap map;
  rkv::Status s = rkv::integration::ReadSlotMap(FLAGS_cluster, &map);
  if (!s.ok()) return Setup("setup", s);
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
  o.local_address = c == "forged" ? backup.host : primary.host;
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
