// SPDX-License-Identifier: Apache-2.0
// lin_load: a load that records a history and checks it for per-key linearizability.
//   lin_load --server=ADDR:PORT --clients=8 --ops=N --hot_keys=4 --keys=300 --prefill=0.9
//            --seed=S [--history=FILE]
// 1. Inserts the test keys (hot_keys + keys; names carry the seed), then prefills the table
//    with other keys of mixed sizes (inline, heap, overflow) to --prefill of the server's
//    entry_capacity (stops early at TABLE_FULL; short of both, or with no entry_capacity in the
//    server's stats, exit 1).
// 2. Runs about N operations split over --clients threads, each with its own rkv::Client:
//    half of them on the hot keys; GET ~50% (some as MultiGet over several keys), PUT ~40%,
//    DELETE ~10%; values from 18 B (inline in the slot) to --max_value bytes (heap blocks),
//    each unique per write: "WRITER.SEQ:" + padding + "#" + XXH3(key, body) in hex, so a torn,
//    garbage or other key's value read is recognizable (it becomes a token no PUT wrote).
// 3. Records every op (call/return on steady_clock, result) into a History
//    (tests/lincheck/history.h), writes it to --history, checks it (tests/lincheck/checker.h)
//    and prints what the run exercised and the checker's summary.
// Across server restarts (tests/integration/durability.sh): --reconnect sets the client's
// auto_reconnect (bounded backoff, a 60 s reconnect budget that spans a restart), so the clients
// keep going while kvserver is killed and started again on the same data directory:
//  - a PUT/DELETE that returns kConnectionLost/kServerRestarted/kTimeout is recorded with an
//    unknown outcome (it may or may not have been applied), or as failed when the client says it
//    was not sent at all ("... was not applied"); a GET that fails is dropped from the history
//    (reads are retried by the client after a reconnect). Such errors are expected, not counted
//    as errors; a reconnect that fails within its budget is.
//  - --duration_s runs the load for a time instead of --ops; --stop_file ends it when the file
//    appears (the test creates it after the last restart). The prefill runs once, at the start.
//  - --final_reads: after the run, every test key is read once more (recorded in the history).
//  - --owned_keys=N: N more keys per client that only that client writes (sequential PUTs of
//    unique values and DELETEs, ~1/4 of its ops). After the final reads a plain durability
//    tally checks each: if its last acknowledged write was PUT v, the final read returns v or
//    the value of a later unknown-outcome PUT (NOT_FOUND if a later DELETE's outcome is
//    unknown); if it was a DELETE (OK or NOT_FOUND), NOT_FOUND or a later unknown-outcome PUT's
//    value. (An unknown write whose reconnect found the same server instance may still be
//    executed after later writes, so such a write counts as "later" wherever it was issued; one
//    lost with a killed server cannot: the restarted server replays its log before it serves.)
//    Prints "durability: ..." with the counts and each violation; any violation fails.
// --batch=FILE (a helper for durability.sh, instead of the load): runs FILE's commands in order
// on one connection, one per line: "put KEY @VALUEFILE", "del KEY", "get KEY @VALUEFILE" (the
// key must hold exactly that file's bytes) or "get KEY -" (must be absent). Prints one line per
// command ("batch: put k: OK", "batch: put k: IO_ERROR: ...", "batch: get k: MISMATCH ...");
// stops at the first PUT or DELETE that fails; exit 0 if every command did what it should, 1
// otherwise.
// --avoid_slots_of=K1,K2 (with --server=etcd://...): no test key falls in the slot of K1 or K2
// (a key that would gets "~N" appended until it does not), so that the load writes nothing to
// those slots (replicas.sh's diverge case: a primary dying mid-write writes no more).
// Exit status: 0 linearizable and no unexpected errors; 1 violations (linearizability or the
// durability tally), inconclusive keys, unexpected errors (any error status; TABLE_FULL on a
// test key is a sizing problem of the driver) or a prefill short of --prefill; 2 bad flags or
// no connection.
// Threads: one per client; each records into its own vector; main merges after join.
#include <gflags/gflags.h>
#include <glog/logging.h>
#include <unistd.h>
#include <xxhash.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cinttypes>
#include <cstdio>
#include <fstream>
#include <iterator>
#include <map>
#include <memory>
#include <mutex>
#include <random>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "common/auth.h"
#include "common/cluster/slot_map.h"
#include "common/table/layout.h"
#include "common/verbs/conn_flags.h"
#include "rkv/client.h"
#include "tests/integration/read_slot_map.h"
#include "tests/integration/stats_text.h"
#include "tests/lincheck/checker.h"
#include "tests/lincheck/history.h"

DEFINE_string(server, "127.0.0.1:7470", "kvserver ADDR:PORT");
DEFINE_string(auth_token_file, "", "the server's token (kvserver --auth_token_file); empty: none");
DEFINE_int32(timeout_ms, 10000, "connect and RPC timeout");
DEFINE_int32(clients, 8, "client threads, each with its own rkv::Client");
DEFINE_int64(ops, 100000, "operations in the run phase (a MultiGet counts once per key)");
DEFINE_int32(hot_keys, 4, "hot keys: half of the operations go to them");
DEFINE_int32(keys, 300, "other test keys: the other half");
DEFINE_double(prefill, 0.9, "fill the table with other keys up to this share of entry_capacity");
DEFINE_uint64(seed, 1, "random seed; also names the keys (lin<seed>.*)");
DEFINE_string(history, "", "write the history here (tests/lincheck/history.h format)");
DEFINE_double(multiget_share, 0.15, "share of GETs issued as a MultiGet of 2-6 keys");
DEFINE_double(execute_share, 0.15,
              "share of operations issued as a pipelined batch (rkv::Client::Execute) of 2-8 "
              "GETs, PUTs and DELETEs; each is recorded with the batch's call and return times");
DEFINE_int32(max_value, 6144, "largest value in bytes");
DEFINE_bool(check, true, "run the checker on the history");
DEFINE_int32(stale_map_clients, 0,
             "cluster addresses: this many clients do not watch the slot map (they learn of a "
             "move only when a server redirects them: a deliberately stale map)");
DEFINE_int32(rogue_replays, 0,
             "negative control: during the run, a client that records nothing puts back, up to "
             "this many times, a value of the first test key that it read 20 ms earlier, and once "
             "after the run a value a recorded PUT had replaced before a recorded read; the "
             "checker must then report violations (exit 1)");
DEFINE_bool(reconnect, false,
            "clients reconnect automatically (rkv::Options::auto_reconnect, backoff 50..500 ms, "
            "60 s budget): the load survives kvserver restarts; lost writes are recorded with an "
            "unknown outcome, failed reads are dropped");
DEFINE_bool(failover, false,
            "a replicated cluster losing servers (tests/integration/replicas.sh): a write that "
            "returns CONNECTION_LOST/TIMEOUT is recorded with an unknown outcome, one refused "
            "UNAVAILABLE/TRY_AGAIN/MOVED as not applied, a GET that fails so is dropped; none "
            "counts as an error. Prints the longest stretches without a successful write and read");
DEFINE_bool(heap_busy_ok, false,
            "a write refused TABLE_FULL \"value heap busy\" (the server's cleaner waited its 10 s "
            "for a block a stalled writer holds at the log's tail) is recorded as not applied and "
            "counted, not as an error: for the ThreadSanitizer server, which stalls for seconds at "
            "times under TCG (tests/integration/linearizability.sh LIN_HEAP_BUSY_OK)");
DEFINE_double(duration_s, 0, "run phase length in seconds instead of --ops (0: use --ops)");
DEFINE_string(stop_file, "", "end the run phase when this file exists (checked every 50 ms)");
DEFINE_bool(final_reads, false,
            "after the run, read every test key once more (part of the history)");
DEFINE_string(batch, "",
              "instead of the load: run the put/get/del commands of this file (see the file "
              "comment) and check what the gets return");
DEFINE_int32(owned_keys, 0,
             "keys per client written only by that client; checked by a durability tally after "
             "the final reads (implies --final_reads)");

DEFINE_string(avoid_slots_of, "",
              "comma-separated keys: no test key falls in any of their slots (a cluster address "
              "only; the map is read once at the start)");

namespace {

using Clock = std::chrono::steady_clock;
using rkv::lincheck::Op;
using rkv::lincheck::OpType;
using rkv::lincheck::Outcome;

// --avoid_slots_of: the slots no test key may fall in (empty: any), set by main before the keys.
struct AvoidSlots {
  std::vector<uint32_t> slots;
  uint64_t seed = 0;
  uint32_t num_slots = 0;
};
AvoidSlots g_avoid;

// `k`, or k + "~N" for the first N that puts it outside every avoided slot.
std::string Avoiding(std::string k) {
  auto bad = [](const std::string& c) {
    const uint32_t s = rkv::cluster::SlotMap::SlotOf(c, g_avoid.seed, g_avoid.num_slots);
    return std::find(g_avoid.slots.begin(), g_avoid.slots.end(), s) != g_avoid.slots.end();
  };
  if (g_avoid.slots.empty() || !bad(k)) return k;
  for (int n = 0;; ++n) {
    std::string c = k + "~" + std::to_string(n);
    if (!bad(c)) return c;
  }
}

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
  uint64_t errors = 0, unknown = 0, table_full = 0, heap_busy = 0, garbage_reads = 0,
           reconnects = 0;
  uint64_t not_sent = 0, gets_dropped = 0, final_reads = 0, batches = 0, batch_ops = 0;
  rkv::ClientCounters counters;
  uint64_t max_server_restarts = 0;  // the most restarts one client saw
  std::string first_error, first_lost;
  // The longest operation that failed (dropped or of unknown outcome), with its status: where
  // a failover's stretch without successes went.
  int64_t slowest_failed_ns = 0;
  std::string slowest_failed;
  void Add(const Stats& o) {
    if (o.slowest_failed_ns > slowest_failed_ns)
      slowest_failed_ns = o.slowest_failed_ns, slowest_failed = o.slowest_failed;
    ops += o.ops, gets += o.gets, get_nf += o.get_nf, gets_retried += o.gets_retried;
    multigets += o.multigets, multiget_keys += o.multiget_keys, puts += o.puts;
    batches += o.batches, batch_ops += o.batch_ops;
    puts_inline += o.puts_inline, puts_heap += o.puts_heap, dels += o.dels, del_nf += o.del_nf;
    errors += o.errors, unknown += o.unknown, table_full += o.table_full;
    heap_busy += o.heap_busy;
    garbage_reads += o.garbage_reads, reconnects += o.reconnects;
    not_sent += o.not_sent, gets_dropped += o.gets_dropped, final_reads += o.final_reads;
    counters.gets += o.counters.gets, counters.reads_posted += o.counters.reads_posted;
    counters.round_trips += o.counters.round_trips;
    counters.checksum_retries += o.counters.checksum_retries, counters.rpcs += o.counters.rpcs;
    counters.reconnects += o.counters.reconnects;
    counters.server_restarts += o.counters.server_restarts;
    counters.cache_hits += o.counters.cache_hits, counters.cache_misses += o.counters.cache_misses;
    counters.abandoned_waits += o.counters.abandoned_waits;
    max_server_restarts = std::max(max_server_restarts, o.counters.server_restarts);
    if (first_error.empty()) first_error = o.first_error;
    if (first_lost.empty()) first_lost = o.first_lost;
  }
};

// The run phase ends when this is set (--duration_s, --stop_file, or --ops reached by all).
std::atomic<bool> g_stop{false};

// A failure the auto-reconnecting client reports for a lost connection (rkv/client.h,
// "Reconnection"): expected while kvserver restarts.
bool Lost(rkv::Code c) {
  return c == rkv::Code::kConnectionLost || c == rkv::Code::kServerRestarted ||
         c == rkv::Code::kTimeout;
}
// The client could not reconnect within its budget: the server stayed away too long.
bool ReconnectFailed(const rkv::Status& s) {
  return s.message().find("reconnecting failed") != std::string::npos;
}

// One write to an owned key, in the order its client issued them (outcome kFailed excluded).
struct OwnedWrite {
  OpType type;
  Outcome outcome;
  std::string token;           // PUT: the token written
  bool may_land_late = false;  // unknown outcome, same server instance: may come after later writes
};
struct OwnedKey {
  std::string key;
  std::vector<OwnedWrite> writes;
  bool read = false;     // the final read succeeded
  bool present = false;  // ... and found the key
  std::string token;     // ... with this token
};

// --failover: refused without being applied (the router found no live owner, or the server
// refused the write before replicating it).
bool Refused(rkv::Code c) {
  return c == rkv::Code::kUnavailable || c == rkv::Code::kTryAgain || c == rkv::Code::kMoved;
}

bool Uncertain(rkv::Code c) {
  return c == rkv::Code::kConnectionLost || c == rkv::Code::kTimeout || c == rkv::Code::kIoError ||
         c == rkv::Code::kProtocolError;
}

// One client thread: its Client, its RNG, its part of the history.
class Worker {
 public:
  Worker(uint32_t id, const std::vector<std::string>* hot, const std::vector<std::string>* cold)
      : id_(id), hot_(hot), cold_(cold), rng_(FLAGS_seed * 7919 + id) {
    for (int i = 0; i < FLAGS_owned_keys; ++i) {
      std::string k = "lin" + std::to_string(FLAGS_seed) + ".own" + std::to_string(id) + "." +
                      std::to_string(i);
      if (i % 5 == 0) k.resize(60, 'o');  // values in the heap
      owned_.push_back(OwnedKey{Avoiding(k), {}, false, false, {}});
    }
  }

  bool Connect(const rkv::Options& options) {
    rkv::Status s = rkv::Client::Connect(FLAGS_server, options, &client_);
    if (!s.ok()) Error("connect: " + s.ToString());
    return s.ok();
  }

  // The run phase: `ops` history ops (or until g_stop when ops < 0).
  void Run(int64_t ops) {
    std::uniform_real_distribution<double> u(0, 1);
    while ((ops < 0 || int64_t(stats_.ops) < ops) && !fatal_ && !g_stop.load()) {
      if (!owned_.empty() && u(rng_) < 0.25) {
        OwnedOp(&owned_[rng_() % owned_.size()]);
        continue;
      }
      const std::string& key = PickKey();
      if (u(rng_) < FLAGS_execute_share) {
        Execute(key);
        continue;
      }
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

  // Returns the recorded outcome; *token gets the token written.
  Outcome Put(const std::string& key, size_t size, std::string* token = nullptr) {
    Op op = Begin(OpType::kPut, key);
    op.value = std::to_string(id_) + "." + std::to_string(++seq_);
    if (token) *token = op.value;
    std::string v = MakeValue(key, id_, seq_, size);
    rkv::Status s = client_->Put(key, v);
    op.return_ns = NowNs();
    ++stats_.puts;
    (key.size() + v.size() <= rkv::layout::kInlineCapacity ? stats_.puts_inline
                                                           : stats_.puts_heap) += 1;
    op.outcome = WriteOutcome(s, "PUT " + key);
    Outcome o = op.outcome;
    End(std::move(op));
    return o;
  }

  // After the run: reads each of `keys` once (recorded), retrying a read that fails (dropped)
  // up to 5 times; then the owned keys, remembering what was read for the tally.
  void FinalReads(const std::vector<std::string>& keys) {
    for (const std::string& k : keys) FinalRead(k, nullptr);
    for (OwnedKey& o : owned_) FinalRead(o.key, &o);
  }

  // One recorded read of `key` after the run, as FinalReads does (the negative control).
  bool ReadOnce(const std::string& key) { return FinalRead(key, nullptr); }

  // The durability tally of the owned keys (see the file comment). Adds to the counts and
  // appends a line per violation to *report.
  void Tally(uint64_t* acked_puts, uint64_t* acked_dels, uint64_t* unknown, uint64_t* checked,
             uint64_t* unread, uint64_t* violations, std::vector<std::string>* report) const {
    for (const OwnedKey& o : owned_) {
      size_t last_ack = o.writes.size();  // none: the key started absent
      for (size_t i = 0; i < o.writes.size(); ++i) {
        const OwnedWrite& w = o.writes[i];
        if (w.outcome == Outcome::kUnknown) {
          ++*unknown;
        } else {
          ++*(w.type == OpType::kPut ? acked_puts : acked_dels);
          last_ack = i;
        }
      }
      if (!o.read) {
        ++*unread;
        continue;
      }
      ++*checked;
      // Allowed final states: the last acknowledged write's, or any later unknown write's.
      bool absent_ok = last_ack == o.writes.size() || o.writes[last_ack].type == OpType::kDelete;
      std::vector<std::string> tokens;
      if (!absent_ok) tokens.push_back(o.writes[last_ack].token);
      size_t later = last_ack == o.writes.size() ? 0 : last_ack + 1;
      for (size_t i = 0; i < o.writes.size(); ++i) {
        if (i < later && !o.writes[i].may_land_late) continue;
        if (o.writes[i].type == OpType::kDelete)
          absent_ok = true;
        else
          tokens.push_back(o.writes[i].token);
      }
      bool ok =
          o.present ? std::find(tokens.begin(), tokens.end(), o.token) != tokens.end() : absent_ok;
      if (ok) continue;
      ++*violations;
      std::string expect;
      if (last_ack == o.writes.size())
        expect = "no acknowledged write (absent)";
      else if (o.writes[last_ack].type == OpType::kPut)
        expect = "last acknowledged write PUT " + o.writes[last_ack].token;
      else
        expect = std::string("last acknowledged write DELETE (") +
                 (o.writes[last_ack].outcome == Outcome::kOk ? "OK" : "NOT_FOUND") + ")";
      std::string unknowns;
      for (size_t i = 0; i < o.writes.size(); ++i)
        if (i >= later || o.writes[i].may_land_late)
          unknowns += std::string(" ") +
                      (o.writes[i].type == OpType::kPut ? "PUT " + o.writes[i].token : "DELETE");
      report->push_back("key " + o.key + ": final read " +
                        (o.present ? "returned " + o.token : std::string("NOT_FOUND")) + "; " +
                        expect + "; unknown-outcome writes that may come after it:" +
                        (unknowns.empty() ? " none" : unknowns) + "; " +
                        std::to_string(o.writes.size()) + " writes in all");
    }
  }

  const Stats& stats() {
    stats_.counters = client_ ? client_->counters() : rkv::ClientCounters();
    return stats_;
  }
  size_t owned() const { return owned_.size(); }
  std::vector<Op>* ops() { return &ops_; }
  bool fatal() const { return fatal_; }

 private:
  // One op on an owned key (no other client writes it): GET 30%, PUT 55%, DELETE 15%.
  void OwnedOp(OwnedKey* o) {
    uint32_t r = rng_() % 100;
    if (r < 30) {
      Get(o->key);
      return;
    }
    OwnedWrite w{r < 85 ? OpType::kPut : OpType::kDelete, Outcome::kOk, {}};
    w.outcome = w.type == OpType::kPut ? Put(o->key, ValueSize(), &w.token) : Delete(o->key);
    w.may_land_late = w.outcome == Outcome::kUnknown && last_code_ != rkv::Code::kServerRestarted;
    if (w.outcome != Outcome::kFailed) o->writes.push_back(std::move(w));
  }

  // Returns whether the read was recorded.
  bool FinalRead(const std::string& key, OwnedKey* o) {
    // --failover: a slot may be between owners for a few seconds; read again for up to 15 s.
    const int attempts = FLAGS_failover ? 75 : 6;
    rkv::Status s;
    for (int attempt = 0; attempt < attempts; ++attempt) {
      if (attempt > 0 && FLAGS_failover)
        std::this_thread::sleep_for(std::chrono::milliseconds(200));
      Op op = Begin(OpType::kGet, key);
      s = client_->Get(key, &value_);
      op.return_ns = NowNs();
      RecordRead(&op, s, value_);
      if (op.outcome == Outcome::kFailed) continue;  // dropped; read again
      ++stats_.final_reads;
      if (o) {
        o->read = true;
        o->present = op.outcome == Outcome::kOk;
        o->token = op.value;
      }
      End(std::move(op));
      return true;
    }
    Error("final read of " + key + " failed " + std::to_string(attempts) +
          " times; last: " + s.ToString());
    return false;
  }

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
    ++stats_.ops;
    if (op.outcome == Outcome::kFailed || op.outcome == Outcome::kUnknown) {
      const int64_t took = op.return_ns - op.call_ns;
      if (took > stats_.slowest_failed_ns) {
        stats_.slowest_failed_ns = took;
        stats_.slowest_failed = op.key + ": " + last_failure_;
      }
    }
    // With --reconnect a failed GET is dropped from the history (it has no result).
    if ((FLAGS_reconnect || FLAGS_failover) && op.type == OpType::kGet &&
        op.outcome == Outcome::kFailed)
      return;
    ops_.push_back(std::move(op));
  }

  void Error(const std::string& what) {
    ++stats_.errors;
    if (stats_.first_error.empty()) stats_.first_error = what;
  }

  // After an error that may have broken the connection (without --reconnect: the client's own
  // reconnects then handle it).
  void MaybeReconnect(const rkv::Status& s) {
    if (FLAGS_reconnect || FLAGS_failover) return;
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
    last_code_ = s.code();
    if (s.ok()) return Outcome::kOk;
    if (s.IsNotFound()) return Outcome::kNotFound;
    last_failure_ = s.ToString();
    if (FLAGS_failover && (Lost(s.code()) || Refused(s.code()))) {
      if (stats_.first_lost.empty()) stats_.first_lost = what + ": " + s.ToString();
      if (Refused(s.code())) {
        ++stats_.not_sent;
        return Outcome::kFailed;  // refused by the router or the server: not applied
      }
      ++stats_.unknown;
      return Outcome::kUnknown;
    }
    if (FLAGS_reconnect && Lost(s.code())) {
      // The client reconnected (or tried to): expected while kvserver restarts.
      if (ReconnectFailed(s)) Error(what + ": " + s.ToString());
      if (stats_.first_lost.empty()) stats_.first_lost = what + ": " + s.ToString();
      if (s.message().find("was not applied") != std::string::npos) {
        ++stats_.not_sent;
        return Outcome::kFailed;  // never sent: definitely not applied
      }
      ++stats_.unknown;
      return Outcome::kUnknown;
    }
    if (s.code() == rkv::Code::kTableFull) ++stats_.table_full;
    if (FLAGS_heap_busy_ok && s.code() == rkv::Code::kTableFull &&
        s.message().find("value heap busy") != std::string::npos) {
      ++stats_.heap_busy;
      return Outcome::kFailed;  // refused: definitely not applied
    }
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
      last_failure_ = s.ToString();
      if ((FLAGS_reconnect && Lost(s.code())) ||
          (FLAGS_failover && (Lost(s.code()) || Refused(s.code())))) {
        ++stats_.gets_dropped;  // dropped from the history (End skips failed GETs)
        if (ReconnectFailed(s)) Error("GET " + op->key + ": " + s.ToString());
        if (stats_.first_lost.empty()) stats_.first_lost = "GET " + op->key + ": " + s.ToString();
      } else {
        Error("GET " + op->key + ": " + s.ToString());
      }
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

  // A pipelined batch: 2-8 operations on keys picked as the others are (a key may repeat: its
  // writes apply in batch order, and the checker treats the batch's operations as concurrent).
  void Execute(const std::string& first) {
    std::uniform_real_distribution<double> u(0, 1);
    const size_t n = 2 + rng_() % 7;
    std::vector<std::string> keys(n), values(n), got(n), tokens(n);
    std::vector<rkv::BatchOp> ops(n);
    for (size_t i = 0; i < n; ++i) {
      keys[i] = i == 0 ? first : PickKey();
      rkv::BatchOp& o = ops[i];
      o.key = keys[i];
      const double r = u(rng_);
      if (r < 0.5) {
        o.type = rkv::BatchOp::Type::kGet;
        o.result = &got[i];
      } else if (r < 0.9) {
        o.type = rkv::BatchOp::Type::kPut;
        tokens[i] = std::to_string(id_) + "." + std::to_string(++seq_);
        values[i] = MakeValue(keys[i], id_, seq_, ValueSize());
        o.value = values[i];
      } else {
        o.type = rkv::BatchOp::Type::kDelete;
      }
    }
    const uint64_t retries = client_->counters().checksum_retries;
    const int64_t call = NowNs();
    rkv::Status s = client_->Execute(&ops);
    const int64_t ret = NowNs();
    ++stats_.batches;
    stats_.batch_ops += n;
    if (client_->counters().checksum_retries != retries) ++stats_.gets_retried;
    for (size_t i = 0; i < n; ++i) {
      const rkv::BatchOp& o = ops[i];
      Op op = Begin(o.type == rkv::BatchOp::Type::kGet   ? OpType::kGet
                    : o.type == rkv::BatchOp::Type::kPut ? OpType::kPut
                                                         : OpType::kDelete,
                    keys[i]);
      op.call_ns = call;
      op.return_ns = ret;
      if (o.type == rkv::BatchOp::Type::kGet) {
        RecordRead(&op, o.status, got[i]);
      } else {
        if (o.type == rkv::BatchOp::Type::kPut) {
          op.value = tokens[i];
          ++stats_.puts;
          (keys[i].size() + values[i].size() <= rkv::layout::kInlineCapacity ? stats_.puts_inline
                                                                             : stats_.puts_heap) +=
              1;
        } else {
          ++stats_.dels;
          if (o.status.IsNotFound()) ++stats_.del_nf;
        }
        op.outcome = WriteOutcome(
            o.status,
            std::string(o.type == rkv::BatchOp::Type::kPut ? "batch PUT " : "batch DELETE ") +
                keys[i]);
      }
      End(std::move(op));
    }
    if (!s.ok()) MaybeReconnect(s);
  }

  Outcome Delete(const std::string& key) {
    Op op = Begin(OpType::kDelete, key);
    rkv::Status s = client_->Delete(key);
    op.return_ns = NowNs();
    ++stats_.dels;
    if (s.IsNotFound()) ++stats_.del_nf;
    op.outcome = WriteOutcome(s, "DELETE " + key);
    Outcome o = op.outcome;
    End(std::move(op));
    return o;
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
  std::vector<OwnedKey> owned_;
  rkv::Code last_code_ = rkv::Code::kOk;  // of the last write
  std::string last_failure_;  // the status of the last failed operation (End records it)
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

// --batch: see the file comment.
int RunBatch(rkv::Client* c) {
  std::ifstream in(FLAGS_batch);
  if (!in) return Fail("cannot read " + FLAGS_batch);
  std::string line, value;
  int bad = 0, n = 0;
  while (std::getline(in, line)) {
    if (line.empty() || line[0] == '#') continue;
    ++n;
    std::istringstream f(line);
    std::string cmd, key, arg, expect;
    f >> cmd >> key >> arg;
    bool absent = arg == "-";
    if (!arg.empty() && arg[0] == '@') {
      std::ifstream vf(arg.substr(1), std::ios::binary);
      if (!vf) return Fail("batch line " + std::to_string(n) + ": cannot read " + arg.substr(1));
      expect.assign(std::istreambuf_iterator<char>(vf), std::istreambuf_iterator<char>());
    }
    if (key.empty() || (cmd == "put" && arg.empty()) || (cmd == "get" && arg.empty()) ||
        (cmd != "put" && cmd != "get" && cmd != "del"))
      return Fail("batch line " + std::to_string(n) + ": bad command '" + line + "'");
    if (cmd == "put" || cmd == "del") {
      rkv::Status s = cmd == "put" ? c->Put(key, expect) : c->Delete(key);
      std::printf("batch: %s %s: %s\n", cmd.c_str(), key.c_str(), s.ToString().c_str());
      if (!s.ok() && !(cmd == "del" && s.IsNotFound())) {
        std::printf("batch: stopped at command %d\n", n);
        ++bad;
        break;
      }
      continue;
    }
    rkv::Status s = c->Get(key, &value);
    std::string verdict;
    if (s.IsNotFound()) {
      verdict = absent ? "NOT_FOUND, as expected" : "NOT_FOUND, MISMATCH";
    } else if (!s.ok()) {
      verdict = s.ToString() + ", MISMATCH";
    } else if (absent) {
      verdict = "present (" + std::to_string(value.size()) + " bytes), MISMATCH: expected absent";
    } else if (value != expect) {
      verdict = "MISMATCH: " + std::to_string(value.size()) + " bytes '" + value.substr(0, 40) +
                "', expected " + std::to_string(expect.size()) + " bytes";
    } else {
      verdict = "OK (" + std::to_string(value.size()) + " bytes as expected)";
    }
    if (verdict.find("MISMATCH") != std::string::npos) ++bad;
    std::printf("batch: get %s: %s\n", key.c_str(), verdict.c_str());
  }
  std::printf("batch: %d commands, %d not as expected\n", n, bad);
  return bad == 0 ? 0 : 1;
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
      FLAGS_max_value < 1001 || FLAGS_duration_s < 0 || FLAGS_owned_keys < 0)
    return Fail(
        "bad flags (need clients >= 1, hot_keys + keys >= 1, 0 <= prefill <= 1, "
        "max_value > 1000, duration_s >= 0, owned_keys >= 0)");
  if (FLAGS_owned_keys > 0) FLAGS_final_reads = true;
  if (!FLAGS_avoid_slots_of.empty()) {
    rkv::cluster::SlotMap map;
    if (rkv::Status s = rkv::integration::ReadSlotMap(FLAGS_server, &map); !s.ok())
      return Fail("--avoid_slots_of: " + s.ToString());
    g_avoid.seed = map.slot_seed();
    g_avoid.num_slots = map.num_slots();
    std::stringstream keys(FLAGS_avoid_slots_of);
    for (std::string k; std::getline(keys, k, ',');)
      if (!k.empty()) g_avoid.slots.push_back(map.SlotOf(k));
    if (g_avoid.slots.size() >= map.num_slots())
      return Fail("--avoid_slots_of: every slot avoided");
  }
  rkv::Options options;
  options.connect_timeout_ms = FLAGS_timeout_ms;
  options.rpc_timeout_ms = FLAGS_timeout_ms;
  if (FLAGS_reconnect) {
    options.auto_reconnect = true;
    options.reconnect_initial_backoff_ms = 50;
    options.reconnect_max_backoff_ms = 500;
    options.reconnect_timeout_ms = 60000;  // spans a restart (recovery included)
  }
  if (rkv::Status s = rkv::ConnFlags(rkv::Role::kClient, &options.exchange, &options.qp); !s.ok())
    return Fail(s.message());
  if (!FLAGS_auth_token_file.empty()) {
    if (rkv::Status s = rkv::auth::LoadTokenFile(FLAGS_auth_token_file, &options.auth_token);
        !s.ok())
      return Fail(s.message());
  }
  std::unique_ptr<rkv::Client> ctl;
  if (rkv::Status s = rkv::Client::Connect(FLAGS_server, options, &ctl); !s.ok())
    return Fail("connect " + FLAGS_server + ": " + s.ToString());
  if (!FLAGS_batch.empty()) return RunBatch(ctl.get());
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
    hot.push_back(Avoiding(k));
  }
  for (int i = 0; i < FLAGS_keys; ++i) {
    std::string k = prefix + "k" + std::to_string(i);
    if (i % 5 == 0) k.resize(60, 'k');
    cold.push_back(Avoiding(k));
  }

  std::vector<std::unique_ptr<Worker>> workers;
  for (int t = 0; t < FLAGS_clients; ++t) {
    workers.push_back(std::make_unique<Worker>(uint32_t(t), &hot, &cold));
    rkv::Options o = options;
    if (t < FLAGS_stale_map_clients) o.watch_cluster_map = false;
    if (!workers.back()->Connect(o)) return Fail("connect " + FLAGS_server);
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
  // The table must be as full as asked (or full): a run on an empty table would check
  // nothing of what --prefill is for (overflow entries, heap blocks, the cleaner).
  if (FLAGS_prefill > 0 && !full.load() && !(capacity > 0 && start["entries"] >= double(target))) {
    std::fprintf(stderr,
                 "lin_load: FAILED: prefill to %.2f of entry_capacity %.0f (%" PRIu64
                 " entries) not reached: %.0f entries after adding %" PRIu64 " keys\n",
                 FLAGS_prefill, capacity, target, start["entries"], added);
    return 1;
  }
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

  // 2. The run: --ops, or --duration_s / --stop_file.
  {
    // The history's clock (steady) beside the wall clock, to line the history up with logs.
    const auto wall = std::chrono::system_clock::now().time_since_epoch();
    std::printf(
        "lin_load: run phase started (%d clients%s%s) at history time %.3f s = unix "
        "time %.3f s\n",
        FLAGS_clients, FLAGS_reconnect ? ", auto_reconnect" : "",
        FLAGS_owned_keys > 0
            ? (", " + std::to_string(FLAGS_owned_keys) + " owned keys each").c_str()
            : "",
        double(NowNs()) / 1e9,
        double(std::chrono::duration_cast<std::chrono::milliseconds>(wall).count()) / 1e3);
  }
  std::fflush(stdout);
  auto t_run = Clock::now();
  const int64_t run_ns = NowNs();  // the run phase's ops are those called from here on
  const bool timed = FLAGS_duration_s > 0 || !FLAGS_stop_file.empty();
  std::thread stopper;
  std::atomic<bool> joined{false};
  if (timed) {
    stopper = std::thread([&] {
      auto deadline = t_run + std::chrono::duration_cast<Clock::duration>(
                                  std::chrono::duration<double>(FLAGS_duration_s));
      while (!joined.load() && !g_stop.load()) {
        if ((FLAGS_duration_s > 0 && Clock::now() >= deadline) ||
            (!FLAGS_stop_file.empty() && access(FLAGS_stop_file.c_str(), F_OK) == 0))
          g_stop.store(true);
        std::this_thread::sleep_for(std::chrono::milliseconds(50));
      }
    });
  }
  int64_t per = FLAGS_ops / FLAGS_clients;
  std::vector<std::thread> ts;
  for (int t = 0; t < FLAGS_clients; ++t) {
    int64_t mine = timed ? -1 : per + (t < FLAGS_ops % FLAGS_clients ? 1 : 0);
    Worker* w = workers[size_t(t)].get();
    int64_t base = int64_t(w->ops()->size());
    ts.emplace_back([w, mine, base] { w->Run(mine < 0 ? -1 : base + mine); });
  }
  std::atomic<bool> run_done{false};
  std::atomic<int> replays{0};
  std::thread rogue;
  std::unique_ptr<rkv::Client> rogue_client;
  const std::string& rogue_key = hot.empty() ? cold[0] : hot[0];
  if (FLAGS_rogue_replays > 0) {
    rkv::Status s = rkv::Client::Connect(FLAGS_server, options, &rogue_client);
    if (!s.ok())
      std::fprintf(stderr, "lin_load: rogue client: connect: %s\n", s.ToString().c_str());
  }
  if (rogue_client) {
    // Owns rogue_client until joined; the main thread uses it only after the join.
    rogue = std::thread([&] {
      std::string v;
      while (!run_done.load() && replays.load() < FLAGS_rogue_replays) {
        std::this_thread::sleep_for(std::chrono::milliseconds(50));
        if (!rogue_client->Get(rogue_key, &v).ok()) continue;
        std::this_thread::sleep_for(std::chrono::milliseconds(20));
        if (!run_done.load() && rogue_client->Put(rogue_key, v).ok()) replays.fetch_add(1);
      }
    });
  }
  for (auto& t : ts) t.join();
  joined.store(true);
  if (stopper.joinable()) stopper.join();
  run_done.store(true);
  if (rogue.joinable()) rogue.join();
  bool rogue_last = false;
  if (rogue_client) {
    // An in-run replay shows as a violation only if a recorded read happens to see the old
    // value before a recorded write replaces it, which a run can miss. So the rogue also
    // replays once after the run, with no recorded client running: recorded PUT A, an
    // unrecorded read of A's bytes, recorded PUT B (invoked after A returned), A put back,
    // then a recorded read. It returns A, which no linearization allows (A's write precedes
    // B's in real time and nothing recorded writes A again), so the checker must report it.
    Worker* w = workers[0].get();
    std::string a_bytes;
    rkv::Status s;
    if (w->Put(rogue_key, 64) == Outcome::kOk &&
        (s = rogue_client->Get(rogue_key, &a_bytes)).ok() &&
        w->Put(rogue_key, 64) == Outcome::kOk && (s = rogue_client->Put(rogue_key, a_bytes)).ok() &&
        w->ReadOnce(rogue_key)) {
      rogue_last = true;
      replays.fetch_add(1);
    } else {
      std::fprintf(
          stderr, "lin_load: rogue's replay after the run failed: %s\n",
          s.ok() ? "a recorded PUT or the recorded read did not succeed" : s.ToString().c_str());
    }
  }
  if (FLAGS_rogue_replays > 0)
    std::printf("lin_load: negative control: an unrecorded client put back %d old values%s\n",
                replays.load(), rogue_last ? " (the last after the run)" : "");
  double run_s = std::chrono::duration<double>(Clock::now() - t_run).count();

  // 3. Final reads: every test key once more, spread over the clients; each client reads its
  // owned keys.
  if (FLAGS_final_reads) {
    std::vector<std::string> all(hot);
    all.insert(all.end(), cold.begin(), cold.end());
    std::vector<std::thread> fr;
    for (int t = 0; t < FLAGS_clients; ++t)
      fr.emplace_back([&, t] {
        std::vector<std::string> mine;
        for (size_t i = size_t(t); i < all.size(); i += size_t(FLAGS_clients))
          mine.push_back(all[i]);
        workers[size_t(t)]->FinalReads(mine);
      });
    for (auto& t : fr) t.join();
  }
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
  std::printf("lin_load:   pipelined batches %" PRIu64 " over %" PRIu64
              " operations; location cache: %" PRIu64 " hits, %" PRIu64 " misses\n",
              total.batches, total.batch_ops, c.cache_hits, c.cache_misses);
  std::printf("lin_load:   PUT %" PRIu64 " (inline %" PRIu64 ", heap %" PRIu64 "), DELETE %" PRIu64
              " (NOT_FOUND %" PRIu64 ")\n",
              total.puts, total.puts_inline, total.puts_heap, total.dels, total.del_nf);
  std::printf("lin_load:   client counters: checksum_retries %" PRIu64
              ", READs/GET %.2f, round trips/GET %.2f\n",
              c.checksum_retries, c.gets ? double(c.reads_posted) / double(c.gets) : 0,
              c.gets ? double(c.round_trips) / double(c.gets) : 0);
  std::printf("lin_load:   errors %" PRIu64 " (TABLE_FULL %" PRIu64 " of which heap busy %" PRIu64
              " allowed, unknown outcome %" PRIu64 ", Reconnect() calls %" PRIu64 ")%s%s\n",
              total.errors, total.table_full, total.heap_busy, total.unknown, total.reconnects,
              total.first_error.empty() ? "" : "; first: ", total.first_error.c_str());
  if (FLAGS_reconnect) {
    std::printf("lin_load:   across restarts: writes of unknown outcome %" PRIu64
                ", writes not sent %" PRIu64 ", failed GETs dropped %" PRIu64
                "; client reconnects %" PRIu64 ", server restarts seen %" PRIu64
                " (by the client that saw most; %" PRIu64 " over all clients)\n",
                total.unknown, total.not_sent, total.gets_dropped, c.reconnects,
                total.max_server_restarts, c.server_restarts);
    if (!total.first_lost.empty())
      std::printf("lin_load:   first lost-connection status: %s\n", total.first_lost.c_str());
  }
  if (FLAGS_failover) {
    // Availability: the longest stretch between successive successful writes (reads) of the
    // run phase, over all clients (from the history's return times; the first phase's writes
    // and the table statistics read between the phases are not the run's).
    std::vector<int64_t> w, r;
    for (const Op& op : history.ops()) {
      if (op.outcome != Outcome::kOk && op.outcome != Outcome::kNotFound) continue;
      if (op.call_ns < run_ns) continue;
      (op.type == OpType::kGet ? r : w).push_back(op.return_ns);
    }
    auto longest = [](std::vector<int64_t>* t) {
      std::sort(t->begin(), t->end());
      int64_t m = 0;
      for (size_t i = 1; i < t->size(); ++i) m = std::max(m, (*t)[i] - (*t)[i - 1]);
      return double(m) / 1e6;
    };
    std::printf("lin_load:   failover: writes of unknown outcome %" PRIu64
                " (waits abandoned at a failed-over server %" PRIu64 "), refused %" PRIu64
                ", failed GETs dropped %" PRIu64
                "; longest stretch without a successful write %.0f ms, without a successful "
                "read %.0f ms\n",
                total.unknown, c.abandoned_waits, total.not_sent, total.gets_dropped, longest(&w),
                longest(&r));
    if (!total.first_lost.empty())
      std::printf("lin_load:   first failover status: %s\n", total.first_lost.c_str());
    if (total.slowest_failed_ns > 0)
      std::printf("lin_load:   slowest failed operation: %.0f ms: %s\n",
                  double(total.slowest_failed_ns) / 1e6, total.slowest_failed.c_str());
  }
  if (FLAGS_final_reads)
    std::printf("lin_load:   final reads: %" PRIu64 " keys read after the run\n",
                total.final_reads);
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
  if (FLAGS_owned_keys > 0) {
    uint64_t acked_puts = 0, acked_dels = 0, unknown = 0, checked = 0, unread = 0, violations = 0;
    size_t owned = 0;
    std::vector<std::string> report;
    for (auto& w : workers) {
      w->Tally(&acked_puts, &acked_dels, &unknown, &checked, &unread, &violations, &report);
      owned += w->owned();
    }
    std::printf("durability: %zu owned keys (%d per client), %" PRIu64 " checked, %" PRIu64
                " unread; acknowledged PUTs %" PRIu64 ", acknowledged DELETEs %" PRIu64
                ", unknown-outcome writes %" PRIu64 "; server restarts seen %" PRIu64 "; %" PRIu64
                " violations\n",
                owned, FLAGS_owned_keys, checked, unread, acked_puts, acked_dels, unknown,
                total.max_server_restarts, violations);
    for (size_t i = 0; i < report.size() && i < 20; ++i)
      std::printf("durability: VIOLATION %s\n", report[i].c_str());
    ok = ok && violations == 0 && unread == 0;
  }
  if (FLAGS_check) {
    rkv::lincheck::CheckReport report = rkv::lincheck::Checker().Check(history);
    std::printf("%s\n", report.Summary().c_str());
    ok = ok && report.ok();
  }
  if (total.errors) std::printf("lin_load: FAILED: %" PRIu64 " unexpected errors\n", total.errors);
  std::fflush(stdout);
  return ok ? 0 : 1;
}
