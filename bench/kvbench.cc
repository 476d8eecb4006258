// SPDX-License-Identifier: Apache-2.0
// kvbench: a YCSB-like load generator for rkv.
//   kvbench load --server=ADDR:PORT --records=N
//   kvbench run  --server=ADDR:PORT --workload=a|b|c|d|f --operations=N [--threads=T] ...
// Flags accept YCSB-style dashes or underscores (--value-size or --value_size). Prints a live
// status line every second on stderr and YCSB-style summary lines on stdout.
// Failed operations never stop a run: each is counted by status code ([READ], Return=CODE, n)
// and the run goes on. With --reconnect (default) every client reconnects automatically with
// bounded backoff (rkv::Options::auto_reconnect), so a run survives a server restart: reads
// in flight are retried once after the reconnect, writes in flight fail (SERVER_RESTARTED or
// CONNECTION_LOST: their outcome is unknown) and are counted; the summary reports
// [RECONNECT], Reconnects and ServerRestarts. At most 5 error lines a second are printed on
// stderr; the status line counts the rest.
// Exit status: 0 ok, 1 operations failed (any error, including those of a server restart) or
// --verify found a wrong value or one not written by kvbench, 2 bad options or no connection at
// the start.
//
// Threads: each worker thread owns its --connections clients; the status thread only reads
// the per-thread interval histograms (under their mutexes) and the shared atomic counters.
#include <gflags/gflags.h>
#include <glog/logging.h>

#include <atomic>
#include <cerrno>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <iostream>
#include <memory>
#include <mutex>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "bench/config.h"
#include "bench/histogram.h"
#include "bench/report.h"
#include "bench/usage.h"
#include "bench/workload.h"
#include "common/auth.h"
#include "common/cli/flag_check.h"
#include "common/cli/usage.h"
#include "common/verbs/conn_flags.h"
#include "common/verbs/conn_params.h"
#include "rkv/client.h"

DEFINE_string(server, "127.0.0.1:7470", "kvserver ADDR:PORT");
DEFINE_string(auth_token_file, "",
              "file holding the server's token (kvserver --auth_token_file); needed when the "
              "server requires authentication. Must not be accessible by group or others");
DEFINE_string(workload, "", "YCSB core workload: a (default), b, c, d, f; e is refused (scans)");
DEFINE_double(read_proportion, 0, "custom mix: share of reads (replaces the workload's)");
DEFINE_double(update_proportion, 0, "custom mix: share of updates");
DEFINE_double(insert_proportion, 0, "custom mix: share of inserts of new keys");
DEFINE_double(rmw_proportion, 0, "custom mix: share of read-modify-writes");
DEFINE_double(delete_proportion, 0, "custom mix: share of deletes");
DEFINE_string(distribution, "",
              "key choice: uniform, zipfian, latest, hotspot (default: zipfian; latest for d)");
DEFINE_double(zipf_theta, 0.99, "zipfian constant (YCSB's default 0.99)");
DEFINE_double(hotspot_data_fraction, 0.2, "hotspot: share of the keys that are hot");
DEFINE_double(hotspot_opn_fraction, 0.8, "hotspot: share of operations that go to hot keys");
DEFINE_int64(records, 1000, "records loaded / key space");
DEFINE_int64(operations, 10000, "operations in the run phase");
DEFINE_double(duration, 0, "run phase: seconds to run (overrides --operations when > 0)");
DEFINE_int64(threads, 1, "client threads");
DEFINE_int64(connections, 1, "client connections per thread (used in turn)");
DEFINE_int64(depth, 1,
             "operations in flight per connection: > 1 issues them as one pipelined batch "
             "(rkv::Client::Execute: GET READs posted together, PUT/DELETE pipelined up to the "
             "server's request credits; read-modify-writes write after their reads)");
DEFINE_string(key_size, "0", "key bytes, N or MIN-MAX (0: YCSB's user<hash> names)");
DEFINE_string(value_size, "64", "value bytes, N or MIN-MAX (uniform per operation)");
DEFINE_double(target, 0,
              "total operations/s to throttle to (0: as fast as possible); latency is then "
              "measured from each operation's intended start time (no coordinated omission)");
DEFINE_string(json, "", "also write the figures, latency histograms and per-second series here");
DEFINE_bool(verify, false,
            "check every value read: every value kvbench writes (load or run, with or without "
            "--verify) is self-checking (key-bound XXH3 checksum), so this works after any "
            "kvbench load; a value written by anything else is reported as not written by kvbench");
DEFINE_int64(location_cache, 65536,
             "entries of each connection's location cache (rkv::Options::location_cache_entries; "
             "0 turns it off)");
DEFINE_bool(warm_cache, false,
            "run phase: before measuring, each connection GETs every loaded record once (as a "
            "client that loaded the keys itself would have met them); not counted in the report");
DEFINE_string(hw_counters, "",
              "a device's hw_counters directory (e.g. /sys/class/infiniband/rxe0/ports/1/"
              "hw_counters): report the wire packets (sent_pkts + rcvd_pkts) of the measured "
              "phase per operation");
DEFINE_bool(reconnect, true,
            "reconnect automatically (bounded backoff) when a connection is lost, so the run "
            "survives a server restart; failed operations are counted as errors either way");

namespace {
using Clock = std::chrono::steady_clock;
using rkv::bench::Config;
using rkv::bench::OpType;
namespace b = rkv::bench;

int Fail(const std::string& m) {
  std::cerr << "kvbench: " << m << "\n";
  return 2;
}

// YCSB spells flags with dashes; gflags wants underscores.
void NormalizeFlagNames(int argc, char** argv) {
  for (int i = 1; i < argc; ++i) {
    char* a = argv[i];
    if (std::strncmp(a, "--", 2) != 0) continue;
    for (char* p = a + 2; *p && *p != '='; ++p)
      if (*p == '-') *p = '_';
  }
}

double GivenOrUnset(const char* flag, double value) {
  return gflags::GetCommandLineFlagInfoOrDie(flag).is_default ? b::RawFlags::kUnset : value;
}

// What one worker thread measured. `interval` (this second's latencies, for the status line)
// is shared with the status thread under `mu`; the rest is the worker's alone until joined.
struct ThreadStats {
  b::OpResult ops[b::kNumOps];
  uint64_t verify_failures = 0;  // every failed check, of which:
  uint64_t verify_foreign = 0;   // values not written by kvbench
  std::mutex mu;
  b::Histogram interval;
};

struct Op {
  OpType type;
  uint64_t seq;
  std::string key;
  Clock::time_point due;
  rkv::Status status;
};

class Runner {
 public:
  Runner(const Config& c, std::vector<std::unique_ptr<rkv::Client>>* clients)
      : c_(c), clients_(clients), chooser_(c), inserted_(c.records), stats_(c.threads) {
    total_ = c.load ? c.records : c.duration > 0 ? UINT64_MAX : c.operations;
  }

  void Run() {
    start_ = Clock::now();
    deadline_ = c_.duration > 0 && !c_.load
                    ? start_ + std::chrono::microseconds(int64_t(c_.duration * 1e6))
                    : Clock::time_point::max();
    std::thread status([this] { StatusLoop(); });
    std::vector<std::thread> threads;
    for (int t = 0; t < c_.threads; ++t) threads.emplace_back([this, t] { Worker(t); });
    for (auto& t : threads) t.join();
    runtime_ms_ = std::chrono::duration<double, std::milli>(Clock::now() - start_).count();
    finished_.store(true);
    status.join();
  }

  void Fill(b::Report* r) {
    r->runtime_ms = runtime_ms_;
    r->operations = done_.load();
    for (auto& st : stats_) {
      for (int k = 0; k < b::kNumOps; ++k) {
        r->ops[k].latency_us.Merge(st.ops[k].latency_us);
        r->ops[k].ok += st.ops[k].ok;
        r->ops[k].not_found += st.ops[k].not_found;
        r->ops[k].errors += st.ops[k].errors;
        for (const auto& [code, count] : st.ops[k].errors_by_code)
          r->ops[k].errors_by_code[code] += count;
      }
      r->verify_failures += st.verify_failures;
      r->verify_foreign += st.verify_foreign;
    }
    r->series = series_;
  }

 private:
  OpType Choose(std::mt19937_64& rng) const {
    double u = std::uniform_real_distribution<double>(0, 1)(rng), acc = 0;
    for (int k = 0; k < b::kNumOps; ++k)
      if (c_.mix[k] > 0 && u < (acc += c_.mix[k])) return OpType(k);
    for (int k = b::kNumOps - 1; k >= 0; --k)  // rounding: the last type with a share
      if (c_.mix[k] > 0) return OpType(k);
    return b::kRead;
  }

  void Record(ThreadStats& st, const Op& op, Clock::time_point end) {
    uint64_t us = uint64_t(std::max<int64_t>(
        0, std::chrono::duration_cast<std::chrono::microseconds>(end - op.due).count()));
    b::OpResult& r = st.ops[op.type];
    r.latency_us.Record(us);
    if (op.status.ok()) {
      ++r.ok;
    } else if (op.status.IsNotFound()) {
      ++r.not_found;
    } else {
      ++r.errors;
      ++r.errors_by_code[rkv::CodeName(op.status.code())];
      errors_.fetch_add(1, std::memory_order_relaxed);
      // A lost server fails every thread's operations at once: print a few a second, count all.
      if (printed_this_second_.fetch_add(1, std::memory_order_relaxed) < kErrorLinesPerSecond)
        std::cerr << b::kOpNames[op.type] << " " << op.key << ": " << op.status.ToString() << "\n";
    }
    {
      std::lock_guard<std::mutex> l(st.mu);
      st.interval.Record(us);
    }
    done_.fetch_add(1, std::memory_order_relaxed);
  }

  void CheckRead(ThreadStats& st, const Op& op, const std::string& value) {
    if (!c_.verify || !op.status.ok()) return;
    const b::ValueCheck check = b::CheckValue(op.key, value);
    if (check == b::ValueCheck::kOk) return;
    if (check == b::ValueCheck::kForeign) ++st.verify_foreign;
    if (st.verify_failures++ < 3)
      std::cerr << "VERIFY: key " << op.key << " (" << value.size()
                << " bytes): " << b::ValueCheckText(check) << "\n";
  }

  // Every value is self-verifying (bench/workload.h), so a later `run --verify` can check what
  // any kvbench phase wrote.
  void MakeValue(const Op& op, std::mt19937_64& rng, std::string* value) const {
    const b::SizeRange& vs = c_.value_size;
    value->resize(vs.min + (vs.fixed() ? 0 : rng() % (vs.max - vs.min + 1)));
    b::FillValue(op.key, op.seq + 1, value);
  }

  void Worker(int t) {
    ThreadStats& st = stats_[t];
    std::mt19937_64 rng(uint64_t(t) * 7919 + 1);
    // Throttling: this thread's k-th operation is due at start + k * interval.
    const double interval_ns = c_.target > 0 ? 1e9 * c_.threads / c_.target : 0;
    uint64_t issued = 0;
    size_t turn = 0;
    std::vector<Op> batch(c_.depth);
    std::string value, out;
    for (;;) {
      int n = 0;
      for (; n < c_.depth && Clock::now() < deadline_; ++n) {
        uint64_t i = next_.fetch_add(1);
        if (i >= total_) break;
        Op& op = batch[n];
        op.seq = i;
        op.type = c_.load ? b::kInsert : Choose(rng);
        uint64_t keynum = c_.load                 ? i
                          : op.type == b::kInsert ? inserted_.fetch_add(1)
                                                  : chooser_.Next(rng, inserted_.load());
        op.key = b::KeyName(keynum, c_.key_size);
        op.due = interval_ns > 0
                     ? start_ + std::chrono::nanoseconds(uint64_t(interval_ns * double(issued++)))
                     : Clock::time_point();
      }
      if (n == 0) break;
      if (interval_ns > 0) {
        std::this_thread::sleep_until(batch[n - 1].due);  // a late batch's wait counts
      } else {
        auto now = Clock::now();
        for (int k = 0; k < n; ++k) batch[k].due = now;
      }
      rkv::Client* c = (*clients_)[size_t(t) * c_.connections + turn++ % c_.connections].get();
      if (n > 1) {
        RunBatch(st, c, batch.data(), n, rng);
        continue;
      }
      Op& op = batch[0];
      if (op.type == b::kRead || op.type == b::kRmw) {
        op.status = c->Get(op.key, &out);
        CheckRead(st, op, out);
      }
      auto reads_done = Clock::now();
      if (op.type == b::kRead ||
          (op.type == b::kRmw && !(op.status.ok() || op.status.IsNotFound()))) {
        Record(st, op, reads_done);
        continue;
      }
      if (op.type == b::kDelete) {
        op.status = c->Delete(op.key);
      } else {
        MakeValue(op, rng, &value);
        op.status = c->Put(op.key, value);
      }
      Record(st, op, Clock::now());
    }
  }

  // --depth > 1: the batch as one pipelined Client::Execute (GETs and writes in flight together),
  // then the writes of its read-modify-writes (each needs its read first) as a second one.
  void RunBatch(ThreadStats& st, rkv::Client* c, Op* batch, int n, std::mt19937_64& rng) {
    std::vector<rkv::BatchOp> ops;
    std::vector<int> of;  // batch index of each op
    std::vector<std::string> got(static_cast<size_t>(n)), written(static_cast<size_t>(n));
    for (int k = 0; k < n; ++k) {
      Op& op = batch[k];
      rkv::BatchOp bo;
      bo.key = op.key;
      if (op.type == b::kRead || op.type == b::kRmw) {
        bo.type = rkv::BatchOp::Type::kGet;
        bo.result = &got[size_t(k)];
      } else if (op.type == b::kDelete) {
        bo.type = rkv::BatchOp::Type::kDelete;
      } else {
        bo.type = rkv::BatchOp::Type::kPut;
        MakeValue(op, rng, &written[size_t(k)]);
        bo.value = written[size_t(k)];
      }
      ops.push_back(bo);
      of.push_back(k);
    }
    (void)c->Execute(&ops);  // every operation's status says what happened to it
    auto done = Clock::now();
    std::vector<rkv::BatchOp> rmw;
    std::vector<int> rmw_of;
    for (size_t i = 0; i < ops.size(); ++i) {
      Op& op = batch[of[i]];
      op.status = ops[i].status;
      if (op.type == b::kRead || op.type == b::kRmw) CheckRead(st, op, got[size_t(of[i])]);
      if (op.type == b::kRmw && (op.status.ok() || op.status.IsNotFound())) {
        rkv::BatchOp bo;
        bo.type = rkv::BatchOp::Type::kPut;
        bo.key = op.key;
        MakeValue(op, rng, &written[size_t(of[i])]);
        bo.value = written[size_t(of[i])];
        rmw.push_back(bo);
        rmw_of.push_back(of[i]);
        continue;
      }
      Record(st, op, done);
    }
    if (rmw.empty()) return;
    (void)c->Execute(&rmw);
    done = Clock::now();
    for (size_t i = 0; i < rmw.size(); ++i) {
      batch[rmw_of[i]].status = rmw[i].status;
      Record(st, batch[rmw_of[i]], done);
    }
  }

  void StatusLoop() {
    uint64_t last = 0, errors_last = 0;
    b::Histogram second;
    auto tick = start_;
    while (!finished_.load()) {
      tick += std::chrono::seconds(1);
      while (!finished_.load() && Clock::now() < tick)
        std::this_thread::sleep_for(std::chrono::milliseconds(20));
      if (finished_.load()) break;
      second.Clear();
      for (auto& st : stats_) {
        std::lock_guard<std::mutex> l(st.mu);
        second.Merge(st.interval);
        st.interval.Clear();
      }
      uint64_t d = done_.load();
      double el = std::chrono::duration<double>(Clock::now() - start_).count();
      std::string errors;
      const uint64_t errors_total = errors_.load(std::memory_order_relaxed);
      const uint64_t printed = printed_this_second_.exchange(0, std::memory_order_relaxed);
      if (errors_total > 0) {
        errors = "; " + std::to_string(errors_total - errors_last) + " errors";
        if (printed > kErrorLinesPerSecond)
          errors += " (" + std::to_string(printed - kErrorLinesPerSecond) + " not printed)";
        errors += ", " + std::to_string(errors_total) + " in all";
      }
      errors_last = errors_total;
      std::fprintf(stderr, "%.0f sec: %lu operations; %lu current ops/sec; p99 %lu us%s\n", el,
                   (unsigned long)d, (unsigned long)(d - last),
                   (unsigned long)second.Percentile(0.99), errors.c_str());
      series_.push_back({el, d - last, second.Percentile(0.5), second.Percentile(0.99),
                         second.Percentile(0.999)});
      last = d;
    }
  }

  const Config& c_;
  std::vector<std::unique_ptr<rkv::Client>>* clients_;
  const b::KeyChooser chooser_;
  uint64_t total_;
  Clock::time_point start_, deadline_;
  std::atomic<uint64_t> next_{0}, done_{0}, inserted_;
  std::atomic<bool> finished_{false};
  static constexpr uint64_t kErrorLinesPerSecond = 5;
  std::atomic<uint64_t> errors_{0};
  std::atomic<uint64_t> printed_this_second_{0};  // error lines asked for since the last tick
  std::vector<ThreadStats> stats_;
  std::vector<b::SecondSample> series_;  // written by the status thread, read after join
  double runtime_ms_ = 0;
};
}  // namespace

int main(int argc, char** argv) {
  rkv::cli::EnsureStandardFds();
  NormalizeFlagNames(argc, argv);
  gflags::SetUsageMessage("kvbench load|run --server=ADDR:PORT [options]");
  if (int rc = 0; rkv::cli::HandleHelpOrVersion(argc, argv, b::KvbenchUsage(), &rc)) return rc;
  if (std::string bad = rkv::cli::PrecheckFlags(argc, argv); !bad.empty()) return Fail(bad);
  gflags::ParseCommandLineFlags(&argc, &argv, true);
  FLAGS_logtostderr = true;
  google::InitGoogleLogging(argv[0]);
  if (argc != 2) return Fail("usage: kvbench load|run --server=ADDR:PORT [--workload=a] [...]");
  b::RawFlags raw;
  raw.phase = argv[1];
  raw.workload = FLAGS_workload;
  raw.distribution = FLAGS_distribution;
  raw.read = GivenOrUnset("read_proportion", FLAGS_read_proportion);
  raw.update = GivenOrUnset("update_proportion", FLAGS_update_proportion);
  raw.insert = GivenOrUnset("insert_proportion", FLAGS_insert_proportion);
  raw.rmw = GivenOrUnset("rmw_proportion", FLAGS_rmw_proportion);
  raw.del = GivenOrUnset("delete_proportion", FLAGS_delete_proportion);
  raw.zipf_theta = FLAGS_zipf_theta;
  raw.hotspot_data_fraction = FLAGS_hotspot_data_fraction;
  raw.hotspot_opn_fraction = FLAGS_hotspot_opn_fraction;
  raw.records = FLAGS_records;
  raw.operations = FLAGS_operations;
  raw.duration = FLAGS_duration;
  raw.target = FLAGS_target;
  raw.threads = FLAGS_threads;
  raw.connections = FLAGS_connections;
  raw.depth = FLAGS_depth;
  raw.key_size = FLAGS_key_size;
  raw.value_size = FLAGS_value_size;
  raw.verify = FLAGS_verify;
  raw.reconnect = FLAGS_reconnect;
  Config cfg;
  std::string err = b::Resolve(raw, &cfg);
  if (!err.empty()) return Fail(err);
  FILE* json = nullptr;
  if (!FLAGS_json.empty() && (json = std::fopen(FLAGS_json.c_str(), "w")) == nullptr)
    return Fail("cannot write --json=" + FLAGS_json + ": " + std::strerror(errno));

  rkv::Options options;
  if (rkv::Status s = rkv::ConnFlags(rkv::Role::kClient, &options.exchange, &options.qp); !s.ok())
    return Fail(s.message());
  if (!FLAGS_auth_token_file.empty()) {
    if (rkv::Status s = rkv::auth::LoadTokenFile(FLAGS_auth_token_file, &options.auth_token);
        !s.ok())
      return Fail(s.message());
  }
  options.auto_reconnect = cfg.reconnect;
  if (FLAGS_location_cache < 0 || FLAGS_location_cache > (1 << 22))
    return Fail("--location_cache=" + std::to_string(FLAGS_location_cache) +
                ": must be in [0, 4194304]");
  options.location_cache_entries = int(FLAGS_location_cache);
  std::vector<std::unique_ptr<rkv::Client>> clients(size_t(cfg.threads) * cfg.connections);
  for (auto& c : clients) {
    rkv::Status s = rkv::Client::Connect(FLAGS_server, options, &c);
    if (!s.ok()) return Fail("connect " + FLAGS_server + ": " + s.ToString());
  }
  const rkv::ServerInfo& info = clients[0]->server_info();
  b::Report report;
  report.phase = raw.phase;
  report.workload = cfg.load ? "load" : cfg.workload;
  report.distribution = b::DistributionName(cfg.distribution);
  report.threads = cfg.threads;
  report.connections = cfg.connections;
  report.depth = cfg.depth;
  report.server = FLAGS_server;
  report.device = info.device;
  report.port = info.port;
  report.path_mtu = info.path_mtu;
  report.qp_num = info.qp_num;
  report.gid_index = info.gid_index;
  report.verify = cfg.verify;
  report.reconnect = cfg.reconnect;
  std::printf(
      "# rkv kvbench %s workload=%s distribution=%s threads=%d connections=%d depth=%d "
      "key_size=%s value_size=%s\n",
      raw.phase.c_str(), report.workload.c_str(), report.distribution.c_str(), cfg.threads,
      cfg.connections, cfg.depth, FLAGS_key_size.c_str(), FLAGS_value_size.c_str());
  std::printf(
      "# server=%s exchange=%s device=%s port=%u link_layer=%s gid_index=%d path_mtu=%u "
      "qpn=0x%x rkey=0x%x region_size=%lu\n",
      FLAGS_server.c_str(), rkv::ExchangeName(info.exchange), info.device.c_str(),
      unsigned(info.port), info.link_layer.c_str(), info.gid_index, info.path_mtu, info.qp_num,
      info.rkey, (unsigned long)info.region_size);
  // Every connection parameter of the first connection, both sides as their QPs use them.
  std::string table = rkv::FormatParamTable(info.local, info.peer) + rkv::kMemoryRowsNote + "\n";
  for (size_t pos = 0, nl; pos < table.size(); pos = nl + 1) {
    nl = table.find('\n', pos);
    std::printf("# %s\n", table.substr(pos, nl - pos).c_str());
  }
  std::fflush(stdout);

  rkv::ClientCounters warm;  // what --warm_cache cost, taken out of the report
  if (FLAGS_warm_cache && !cfg.load) {
    std::string out;
    for (auto& c : clients) {
      for (uint64_t i = 0; i < cfg.records; ++i) (void)c->Get(b::KeyName(i, cfg.key_size), &out);
      warm += c->counters();
    }
    std::printf("# warm_cache: %lu GETs before the run\n", (unsigned long)warm.gets);
  }
  auto packets = [](uint64_t* n) {  // sent_pkts + rcvd_pkts, false if unreadable
    if (FLAGS_hw_counters.empty()) return false;
    *n = 0;
    for (const char* name : {"/sent_pkts", "/rcvd_pkts"}) {
      std::ifstream f(FLAGS_hw_counters + name);
      uint64_t v = 0;
      if (!(f >> v)) return false;
      *n += v;
    }
    return true;
  };
  uint64_t packets_before = 0, packets_after = 0;
  const bool have_packets = packets(&packets_before);
  Runner runner(cfg, &clients);
  runner.Run();
  if (have_packets && packets(&packets_after)) report.wire_packets = packets_after - packets_before;
  runner.Fill(&report);
  rkv::ClientCounters run;  // the clients' counters of the measured phase
  for (auto& c : clients) run += c->counters();
  run -= warm;
  report.gets = run.gets;
  report.reads_posted = run.reads_posted;
  report.round_trips = run.round_trips;
  report.checksum_retries = run.checksum_retries;
  report.bytes_read = run.bytes_read;
  report.cache_hits = run.cache_hits;
  report.cache_misses = run.cache_misses;
  report.reconnects = run.reconnects;
  report.server_restarts = run.server_restarts;
  b::PrintSummary(report, stdout);
  if (json) {
    b::WriteJson(report, json);
    std::fclose(json);
  }
  return report.errors() || report.verify_failures ? 1 : 0;
}
