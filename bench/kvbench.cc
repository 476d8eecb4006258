// kvbench: a YCSB-like load generator for rkv.
//   kvbench load --server=ADDR:PORT --records=N
//   kvbench run  --server=ADDR:PORT --workload=a|b|c|d|f --operations=N [--threads=T]
// Prints a live status line every second on stderr and YCSB-style summary lines on stdout.
#include <gflags/gflags.h>
#include <glog/logging.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <iostream>
#include <mutex>
#include <random>
#include <thread>
#include <vector>

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
  std::vector<uint32_t> lat_us[kNumOps];
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
  uint64_t total = load ? FLAGS_records : FLAGS_operations;
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
      last = d;
    }
  });
  std::vector<std::thread> threads;
  for (int t = 0; t < FLAGS_threads; ++t) {
    threads.emplace_back([&, t] {
      rkv::Client* c = clients[t].get();
      Stats& st = stats[t];
      std::mt19937_64 rng(t * 7919 + 1);
      std::uniform_real_distribution<double> uni(0, 1);
      std::string value(FLAGS_value_size, 'v'), out;
      for (uint64_t i; (i = next.fetch_add(1)) < total;) {
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
        st.lat_us[op].push_back(uint32_t(
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
  for (int op = 0; op < kNumOps; ++op) {
    std::vector<uint32_t> all;
    uint64_t ok = 0, nf = 0, err = 0;
    for (auto& st : stats) {
      all.insert(all.end(), st.lat_us[op].begin(), st.lat_us[op].end());
      ok += st.ok[op], nf += st.not_found[op], err += st.errors[op];
    }
    if (all.empty()) continue;
    errors += err;
    std::sort(all.begin(), all.end());
    double sum = 0;
    for (uint32_t v : all) sum += v;
    auto pct = [&](double p) {
      return all[std::min<size_t>(all.size() - 1, size_t(p * all.size()))];
    };
    const char* n = kOpNames[op];
    std::printf("[%s], Operations, %zu\n[%s], AverageLatency(us), %.2f\n", n, all.size(), n,
                sum / all.size());
    std::printf("[%s], MinLatency(us), %u\n[%s], MaxLatency(us), %u\n", n, all.front(), n,
                all.back());
    std::printf("[%s], 50thPercentileLatency(us), %u\n[%s], 95thPercentileLatency(us), %u\n", n,
                pct(0.5), n, pct(0.95));
    std::printf("[%s], 99thPercentileLatency(us), %u\n[%s], 99.9thPercentileLatency(us), %u\n", n,
                pct(0.99), n, pct(0.999));
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
  return errors || verify_failures ? 1 : 0;
}
