// kvctl: shell access to a kvserver.
//   kvctl --server=ADDR:PORT get KEY            prints the value; exit 1 if not found
//   kvctl --server=ADDR:PORT put KEY [VALUE]    value from the argument, or stdin if absent
//   kvctl --server=ADDR:PORT del KEY            exit 1 if not found
//   kvctl --server=ADDR:PORT stats              server counters
//   kvctl --server=ADDR:PORT info               every connection parameter, both QPs
//   kvctl --server=ADDR:PORT check              the validator, without connecting a data QP
//   kvctl --server=ADDR:PORT snapshot           asks a durable server for a snapshot and waits
//                                               for it (--snapshot_wait_s); prints its figures
// Connection flags (--exchange=cm|tcp|file|etcd, --path_mtu, --psn, ...):
// common/verbs/conn_flags.cc. Exit status: 0 OK, 1 NOT_FOUND (get/del) or a broken rule (check), 2
// any other error.
#include <gflags/gflags.h>
#include <glog/logging.h>

#include <chrono>
#include <cstdlib>
#include <iostream>
#include <iterator>
#include <sstream>
#include <string>
#include <thread>

#include "common/auth.h"
#include "common/verbs/conn_flags.h"
#include "common/verbs/conn_params.h"
#include "rkv/client.h"

DEFINE_string(server, "127.0.0.1:7470", "kvserver address ADDR:PORT");
DEFINE_string(auth_token_file, "",
              "file holding the server's token (kvserver --auth_token_file); needed when the "
              "server requires authentication. Must not be accessible by group or others");
DEFINE_int32(timeout_ms, 5000, "connect and RPC timeout");
DEFINE_int32(snapshot_wait_s, 600, "snapshot: how long to wait for it to finish");

namespace {
int Report(const rkv::Status& s) {
  if (s.ok()) return 0;
  if (s.IsNotFound()) {
    std::cerr << "NOT_FOUND\n";
    return 1;
  }
  std::cerr << "kvctl: " << s.ToString() << "\n";
  return 2;
}
int Usage() {
  std::cerr
      << "usage: kvctl --server=ADDR:PORT get KEY | put KEY [VALUE] | del KEY | stats | info | "
         "check | snapshot\n";
  return 2;
}
// The server's counter `name` (0 if absent).
uint64_t Counter(const std::string& stats, const std::string& name) {
  std::istringstream in(stats);
  std::string line;
  while (std::getline(in, line)) {
    if (line.size() > name.size() && line.compare(0, name.size(), name) == 0 &&
        line[name.size()] == ' ')
      return std::strtoull(line.c_str() + name.size() + 1, nullptr, 10);
  }
  return 0;
}

// Asks for a snapshot, then watches the stats until it (or one already running, then ours)
// finished.
int Snapshot(rkv::Client* client) {
  std::string before, message;
  rkv::Status s = client->Stats(&before);
  if (!s.ok()) return Report(s);
  const uint64_t done0 = Counter(before, "snapshots_taken") + Counter(before, "snapshots_failed");
  const uint64_t need = Counter(before, "snapshot_running") ? 2 : 1;
  s = client->RequestSnapshot(&message);
  if (!s.ok()) return Report(s);
  const auto deadline =
      std::chrono::steady_clock::now() + std::chrono::seconds(FLAGS_snapshot_wait_s);
  std::string now;
  for (;;) {
    s = client->Stats(&now);
    if (!s.ok()) return Report(s);
    if (Counter(now, "snapshots_taken") + Counter(now, "snapshots_failed") >= done0 + need) break;
    if (std::chrono::steady_clock::now() > deadline) {
      std::cerr << "kvctl: snapshot did not finish within " << FLAGS_snapshot_wait_s << " s\n";
      return 2;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  if (Counter(now, "snapshots_failed") > Counter(before, "snapshots_failed")) {
    std::cerr << "kvctl: snapshot failed (kvserver's log says why; the log files are kept)\n";
    return 2;
  }
  std::cout << "snapshot taken: " << Counter(now, "snapshot_last_entries") << " entries, "
            << Counter(now, "snapshot_last_bytes") << " bytes, " << Counter(now, "snapshot_last_ms")
            << " ms\n";
  return 0;
}
}  // namespace

int main(int argc, char** argv) {
  gflags::SetUsageMessage("kvctl --server=ADDR:PORT get|put|del|stats|info [KEY [VALUE]]");
  gflags::ParseCommandLineFlags(&argc, &argv, true);
  FLAGS_logtostderr = true;
  google::InitGoogleLogging(argv[0]);
  if (argc < 2) return Usage();
  std::string cmd = argv[1];
  size_t want = cmd == "put" ? 3 : (cmd == "get" || cmd == "del") ? 3 : 2;
  if (cmd != "get" && cmd != "put" && cmd != "del" && cmd != "stats" && cmd != "info" &&
      cmd != "check" && cmd != "snapshot")
    return Usage();
  if (size_t(argc) < want || size_t(argc) > (cmd == "put" ? 4u : want)) return Usage();

  rkv::Options opt;
  opt.connect_timeout_ms = FLAGS_timeout_ms;
  opt.rpc_timeout_ms = FLAGS_timeout_ms;
  rkv::Status s = rkv::ConnFlags(rkv::Role::kClient, &opt.exchange, &opt.qp);
  if (!s.ok()) return Report(s);
  if (!FLAGS_auth_token_file.empty()) {
    s = rkv::auth::LoadTokenFile(FLAGS_auth_token_file, &opt.auth_token);
    if (!s.ok()) return Report(s);
  }
  if (cmd == "check") {
    std::string report;
    s = rkv::CheckConnection(FLAGS_server, opt, &report);
    std::cout << report;
    if (s.code() == rkv::Code::kParamMismatch) {
      std::cerr << "kvctl: " << s.ToString() << "\n";
      return 1;
    }
    return Report(s);
  }
  std::unique_ptr<rkv::Client> client;
  s = rkv::Client::Connect(FLAGS_server, opt, &client);
  if (!s.ok()) return Report(s);
  if (cmd == "get") {
    std::string v;
    s = client->Get(argv[2], &v);
    if (s.ok()) std::cout << v << (v.empty() || v.back() != '\n' ? "\n" : "");
    return Report(s);
  }
  if (cmd == "put") {
    std::string v;
    if (argc == 4) {
      v = argv[3];
    } else {
      v.assign(std::istreambuf_iterator<char>(std::cin), std::istreambuf_iterator<char>());
    }
    return Report(client->Put(argv[2], v));
  }
  if (cmd == "del") return Report(client->Delete(argv[2]));
  if (cmd == "stats") {
    std::string text;
    s = client->Stats(&text);
    if (s.ok()) std::cout << text;
    return Report(s);
  }
  if (cmd == "snapshot") return Snapshot(client.get());
  const rkv::ServerInfo& i = client->server_info();
  std::cout << "exchange " << rkv::ExchangeName(i.exchange) << "\ndevice " << i.device << "\nport "
            << int(i.port) << "\nlink_layer " << i.link_layer << "\ngid_index " << i.gid_index
            << "\nqp_num " << i.qp_num << "\npath_mtu " << i.path_mtu << "\nprotocol_version "
            << i.protocol_version << "\ninstance_id " << i.instance_id << "\nregion_addr 0x"
            << std::hex << i.region_addr << std::dec << "\nrkey 0x" << std::hex << i.rkey
            << std::dec << "\nregion_size " << i.region_size << "\nnum_buckets " << i.num_buckets
            << "\noverflow_slots " << i.overflow_slots << "\nhash_seed 0x" << std::hex
            << i.hash_seed << std::dec << "\nmax_key_size " << i.max_key_size << "\nmax_value_size "
            << i.max_value_size << "\n\n"
            << "# every connection parameter, read back from both QPs (local: this client, "
               "peer: the server)\n"
            << rkv::FormatParamTable(i.local, i.peer);
  if (!i.mtu_note.empty()) std::cout << "# " << i.mtu_note << "\n";
  return 0;
}
