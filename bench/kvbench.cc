// kvbench: a YCSB-like load generator for rkv.
//   kvbench load --server=ADDR:PORT --records=N
//   kvbench run  --server=ADDR:PORT --workload=a|b|c|d|f --operations=N [--threads=T]
// Prints a live status line every second on stderr and YCSB-style summary lines on stdout.
#include <gflags/gflags.h>
#include <glog/logging.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <iostream>
#include <mutex>
#include <random>
#include <thread>
#include <vector>

#include "bench/histogram.h"
#include "bench/workload.h"
#include "rkv/client.h"

DEFINE_string(server, "127.0.0.1:7470", "kvserver ADDR:PORT");
DEFINE_string(workload, "a", "YCSB core workload: a, b, c, d, f");
DEFINE_uint64(records, 1000, "records loaded / key space");
DEFINE_uint64(operations, 10000, "operations in the run phase");
DEFINE_int32(threads, 1, "client threads (one connection each)");
DEFINE_string(distribution, "zipfian", "uniform or zipfian");
DEFINE_double(zipf_theta, 0.99, "zipfian constant");
DEFINE_int32(value_size, 64, "value size in bytes");
DEFINE_double(target, 0,
              "total operations/s to throttle to (0: as fast as possible); latency is then "
              "measured from each operation's intended start time (no coordinated omission)");
DEFINE_double(duration, 0, "run phase: seconds to run (overrides --operations when > 0)");
DEFINE_string(json, "", "also write the figures, latency histograms and per-second series here");
DEFINE_bool(verify, false,
            "write self-checking values (key-bound XXH3 checksum + version) and check every read");

namespace {
using Clock = std::chrono::steady_clock;

using rkv::bench::Fnv64;
using rkv::bench::KeyOf;
using rkv::bench::Zipfian;

enum OpType { kRead, kUpdate, kInsert, kRmw, kNumOps };
const char* kOpNames[] = {"READ", "UPDATE", "INSERT", "READ-MODIFY-WRITE"};

struct Stats {
  rkv::bench::Histogram lat_us[kNumOps];
  uint64_t ok[kNumOps] = {}, not_found[kNumOps] = {}, errors[kNumOps] = {};
  uint64_t verify_failures = 0;
};

int Fail(const std::string& m) {
  std::cerr << "kvbench: " << m << "\n";
  return 2;
}
}  // namespace

int main(int argc, char** argv) {
  gflags::SetUsageMessage("kvbench load|run --server=ADDR:PORT [options]");
  gflags::ParseCommandLineFlags(&argc, &argv, true);
  FLAGS_logtostderr = true;
  google::InitGoogleLogging(argv[0]);
  if (argc != 2 || (std::string(argv[1]) != "load" && std::string(argv[1]) != "run"))
    return Fail("usage: kvbench load|run --server=ADDR:PORT [--workload=a] [--records=N]");
  bool load = std::string(argv[1]) == "load";
  double mix[kNumOps] = {};
  const std::string& w = FLAGS_workload;
  if (w == "a")
    mix[kRead] = 0.5, mix[kUpdate] = 0.5;
  else if (w == "b")
    mix[kRead] = 0.95, mix[kUpdate] = 0.05;
  else if (w == "c")
    mix[kRead] = 1.0;
  else if (w == "d")
    mix[kRead] = 0.95, mix[kInsert] = 0.05;
  else if (w == "f")
    mix[kRead] = 0.5, mix[kRmw] = 0.5;
  else if (w == "e")
    return Fail("workload e needs range scans; rkv is a hash table and has no ordered scan");
  else
    return Fail("unknown --workload=" + w + " (a, b, c, d or f)");
  if (FLAGS_distribution != "uniform" && FLAGS_distribution != "zipfian")
    return Fail("--distribution must be uniform or zipfian");
  if (FLAGS_records == 0) return Fail("--records must be > 0");
  if (FLAGS_target < 0) return Fail("--target must be >= 0");
  if (FLAGS_duration < 0) return Fail("--duration must be >= 0");
  if (FLAGS_threads < 1 || FLAGS_threads > 1024) return Fail("--threads must be 1..1024");
  if (FLAGS_verify && FLAGS_value_size < int(rkv::bench::kMinVerifiableValue))
    return Fail("--verify needs --value_size >= 16");
  if (FLAGS_value_size < 0 || FLAGS_value_size > 65536)
    return Fail("--value_size must be 0..65536");
  if (!(FLAGS_zipf_theta > 0 && FLAGS_zipf_theta < 1)) return Fail("--zipf_theta must be in (0,1)");

  std::vector<std::unique_ptr<rkv::Client>> clients(FLAGS_threads);
  for (auto& c : clients) {
    rkv::Status s = rkv::Client::Connect(FLAGS_server, rkv::Options(), &c);
    if (!s.ok()) return Fail("connect " + FLAGS_server + ": " + s.ToString());
  }
  const rkv::ServerInfo& info = clients[0]->server_info();
  std::cout << "# rkv kvbench " << argv[1] << (load ? "" : " workload=" + w)
            << " server=" << FLAGS_server << " device=" << info.device << " port=" << int(info.port)
            << " mtu=" << info.path_mtu << " qpn=" << info.qp_num << " rkey=0x" << std::hex
            << info.rkey << std::dec << " region_size=" << info.region_size << "\n";

  Zipfian zipf(FLAGS_records, FLAGS_zipf_theta);
  const bool timed = !load && FLAGS_duration > 0;
  uint64_t total = load ? FLAGS_records : timed ? UINT64_MAX : FLAGS_operations;
  std::atomic<bool> time_up{false};
  std::vector<std::pair<double, uint64_t>> series;  // (second, ops in that second); status thread
  std::atomic<uint64_t> next{0}, done{0}, inserted{FLAGS_records};
  std::vector<Stats> stats(FLAGS_threads);
  auto start = Clock::now();
  std::atomic<bool> finished{false};
  std::thread status([&] {
    uint64_t last = 0;
    while (!finished.load()) {
      std::this_thread::sleep_for(std::chrono::seconds(1));
      uint64_t d = done.load();
      double el = std::chrono::duration<double>(Clock::now() - start).count();
      std::fprintf(stderr, "%.0f sec: %lu operations; %lu current ops/sec\n", el, (unsigned long)d,
                   (unsigned long)(d - last));
      series.emplace_back(el, d - last);
      last = d;
      if (timed && el >= FLAGS_duration) time_up.store(true);
    }
  });
  std::vector<std::thread> threads;
  for (int t = 0; t < FLAGS_threads; ++t) {
    threads.emplace_back([&, t] {
      rkv::Client* c = clients[t].get();
      Stats& st = stats[t];
      std::mt19937_64 rng(t * 7919 + 1);
      std::uniform_real_distribution<double> uni(0, 1);
      // Throttling: this thread's k-th operation is due at start + k * interval.
      const double interval_ns = FLAGS_target > 0 ? 1e9 * FLAGS_threads / FLAGS_target : 0;
      uint64_t issued = 0;
      std::string value(FLAGS_value_size, 'v'), out;
      for (uint64_t i; (i = next.fetch_add(1)) < total && !time_up.load();) {
        OpType op = kInsert;
        uint64_t keynum = i;
        if (!load) {
          double r = uni(rng), acc = 0;
          op = kRead;
          for (int k = 0; k < kNumOps; ++k)
            if (r < (acc += mix[k])) {
              op = OpType(k);
              break;
            }
          uint64_t n = inserted.load();
          if (op == kInsert)
            keynum = inserted.fetch_add(1);
          else if (w == "d")
            keynum = n - 1 - zipf.Next(uni(rng)) % n;  // latest
          else if (FLAGS_distribution == "zipfian")
            keynum = Fnv64(zipf.Next(uni(rng))) % FLAGS_records;
          else
            keynum = rng() % FLAGS_records;
        }
        std::string key = KeyOf(keynum);
        if (FLAGS_verify) {
          rkv::bench::FillValue(key, i + 1, &value);
        } else {
          value[0] = char('a' + i % 26);
        }
        auto verify = [&](const rkv::Status& got) {
          if (FLAGS_verify && got.ok() && !rkv::bench::VerifyValue(key, out) &&
              st.verify_failures++ < 3)
            std::cerr << "VERIFY: wrong or torn value for key " << key << "\n";
        };
        auto t0 = Clock::now();
        if (interval_ns > 0) {
          auto due = start + std::chrono::nanoseconds(uint64_t(interval_ns * double(issued++)));
          if (due > t0) std::this_thread::sleep_until(due);
          t0 = due;  // a late operation's wait counts in its latency
        }
        rkv::Status s;
        if (op == kRead) {
          s = c->Get(key, &out);
          verify(s);
        } else if (op == kRmw) {
          s = c->Get(key, &out);
          verify(s);
          if (s.ok() || s.IsNotFound()) s = c->Put(key, value);
        } else
          s = c->Put(key, value);
        st.lat_us[op].Record(uint64_t(
            std::chrono::duration_cast<std::chrono::microseconds>(Clock::now() - t0).count()));
        if (s.ok())
          ++st.ok[op];
        else if (s.IsNotFound())
          ++st.not_found[op];
        else {
          if (++st.errors[op] <= 3) std::cerr << kOpNames[op] << " " << s.ToString() << "\n";
        }
        done.fetch_add(1);
      }
    });
  }
  for (auto& t : threads) t.join();
  double ms = std::chrono::duration<double, std::milli>(Clock::now() - start).count();
  finished.store(true);
  status.join();
  std::printf("[OVERALL], RunTime(ms), %.0f\n", ms);
  std::printf("[OVERALL], Throughput(ops/sec), %.1f\n", done.load() / (ms / 1000.0));
  uint64_t errors = 0;
  struct JsonOp {
    const char* name;
    rkv::bench::Histogram h;
    uint64_t ok, not_found, errors;
  };
  std::vector<JsonOp> json_ops;
  for (int op = 0; op < kNumOps; ++op) {
    rkv::bench::Histogram all;
    uint64_t ok = 0, nf = 0, err = 0;
    for (auto& st : stats) {
      all.Merge(st.lat_us[op]);
      ok += st.ok[op], nf += st.not_found[op], err += st.errors[op];
    }
    if (all.count() == 0) continue;
    errors += err;
    const char* n = kOpNames[op];
    std::printf("[%s], Operations, %lu\n[%s], AverageLatency(us), %.2f\n", n,
                (unsigned long)all.count(), n, all.mean());
    std::printf("[%s], MinLatency(us), %lu\n[%s], MaxLatency(us), %lu\n", n,
                (unsigned long)all.min(), n, (unsigned long)all.max());
    for (auto [q, name] :
         {std::pair{0.5, "50th"}, {0.95, "95th"}, {0.99, "99th"}, {0.999, "99.9th"}})
      std::printf("[%s], %sPercentileLatency(us), %lu\n", n, name,
                  (unsigned long)all.Percentile(q));
    json_ops.push_back({n, all, ok, nf, err});
    std::printf("[%s], Return=OK, %lu\n", n, (unsigned long)ok);
    if (nf) std::printf("[%s], Return=NOT_FOUND, %lu\n", n, (unsigned long)nf);
    if (err) std::printf("[%s], Return=ERROR, %lu\n", n, (unsigned long)err);
  }
  rkv::ClientCounters sum;
  for (auto& c : clients) {
    sum.gets += c->counters().gets;
    sum.reads_posted += c->counters().reads_posted;
    sum.round_trips += c->counters().round_trips;
    sum.checksum_retries += c->counters().checksum_retries;
  }
  if (sum.gets) {
    std::printf("[RKV], READsPerGet, %.3f\n", double(sum.reads_posted) / sum.gets);
    std::printf("[RKV], RoundTripsPerGet, %.3f\n", double(sum.round_trips) / sum.gets);
    std::printf("[RKV], ChecksumRetries, %lu\n", (unsigned long)sum.checksum_retries);
  }
  uint64_t verify_failures = 0;
  for (auto& st : stats) verify_failures += st.verify_failures;
  if (FLAGS_verify) std::printf("[VERIFY], Failures, %lu\n", (unsigned long)verify_failures);
  if (!FLAGS_json.empty()) {
    FILE* f = std::fopen(FLAGS_json.c_str(), "w");
    if (f == nullptr)
      return Fail("cannot write --json=" + FLAGS_json + ": " + std::strerror(errno));
    std::fprintf(f,
                 "{\"phase\": \"%s\", \"workload\": \"%s\", \"threads\": %d, \"runtime_ms\": %.0f, "
                 "\"throughput_ops\": %.1f, \"device\": \"%s\", \"path_mtu\": %u,\n "
                 "\"rounds_per_get\": %.4f, "
                 "\"reads_per_get\": %.4f, \"checksum_retries\": %lu, \"verify_failures\": %lu,\n "
                 "\"ops\": {",
                 argv[1], load ? "load" : w.c_str(), FLAGS_threads, ms, done.load() / (ms / 1000.0),
                 info.device.c_str(), info.path_mtu,
                 sum.gets ? double(sum.round_trips) / sum.gets : 0.0,
                 sum.gets ? double(sum.reads_posted) / sum.gets : 0.0,
                 (unsigned long)sum.checksum_retries, (unsigned long)verify_failures);
    for (size_t k = 0; k < json_ops.size(); ++k) {
      const JsonOp& o = json_ops[k];
      std::fprintf(
          f,
          "%s\n  \"%s\": {\"operations\": %lu, \"ok\": %lu, \"not_found\": %lu, \"errors\": %lu, "
          "\"avg_us\": %.2f, \"min_us\": %lu, \"max_us\": %lu, \"p50_us\": %lu, \"p95_us\": %lu, "
          "\"p99_us\": %lu, \"p999_us\": %lu, \"histogram_us\": [",
          k ? "," : "", o.name, (unsigned long)o.h.count(), (unsigned long)o.ok,
          (unsigned long)o.not_found, (unsigned long)o.errors, o.h.mean(), (unsigned long)o.h.min(),
          (unsigned long)o.h.max(), (unsigned long)o.h.Percentile(0.5),
          (unsigned long)o.h.Percentile(0.95), (unsigned long)o.h.Percentile(0.99),
          (unsigned long)o.h.Percentile(0.999));
      auto buckets = o.h.Buckets();
      for (size_t b = 0; b < buckets.size(); ++b)
        std::fprintf(f, "%s[%lu, %lu]", b ? ", " : "", (unsigned long)buckets[b].first,
                     (unsigned long)buckets[b].second);
      std::fprintf(f, "]}");
    }
    std::fprintf(f, "},\n \"series\": [");
    for (size_t k = 0; k < series.size(); ++k)
      std::fprintf(f, "%s[%.1f, %lu]", k ? ", " : "", series[k].first,
                   (unsigned long)series[k].second);
    std::fprintf(f, "]}\n");
    std::fclose(f);
  }
  return errors || verify_failures ? 1 : 0;
}
