// lin_load: a load that records a history and checks it for per-key linearizability.
//   lin_load --server=ADDR:PORT --clients=8 --ops=N --hot_keys=4 --keys=300 --prefill=0.9
//            --seed=S [--history=FILE]
// 1. Inserts the test keys (hot_keys + keys; names carry the seed), then prefills the table
//    with other keys of mixed sizes (inline, heap, overflow) to --prefill of the server's
//    entry_capacity (stops early at TABLE_FULL).
// 2. Runs about N operations split over --clients threads, each with its own rkv::Client:
//    half of them on the hot keys; GET ~50% (some as MultiGet over several keys), PUT ~40%,
//    DELETE ~10%; values from 18 B (inline in the slot) to --max_value bytes (heap blocks),
//    each unique per write: "WRITER.SEQ:" + padding + "#" + XXH3(key, body) in hex, so a torn,
//    garbage or other key's value read is recognizable (it becomes a token no PUT wrote).
// 3. Records every op (call/return on steady_clock, result) into a History
//    (tests/lincheck/history.h), writes it to --history, checks it (tests/lincheck/checker.h)
//    and prints what the run exercised and the checker's summary.
// Exit status: 0 linearizable and no unexpected errors; 1 violations, inconclusive keys or
// unexpected errors (any error status; TABLE_FULL on a test key is a sizing problem of the
// driver); 2 bad flags or no connection.
// Threads: one per client; each records into its own vector; main merges after join.
#include <gflags/gflags.h>
#include <glog/logging.h>
#include <xxhash.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cinttypes>
#include <cstdio>
#include <map>
#include <memory>
#include <mutex>
#include <random>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "common/table/layout.h"
#include "common/verbs/conn_flags.h"
#include "rkv/client.h"
#include "tests/integration/stats_text.h"
#include "tests/lincheck/checker.h"
#include "tests/lincheck/history.h"

DEFINE_string(server, "127.0.0.1:7470", "kvserver ADDR:PORT");
DEFINE_int32(timeout_ms, 10000, "connect and RPC timeout");
DEFINE_int32(clients, 8, "client threads, each with its own rkv::Client");
DEFINE_int64(ops, 100000, "operations in the run phase (a MultiGet counts once per key)");
DEFINE_int32(hot_keys, 4, "hot keys: half of the operations go to them");
DEFINE_int32(keys, 300, "other test keys: the other half");
DEFINE_double(prefill, 0.9, "fill the table with other keys up to this share of entry_capacity");
DEFINE_uint64(seed, 1, "random seed; also names the keys (lin<seed>.*)");
DEFINE_string(history, "", "write the history here (tests/lincheck/history.h format)");
DEFINE_double(multiget_share, 0.15, "share of GETs issued as a MultiGet of 2-6 keys");
DEFINE_int32(max_value, 6144, "largest value in bytes");
DEFINE_bool(check, true, "run the checker on the history");
DEFINE_int32(rogue_replays, 0,
             "negative control: during the run, a client that records nothing puts back, this "
             "many times, a value of the first test key that it read 20 ms earlier; the checker "
             "must then report violations (exit 1)");

namespace {

using Clock = std::chrono::steady_clock;
using rkv::lincheck::Op;
using rkv::lincheck::OpType;
using rkv::lincheck::Outcome;

int64_t NowNs() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(Clock::now().time_since_epoch())
      .count();
}

uint32_t KeyHash32(const std::string& key, const std::string& body) {
  XXH3_state_t* st = XXH3_createState();
  XXH3_64bits_reset(st);
  XXH3_64bits_update(st, key.data(), key.size());
  XXH3_64bits_update(st, body.data(), body.size());
  uint32_t h = uint32_t(XXH3_64bits_digest(st));
  XXH3_freeState(st);
  return h;
}

constexpr size_t kMinValue = 18;  // "W.SEQ:" + "#" + 8 hex digits, for short ids

// "WRITER.SEQ:" + padding + "#" + 8 hex of XXH3(key + body); at least `size` bytes.
std::string MakeValue(const std::string& key, uint32_t writer, uint64_t seq, size_t size) {
  std::string body = std::to_string(writer) + "." + std::to_string(seq) + ":";
  if (body.size() + 9 < size) body.append(size - 9 - body.size(), char('a' + seq % 26));
  char hex[16];
  std::snprintf(hex, sizeof hex, "#%08x", KeyHash32(key, body));
  return body + hex;
}

// The token ("WRITER.SEQ") of a value made by MakeValue for `key`; anything else (torn,
// garbage, another key's value) gets a "garbage:..." token that no PUT has.
std::string TokenOf(const std::string& key, const std::string& v, bool* valid) {
  size_t colon = v.find(':');
  *valid = false;
  if (colon != std::string::npos && v.size() >= 9 && v[v.size() - 9] == '#') {
    std::string body = v.substr(0, v.size() - 9);
    char hex[16];
    std::snprintf(hex, sizeof hex, "%08x", KeyHash32(key, body));
    if (v.compare(v.size() - 8, 8, hex) == 0 && colon < body.size()) {
      *valid = true;
      return v.substr(0, colon);
    }
  }
  char h[64];
  std::snprintf(h, sizeof h, "garbage:%zu:%016" PRIx64, v.size(), XXH3_64bits(v.data(), v.size()));
  return h;
}

using rkv::testing::ParseStats;

struct Stats {
  uint64_t ops = 0, gets = 0, get_nf = 0, gets_retried = 0, multigets = 0, multiget_keys = 0;
  uint64_t puts = 0, puts_inline = 0, puts_heap = 0, dels = 0, del_nf = 0;
  uint64_t errors = 0, unknown = 0, table_full = 0, garbage_reads = 0, reconnects = 0;
  rkv::ClientCounters counters;
  std::string first_error;
  void Add(const Stats& o) {
    ops += o.ops, gets += o.gets, get_nf += o.get_nf, gets_retried += o.gets_retried;
    multigets += o.multigets, multiget_keys += o.multiget_keys, puts += o.puts;
    puts_inline += o.puts_inline, puts_heap += o.puts_heap, dels += o.dels, del_nf += o.del_nf;
    errors += o.errors, unknown += o.unknown, table_full += o.table_full;
    garbage_reads += o.garbage_reads, reconnects += o.reconnects;
    counters.gets += o.counters.gets, counters.reads_posted += o.counters.reads_posted;
    counters.round_trips += o.counters.round_trips;
    counters.checksum_retries += o.counters.checksum_retries, counters.rpcs += o.counters.rpcs;
    if (first_error.empty()) first_error = o.first_error;
  }
};

bool Uncertain(rkv::Code c) {
  return c == rkv::Code::kConnectionLost || c == rkv::Code::kTimeout || c == rkv::Code::kIoError ||
         c == rkv::Code::kProtocolError;
}

// One client thread: its Client, its RNG, its part of the history.
class Worker {
 public:
  Worker(uint32_t id, const std::vector<std::string>* hot, const std::vector<std::string>* cold)
      : id_(id), hot_(hot), cold_(cold), rng_(FLAGS_seed * 7919 + id) {}

  bool Connect(const rkv::Options& options) {
    rkv::Status s = rkv::Client::Connect(FLAGS_server, options, &client_);
    if (!s.ok()) Error("connect: " + s.ToString());
    return s.ok();
  }

  // The run phase: `ops` history ops.
  void Run(int64_t ops) {
    std::uniform_real_distribution<double> u(0, 1);
    while (int64_t(stats_.ops) < ops && !fatal_) {
      const std::string& key = PickKey();
      double r = u(rng_);
      if (r < 0.5) {
        if (u(rng_) < FLAGS_multiget_share)
          MultiGet(key);
        else
          Get(key);
      } else if (r < 0.9) {
        Put(key, ValueSize());
      } else {
        Delete(key);
      }
    }
  }

  void Put(const std::string& key, size_t size) {
    Op op = Begin(OpType::kPut, key);
    op.value = std::to_string(id_) + "." + std::to_string(++seq_);
    std::string v = MakeValue(key, id_, seq_, size);
    rkv::Status s = client_->Put(key, v);
    op.return_ns = NowNs();
    ++stats_.puts;
    (key.size() + v.size() <= rkv::layout::kInlineCapacity ? stats_.puts_inline
                                                           : stats_.puts_heap) += 1;
    op.outcome = WriteOutcome(s, "PUT " + key);
    End(std::move(op));
  }

  const Stats& stats() {
    stats_.counters = client_ ? client_->counters() : rkv::ClientCounters();
    return stats_;
  }
  std::vector<Op>* ops() { return &ops_; }
  bool fatal() const { return fatal_; }

 private:
  const std::string& PickKey() {
    bool hot = cold_->empty() || (!hot_->empty() && rng_() % 2 == 0);
    const auto& v = hot ? *hot_ : *cold_;
    return v[rng_() % v.size()];
  }

  size_t ValueSize() {
    uint32_t r = rng_() % 100;
    size_t max = std::max<size_t>(FLAGS_max_value, 1001);
    if (r < 35) return kMinValue + rng_() % 31;  // 18..48: inline unless the key is long
    if (r < 60) return 49 + rng_() % 52;         // 49..100
    if (r < 85) return 101 + rng_() % 900;       // heap blocks
    return 1001 + rng_() % (max - 1000);         // several KiB
  }

  Op Begin(OpType t, const std::string& key) {
    Op op;
    op.client = id_;
    op.type = t;
    op.key = key;
    op.call_ns = NowNs();
    return op;
  }
  void End(Op op) {
    ops_.push_back(std::move(op));
    ++stats_.ops;
  }

  void Error(const std::string& what) {
    ++stats_.errors;
    if (stats_.first_error.empty()) stats_.first_error = what;
  }

  // After an error that may have broken the connection.
  void MaybeReconnect(const rkv::Status& s) {
    if (s.code() != rkv::Code::kConnectionLost && s.code() != rkv::Code::kTimeout) return;
    ++stats_.reconnects;
    rkv::Status r = client_->Reconnect();
    if (r.code() == rkv::Code::kServerRestarted) {
      Error("server restarted: the history is void");
      fatal_ = true;
    } else if (!r.ok()) {
      Error("reconnect: " + r.ToString());
      fatal_ = true;
    }
  }

  Outcome WriteOutcome(const rkv::Status& s, const std::string& what) {
    if (s.ok()) return Outcome::kOk;
    if (s.IsNotFound()) return Outcome::kNotFound;
    if (s.code() == rkv::Code::kTableFull) ++stats_.table_full;
    Error(what + ": " + s.ToString());
    if (Uncertain(s.code())) {
      ++stats_.unknown;
      MaybeReconnect(s);
      return Outcome::kUnknown;
    }
    return Outcome::kFailed;
  }

  void RecordRead(Op* op, const rkv::Status& s, const std::string& v) {
    ++stats_.gets;
    if (s.ok()) {
      bool valid;
      op->outcome = Outcome::kOk;
      op->value = TokenOf(op->key, v, &valid);
      if (!valid) ++stats_.garbage_reads;
    } else if (s.IsNotFound()) {
      op->outcome = Outcome::kNotFound;
      ++stats_.get_nf;
    } else {
      op->outcome = Outcome::kFailed;
      Error("GET " + op->key + ": " + s.ToString());
    }
  }

  void Get(const std::string& key) {
    uint64_t retries = client_->counters().checksum_retries;
    Op op = Begin(OpType::kGet, key);
    rkv::Status s = client_->Get(key, &value_);
    op.return_ns = NowNs();
    if (client_->counters().checksum_retries != retries) ++stats_.gets_retried;
    RecordRead(&op, s, value_);
    End(std::move(op));
    if (!s.ok() && !s.IsNotFound()) MaybeReconnect(s);
  }

  void MultiGet(const std::string& first) {
    std::vector<std::string_view> keys = {first};
    size_t want = 2 + rng_() % 5;
    for (int tries = 0; keys.size() < want && tries < 20; ++tries) {
      const std::string& k = PickKey();
      if (std::find(keys.begin(), keys.end(), k) == keys.end()) keys.push_back(k);
    }
    uint64_t retries = client_->counters().checksum_retries;
    int64_t call = NowNs();
    rkv::Status s = client_->MultiGet(keys, &values_, &statuses_);
    int64_t ret = NowNs();
    ++stats_.multigets;
    stats_.multiget_keys += keys.size();
    if (client_->counters().checksum_retries != retries) ++stats_.gets_retried;
    for (size_t i = 0; i < keys.size(); ++i) {
      Op op = Begin(OpType::kGet, std::string(keys[i]));
      op.call_ns = call;
      op.return_ns = ret;
      if (s.ok() && i < statuses_.size())
        RecordRead(&op, statuses_[i], values_[i]);
      else
        RecordRead(&op, s.ok() ? rkv::Status(rkv::Code::kIoError, "no status") : s, "");
      End(std::move(op));
    }
    if (!s.ok()) MaybeReconnect(s);
  }

  void Delete(const std::string& key) {
    Op op = Begin(OpType::kDelete, key);
    rkv::Status s = client_->Delete(key);
    op.return_ns = NowNs();
    ++stats_.dels;
    if (s.IsNotFound()) ++stats_.del_nf;
    op.outcome = WriteOutcome(s, "DELETE " + key);
    End(std::move(op));
  }

  uint32_t id_;
  const std::vector<std::string>* hot_;
  const std::vector<std::string>* cold_;
  std::mt19937_64 rng_;
  std::unique_ptr<rkv::Client> client_;
  uint64_t seq_ = 0;
  std::string value_;
  std::vector<std::string> values_;
  std::vector<rkv::Status> statuses_;
  std::vector<Op> ops_;
  Stats stats_;
  bool fatal_ = false;
};

int Fail(const std::string& why) {
  std::fprintf(stderr, "lin_load: %s\n", why.c_str());
  return 2;
}

// Prefill: keys "pf<seed>.<i>" of 8..40 bytes; values mostly inline, some heap blocks.
// Returns the number inserted; *full is set when the server answered TABLE_FULL.
uint64_t Prefill(const rkv::Options& options, uint64_t count, std::atomic<bool>* full,
                 std::string* error) {
  std::atomic<uint64_t> next{0}, done{0};
  std::mutex mu;
  std::vector<std::thread> threads;
  for (int t = 0; t < FLAGS_clients; ++t) {
    threads.emplace_back([&, t] {
      std::unique_ptr<rkv::Client> c;
      rkv::Status s = rkv::Client::Connect(FLAGS_server, options, &c);
      std::mt19937_64 rng(FLAGS_seed * 31 + uint64_t(t));
      for (uint64_t i; s.ok() && !full->load() && (i = next.fetch_add(1)) < count;) {
        std::string key = "pf" + std::to_string(FLAGS_seed) + "." + std::to_string(i);
        key.append(rng() % 33, 'p');
        uint32_t r = rng() % 100;
        size_t size = r < 85 ? 1 + rng() % 56 : r < 97 ? 100 + rng() % 500 : 1000 + rng() % 2000;
        s = c->Put(key, std::string(size, char('A' + i % 26)));
        if (s.code() == rkv::Code::kTableFull) {
          full->store(true);
          s = rkv::Status();
        } else if (s.ok()) {
          done.fetch_add(1);
        }
      }
      if (!s.ok()) {
        std::lock_guard<std::mutex> lock(mu);
        if (error->empty()) *error = "prefill: " + s.ToString();
      }
    });
  }
  for (auto& t : threads) t.join();
  return done.load();
}

}  // namespace

int main(int argc, char** argv) {
  gflags::SetUsageMessage(
      "lin_load --server=ADDR:PORT --clients=8 --ops=N --hot_keys=4 --keys=300 --prefill=0.9 "
      "--seed=S [--history=FILE]");
  gflags::ParseCommandLineFlags(&argc, &argv, true);
  FLAGS_logtostderr = true;
  google::InitGoogleLogging(argv[0]);
  if (FLAGS_clients < 1 || FLAGS_ops < 0 || FLAGS_hot_keys < 0 || FLAGS_keys < 0 ||
      FLAGS_hot_keys + FLAGS_keys < 1 || FLAGS_prefill < 0 || FLAGS_prefill > 1 ||
      FLAGS_max_value < 1001)
    return Fail(
        "bad flags (need clients >= 1, hot_keys + keys >= 1, 0 <= prefill <= 1, "
        "max_value > 1000)");
  rkv::Options options;
  options.connect_timeout_ms = FLAGS_timeout_ms;
  options.rpc_timeout_ms = FLAGS_timeout_ms;
  if (rkv::Status s = rkv::ConnFlags(rkv::Role::kClient, &options.exchange, &options.qp); !s.ok())
    return Fail(s.message());
  std::unique_ptr<rkv::Client> ctl;
  if (rkv::Status s = rkv::Client::Connect(FLAGS_server, options, &ctl); !s.ok())
    return Fail("connect " + FLAGS_server + ": " + s.ToString());
  auto server_stats = [&] {
    std::string text;
    rkv::Status s = ctl->Stats(&text);
    if (!s.ok()) std::fprintf(stderr, "lin_load: stats: %s\n", s.ToString().c_str());
    return ParseStats(text);
  };

  // Test keys: names carry the seed; some are long so that even small values go to the heap.
  std::string prefix = "lin" + std::to_string(FLAGS_seed) + ".";
  std::vector<std::string> hot, cold;
  for (int i = 0; i < FLAGS_hot_keys; ++i) {
    std::string k = prefix + "hot" + std::to_string(i);
    if (i % 4 == 1) k.resize(90, 'h');  // key alone nearly fills a slot: values in the heap
    if (i % 4 == 3) k.resize(40, 'h');
    hot.push_back(k);
  }
  for (int i = 0; i < FLAGS_keys; ++i) {
    std::string k = prefix + "k" + std::to_string(i);
    if (i % 5 == 0) k.resize(60, 'k');
    cold.push_back(k);
  }

  std::vector<std::unique_ptr<Worker>> workers;
  for (int t = 0; t < FLAGS_clients; ++t) {
    workers.push_back(std::make_unique<Worker>(uint32_t(t), &hot, &cold));
    if (!workers.back()->Connect(options)) return Fail("connect " + FLAGS_server);
  }
  // 1. The test keys first (recorded ops), so that they have their slots before the prefill.
  {
    std::vector<std::string> all(hot);
    all.insert(all.end(), cold.begin(), cold.end());
    std::vector<std::thread> ts;
    for (int t = 0; t < FLAGS_clients; ++t)
      ts.emplace_back([&, t] {
        for (size_t i = size_t(t); i < all.size(); i += size_t(FLAGS_clients))
          workers[size_t(t)]->Put(all[i], kMinValue + i % 200);
      });
    for (auto& t : ts) t.join();
  }
  auto before = server_stats();
  double capacity = before["entry_capacity"];
  uint64_t target = uint64_t(FLAGS_prefill * capacity);
  uint64_t have = uint64_t(before["entries"]);
  std::atomic<bool> full{false};
  std::string prefill_error;
  auto t_prefill = Clock::now();
  uint64_t added =
      target > have ? Prefill(options, target - have, &full, &prefill_error) : uint64_t{0};
  double prefill_s = std::chrono::duration<double>(Clock::now() - t_prefill).count();
  if (!prefill_error.empty()) return Fail(prefill_error);
  auto start = server_stats();
  std::printf("lin_load: server %s: entry_capacity %.0f, heap_capacity %.0f; prefill added %" PRIu64
              " keys in %.1f s%s\n",
              FLAGS_server.c_str(), capacity, start["heap_capacity"], added, prefill_s,
              full.load() ? " (stopped at TABLE_FULL)" : "");
  std::printf(
      "lin_load: table at the start: entries %.0f, load %.3f, overflow_entries %.0f, "
      "heap_bytes_in_use %.0f, heap_blocks_moved %.0f\n",
      start["entries"], start["load_factor"], start["overflow_entries"], start["heap_bytes_in_use"],
      start["heap_blocks_moved"]);
  std::fflush(stdout);

  // 2. The run.
  auto t_run = Clock::now();
  int64_t per = FLAGS_ops / FLAGS_clients;
  std::vector<std::thread> ts;
  for (int t = 0; t < FLAGS_clients; ++t) {
    int64_t mine = per + (t < FLAGS_ops % FLAGS_clients ? 1 : 0);
    Worker* w = workers[size_t(t)].get();
    int64_t base = int64_t(w->ops()->size());
    ts.emplace_back([w, mine, base] { w->Run(base + mine); });
  }
  std::atomic<bool> run_done{false};
  std::atomic<int> replays{0};
  std::thread rogue;
  if (FLAGS_rogue_replays > 0) {
    rogue = std::thread([&] {
      std::unique_ptr<rkv::Client> c;
      if (!rkv::Client::Connect(FLAGS_server, options, &c).ok()) return;
      const std::string& key = hot.empty() ? cold[0] : hot[0];
      std::string v;
      while (!run_done.load() && replays.load() < FLAGS_rogue_replays) {
        std::this_thread::sleep_for(std::chrono::milliseconds(50));
        if (!c->Get(key, &v).ok()) continue;
        std::this_thread::sleep_for(std::chrono::milliseconds(20));
        if (!run_done.load() && c->Put(key, v).ok()) replays.fetch_add(1);
      }
    });
  }
  for (auto& t : ts) t.join();
  run_done.store(true);
  if (rogue.joinable()) rogue.join();
  if (FLAGS_rogue_replays > 0)
    std::printf("lin_load: negative control: an unrecorded client put back %d old values\n",
                replays.load());
  double run_s = std::chrono::duration<double>(Clock::now() - t_run).count();
  auto end = server_stats();

  Stats total;
  rkv::lincheck::History history;
  bool fatal = false;
  for (auto& w : workers) {
    total.Add(w->stats());
    history.Append(*w->ops());
    fatal |= w->fatal();
  }
  const rkv::ClientCounters& c = total.counters;
  std::printf("lin_load: %" PRIu64
              " ops by %d clients (%zu hot keys, %zu other keys) in %.1f s: "
              "%.0f ops/s\n",
              total.ops, FLAGS_clients, hot.size(), cold.size(), run_s, double(total.ops) / run_s);
  std::printf("lin_load:   GET %" PRIu64 " (NOT_FOUND %" PRIu64 ", needed checksum retries %" PRIu64
              ", garbage %" PRIu64 "; %" PRIu64 " MultiGet calls over %" PRIu64 " keys)\n",
              total.gets, total.get_nf, total.gets_retried, total.garbage_reads, total.multigets,
              total.multiget_keys);
  std::printf("lin_load:   PUT %" PRIu64 " (inline %" PRIu64 ", heap %" PRIu64 "), DELETE %" PRIu64
              " (NOT_FOUND %" PRIu64 ")\n",
              total.puts, total.puts_inline, total.puts_heap, total.dels, total.del_nf);
  std::printf("lin_load:   client counters: checksum_retries %" PRIu64
              ", READs/GET %.2f, round trips/GET %.2f\n",
              c.checksum_retries, c.gets ? double(c.reads_posted) / double(c.gets) : 0,
              c.gets ? double(c.round_trips) / double(c.gets) : 0);
  std::printf("lin_load:   errors %" PRIu64 " (TABLE_FULL %" PRIu64 ", unknown outcome %" PRIu64
              ", reconnects %" PRIu64 ")%s%s\n",
              total.errors, total.table_full, total.unknown, total.reconnects,
              total.first_error.empty() ? "" : "; first: ", total.first_error.c_str());
  std::printf(
      "lin_load: table at the end: entries %.0f, load %.3f, overflow_entries %.0f, "
      "heap_bytes_in_use %.0f, heap_blocks_moved %.0f\n",
      end["entries"], end["load_factor"], end["overflow_entries"], end["heap_bytes_in_use"],
      end["heap_blocks_moved"]);
  std::fflush(stdout);

  if (!FLAGS_history.empty()) {
    std::string err;
    if (!history.Save(FLAGS_history, &err)) {
      std::fprintf(stderr, "lin_load: %s\n", err.c_str());
      return 1;
    }
    std::printf("lin_load: history (%zu ops) written to %s\n", history.size(),
                FLAGS_history.c_str());
  }
  bool ok = total.errors == 0 && !fatal;
  if (FLAGS_check) {
    rkv::lincheck::CheckReport report = rkv::lincheck::Checker().Check(history);
    std::printf("%s\n", report.Summary().c_str());
    ok = ok && report.ok();
  }
  if (total.errors) std::printf("lin_load: FAILED: %" PRIu64 " unexpected errors\n", total.errors);
  std::fflush(stdout);
  return ok ? 0 : 1;
}
