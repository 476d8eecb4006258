// SPDX-License-Identifier: Apache-2.0
// kvctl: shell access to a kvserver (docs/kvctl.md).
//   kvctl --server=ADDR:PORT get KEY            writes the value to stdout; exit 1 if not found
//   kvctl --server=ADDR:PORT put KEY [VALUE]    value from the argument, or stdin if absent
//   kvctl --server=ADDR:PORT del KEY            exit 1 if not found
//   kvctl --server=ADDR:PORT stats [--json]     server counters
//   kvctl --server=ADDR:PORT info [--json]      every connection parameter, both QPs
//   kvctl --server=ADDR:PORT check              the validator, without connecting a data QP
//   kvctl --server=ADDR:PORT snapshot           asks a durable server for a snapshot and waits
//                                               for it (--snapshot_wait_s); prints its figures
//   kvctl --server=etcd://H:P/NAME cluster init [--slots=N] [--replicas=R] | status [--json]
//                                               a cluster's state in etcd (cluster_commands.h)
// A shell tool: quiet on success (logs only with -v), values byte-exact both ways (`get` adds a
// newline only when stdout is a terminal; `put` reads stdin as bytes), errors one line on
// stderr. Connection flags (--exchange=cm|tcp|file|etcd, --path_mtu, --psn, ...):
// common/verbs/conn_flags.cc.
// Exit status: 0 OK; 1 NOT_FOUND (get, del) or a broken rule (check); 2 any other error (bad
// usage, cannot connect, refused by the server, reading stdin or writing stdout failed).
#include <gflags/gflags.h>
#include <glog/logging.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <iostream>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "common/auth.h"
#include "common/cli/flag_check.h"
#include "common/cli/usage.h"
#include "common/cluster/cluster_address.h"
#include "common/verbs/conn_flags.h"
#include "common/verbs/conn_params.h"
#include "common/wire.h"
#include "rkv/client.h"
#include "tools/kvctl/cluster_commands.h"
#include "tools/kvctl/json_output.h"
#include "tools/kvctl/usage.h"

DEFINE_string(server, "127.0.0.1:7470", "kvserver address ADDR:PORT");
DEFINE_string(auth_token_file, "",
              "file holding the server's token (kvserver --auth_token_file); needed when the "
              "server requires authentication. Must not be accessible by group or others");
DEFINE_int32(timeout_ms, 5000, "connect and RPC timeout");
DEFINE_int32(wait_ms, 600000,
             "cluster rebalance|remove: how long to wait for the coordinator's answer");
DEFINE_int32(snapshot_wait_s, 600, "snapshot: how long to wait for it to finish");
DEFINE_bool(json, false, "stats, info: print one JSON object instead of text");
DEFINE_bool(verbose, false, "log what the client library does on stderr (also -v)");
DEFINE_int32(slots, 16384,
             "cluster init: hash slots of the new cluster (a power of two, 1..65536)");
DEFINE_int32(replicas, 1,
             "cluster init: copies of each slot (1..3): a primary and R-1 synchronous backups");

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
  std::cerr << "usage: kvctl [-v] --server=ADDR:PORT get KEY | put KEY [VALUE] | del KEY | "
               "stats [--json] | info [--json] | check | snapshot\n"
               "       kvctl --server=etcd://HOST:PORT/NAME cluster init [--slots=N] "
               "[--replicas=R] | cluster status [--json] | cluster rebalance | cluster remove "
               "ADDR:PORT\n";
  return 2;
}

// Writes all of `data` to stdout; false (errno set) if it could not.
bool WriteStdout(const char* data, size_t n) {
  while (n > 0) {
    const ssize_t w = ::write(STDOUT_FILENO, data, n);
    if (w < 0) {
      if (errno == EINTR) continue;
      return false;
    }
    data += w;
    n -= size_t(w);
  }
  return true;
}
int Print(const std::string& text) {
  if (WriteStdout(text.data(), text.size())) return 0;
  std::cerr << "kvctl: write(stdout): " << std::strerror(errno) << "\n";
  return 2;
}

// Reads stdin as bytes, at most `limit` of them; 1 if there are more, 2 on a read error.
int ReadStdin(size_t limit, std::string* out) {
  out->clear();
  char buf[65536];
  for (;;) {
    const ssize_t r = ::read(STDIN_FILENO, buf, sizeof buf);
    if (r < 0) {
      if (errno == EINTR) continue;
      std::cerr << "kvctl: read(stdin): " << std::strerror(errno) << "\n";
      return 2;
    }
    if (r == 0) return 0;
    if (out->size() + size_t(r) > limit) {
      std::cerr << "kvctl: the value on stdin is larger than the server's limit of " << limit
                << " bytes\n";
      return 2;
    }
    out->append(buf, size_t(r));
  }
}

// The command line split: flags (for gflags) and the command with its words. Flags come before
// the command; after get/put/del every word is KEY or VALUE taken literally (a value may start
// with '-': `kvctl put n -5`; a "--" right after the command is skipped); after the other
// commands, which take no words, flags may follow too (`kvctl stats --json`). A bare -v means
// --verbose (glog's own -v takes a number).
struct CommandLine {
  std::vector<char*> flags;  // argv[0] and the flag arguments, for gflags
  std::string cmd;
  std::vector<std::string> words;  // what follows the command
};
bool TakesSeparateValue(const std::string& arg) {
  if (arg.find('=') != std::string::npos) return false;
  const std::string name = arg.substr(arg[1] == '-' ? 2 : 1);
  gflags::CommandLineFlagInfo info;
  return gflags::GetCommandLineFlagInfo(name.c_str(), &info) && info.type != "bool";
}
CommandLine SplitCommandLine(int argc, char** argv) {
  static char verbose[] = "--verbose";
  CommandLine c;
  c.flags.push_back(argv[0]);
  bool literal = false;  // after get/put/del, or after a "--"
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (!literal && a == "--") {
      literal = c.cmd.empty() || c.cmd == "get" || c.cmd == "put" || c.cmd == "del";
      if (!c.cmd.empty()) continue;
      // Before the command: the next word is the command, then words.
      if (++i >= argc) break;
      c.cmd = argv[i];
      continue;
    }
    if (!literal && a.size() >= 2 && a[0] == '-') {
      c.flags.push_back(a == "-v" ? verbose : argv[i]);
      if (a != "-v" && TakesSeparateValue(a) && i + 1 < argc) c.flags.push_back(argv[++i]);
      continue;
    }
    if (c.cmd.empty()) {
      c.cmd = a;
      literal = a == "get" || a == "put" || a == "del";
      if (literal && i + 1 < argc && std::strcmp(argv[i + 1], "--") == 0) ++i;
      continue;
    }
    c.words.push_back(a);
  }
  return c;
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
  return Print("snapshot taken: " + std::to_string(Counter(now, "snapshot_last_entries")) +
               " entries, " + std::to_string(Counter(now, "snapshot_last_bytes")) + " bytes, " +
               std::to_string(Counter(now, "snapshot_last_ms")) + " ms\n");
}
}  // namespace

int main(int argc, char** argv) {
  rkv::cli::EnsureStandardFds();
  gflags::SetUsageMessage(
      "kvctl [-v] --server=ADDR:PORT get|put|del|stats|info|check|snapshot [KEY [VALUE]]");
  CommandLine line = SplitCommandLine(argc, argv);
  int flag_argc = int(line.flags.size());
  char** flag_argv = line.flags.data();
  if (int rc = 0;
      rkv::cli::HandleHelpOrVersion(flag_argc, flag_argv, rkv::kvctl::KvctlUsage(), &rc))
    return rc;
  if (std::string bad = rkv::cli::PrecheckFlags(flag_argc, flag_argv); !bad.empty()) {
    std::cerr << "kvctl: " << bad << "\n";
    return 2;
  }
  gflags::ParseCommandLineFlags(&flag_argc, &flag_argv, true);
  FLAGS_logtostderr = true;
  // Quiet on success: the library's INFO and WARNING lines only with -v (an error is reported
  // once, by the status kvctl prints).
  FLAGS_minloglevel = FLAGS_verbose ? google::GLOG_INFO : google::GLOG_ERROR;
  if (FLAGS_verbose && FLAGS_v < 1) FLAGS_v = 1;  // the library's connection details
  google::InitGoogleLogging(argv[0]);
  const std::string& cmd = line.cmd;
  const std::vector<std::string>& words = line.words;
  if (cmd.empty()) return Usage();
  const size_t want = (cmd == "get" || cmd == "put" || cmd == "del") ? 1 : 0;
  if (cmd != "get" && cmd != "put" && cmd != "del" && cmd != "stats" && cmd != "info" &&
      cmd != "check" && cmd != "snapshot" && cmd != "cluster")
    return Usage();
  if (cmd != "cluster" && (words.size() < want || words.size() > (cmd == "put" ? 2u : want)))
    return Usage();
  if (FLAGS_json && cmd != "stats" && cmd != "info" && cmd != "cluster") {
    std::cerr << "kvctl: --json applies to stats, info and cluster status\n";
    return 2;
  }
  const bool cluster_address = rkv::cluster::IsClusterAddress(FLAGS_server);
  if (cmd == "cluster" && !cluster_address) {
    std::cerr << "kvctl: cluster commands take --server=etcd://HOST:PORT[,HOST:PORT]/NAME\n";
    return 2;
  }
  if (cluster_address && (cmd == "info" || cmd == "check" || cmd == "snapshot")) {
    std::cerr << "kvctl: " << cmd
              << " is per server: give a server's ADDR:PORT (kvctl cluster status lists them)\n";
    return 2;
  }

  rkv::Options opt;
  opt.connect_timeout_ms = FLAGS_timeout_ms;
  opt.rpc_timeout_ms = FLAGS_timeout_ms;
  rkv::Status s = rkv::ConnFlags(rkv::Role::kClient, &opt.exchange, &opt.qp);
  if (!s.ok()) return Report(s);
  if (!FLAGS_auth_token_file.empty()) {
    s = rkv::auth::LoadTokenFile(FLAGS_auth_token_file, &opt.auth_token);
    if (!s.ok()) return Report(s);
  }
  if (cmd == "cluster") {
    rkv::kvctl::ClusterArgs a;
    s = rkv::cluster::ParseClusterAddress(FLAGS_server, &a.address);
    if (!s.ok()) return Report(s);
    a.etcd.cacert = opt.exchange.etcd_cacert;
    a.etcd.cert = opt.exchange.etcd_cert;
    a.etcd.key = opt.exchange.etcd_key;
    a.etcd.user = opt.exchange.etcd_user;
    a.etcd.password_file = opt.exchange.etcd_password_file;
    a.words = words;
    a.wait_ms = FLAGS_wait_ms;
    if (FLAGS_wait_ms < 1) {
      std::cerr << "kvctl: --wait_ms must be positive\n";
      return 2;
    }
    if (FLAGS_slots < 1 || FLAGS_replicas < 1) {
      std::cerr << "kvctl: --slots and --replicas must be positive\n";
      return 2;
    }
    a.slots = uint32_t(FLAGS_slots);
    a.replicas = uint32_t(FLAGS_replicas);
    a.json = FLAGS_json;
    return rkv::kvctl::RunClusterCommand(a);
  }
  if (cmd == "check") {
    std::string report;
    s = rkv::CheckConnection(FLAGS_server, opt, &report);
    if (Print(report) != 0) return 2;
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
    s = client->Get(words[0], &v);
    if (!s.ok()) return Report(s);
    // Exact bytes into a pipe or file; a terminal gets a final newline.
    if (isatty(STDOUT_FILENO) && (v.empty() || v.back() != '\n')) v += '\n';
    return Print(v);
  }
  if (cmd == "put") {
    std::string v;
    if (words.size() == 2) {
      v = words[1];
    } else {
      // Bounded by the server's limit (one byte more is refused here, not after reading a
      // stream without end).
      // Through a cluster no server is asked before the PUT: the protocol's own limit applies.
      const uint32_t limit = client->server_info().max_value_size != 0
                                 ? client->server_info().max_value_size
                                 : rkv::wire::kMaxValueSize;
      const int rc = ReadStdin(limit, &v);
      if (rc != 0) return rc;
    }
    return Report(client->Put(words[0], v));
  }
  if (cmd == "del") return Report(client->Delete(words[0]));
  if (cmd == "stats") {
    std::string text;
    s = client->Stats(&text);
    if (!s.ok()) return Report(s);
    return Print(FLAGS_json ? rkv::kvctl::StatsJson(text) : text);
  }
  if (cmd == "snapshot") return Snapshot(client.get());
  const rkv::ServerInfo& i = client->server_info();
  if (FLAGS_json) return Print(rkv::kvctl::InfoJson(i));
  std::ostringstream out;
  out << "exchange " << rkv::ExchangeName(i.exchange) << "\ndevice " << i.device << "\nport "
      << int(i.port) << "\nlink_layer " << i.link_layer << "\ngid_index " << i.gid_index
      << "\nqp_num " << i.qp_num << "\npath_mtu " << i.path_mtu << "\nprotocol_version "
      << i.protocol_version << "\ninstance_id " << i.instance_id << "\nregion_addr 0x" << std::hex
      << i.region_addr << std::dec << "\nrkey 0x" << std::hex << i.rkey << std::dec
      << "\nregion_size " << i.region_size << "\nnum_buckets " << i.num_buckets
      << "\noverflow_slots " << i.overflow_slots << "\nhash_seed 0x" << std::hex << i.hash_seed
      << std::dec << "\nmax_key_size " << i.max_key_size << "\nmax_value_size " << i.max_value_size
      << "\n\n"
      << "# every connection parameter, read back from both QPs (local: this client, "
         "peer: the server)\n"
      << rkv::FormatParamTable(i.local, i.peer) << "# " << rkv::kMemoryRowsNote << "\n";
  if (!i.mtu_note.empty()) out << "# " << i.mtu_note << "\n";
  return Print(out.str());
}
