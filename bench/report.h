// SPDX-License-Identifier: Apache-2.0
// kvbench's output: the YCSB-style summary on stdout and the --json document.
// Pure formatting of a finished run's figures (unit-tested in tests/bench_report_test.cc).
// Thread safety: none needed; call once at the end of a run.
#ifndef RKV_BENCH_REPORT_H_
#define RKV_BENCH_REPORT_H_

#include <cstdint>
#include <cstdio>
#include <map>
#include <string>
#include <vector>

#include "bench/config.h"
#include "bench/histogram.h"

namespace rkv::bench {

struct OpResult {
  Histogram latency_us;
  uint64_t ok = 0, not_found = 0, errors = 0;
  // The errors by status code name ("CONNECTION_LOST", "SERVER_RESTARTED", ...); they add up
  // to `errors` when the caller fills both.
  std::map<std::string, uint64_t> errors_by_code;
};

// One second of the run, as seen by the status line.
struct SecondSample {
  double elapsed_s = 0;
  uint64_t operations = 0;  // completed in that second
  uint64_t p50_us = 0, p99_us = 0, p999_us = 0;
};

struct Report {
  std::string phase, workload, distribution;
  int threads = 1, connections = 1, depth = 1;
  std::string server, device;
  uint32_t port = 0, path_mtu = 0, qp_num = 0;
  int gid_index = -1;
  double runtime_ms = 0;
  uint64_t operations = 0;
  OpResult ops[kNumOps];
  uint64_t gets = 0, reads_posted = 0, round_trips = 0, checksum_retries = 0;
  uint64_t bytes_read = 0, cache_hits = 0, cache_misses = 0;  // client location cache
  int64_t wire_packets = -1;  // kvbench --hw_counters: packets of the measured phase (-1: none)
  bool verify = false;
  uint64_t verify_failures = 0;  // every failed check (bench/workload.h CheckValue), of which
  uint64_t verify_foreign = 0;   // values not written by kvbench
  bool reconnect = false;        // clients reconnected automatically (kvbench --reconnect)
  uint64_t reconnects = 0, server_restarts = 0;  // summed over the clients
  std::vector<SecondSample> series;
  double throughput() const { return runtime_ms > 0 ? operations / (runtime_ms / 1000.0) : 0; }
  uint64_t errors() const;
};

// "[OVERALL], RunTime(ms), 1234" ... one line per figure, operation types in kOpNames order
// (types with no operations are left out); a type's "Return=ERROR, N" (all its errors) is
// followed by one "Return=CODE, n" line per status code; then [RKV], [VERIFY] and (with
// reconnect, or when any happened) "[RECONNECT], Reconnects, N" and
// "[RECONNECT], ServerRestarts, N".
void PrintSummary(const Report& r, FILE* out);
// One JSON object: the summary's figures, each type's full histogram as [lower_us, count]
// pairs, and the per-second series.
void WriteJson(const Report& r, FILE* out);

}  // namespace rkv::bench

#endif  // RKV_BENCH_REPORT_H_
