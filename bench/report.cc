// SPDX-License-Identifier: Apache-2.0
#include "bench/report.h"

namespace rkv::bench {

uint64_t Report::errors() const {
  uint64_t e = 0;
  for (const OpResult& o : ops) e += o.errors;
  return e;
}

namespace {
using UL = unsigned long;
struct Quantile {
  double q;
  const char* ycsb;
  const char* json;
};
constexpr Quantile kQuantiles[] = {{0.5, "50th", "p50_us"},
                                   {0.95, "95th", "p95_us"},
                                   {0.99, "99th", "p99_us"},
                                   {0.999, "99.9th", "p999_us"}};
}  // namespace

void PrintSummary(const Report& r, FILE* out) {
  std::fprintf(out, "[OVERALL], RunTime(ms), %.0f\n", r.runtime_ms);
  std::fprintf(out, "[OVERALL], Throughput(ops/sec), %.1f\n", r.throughput());
  for (int k = 0; k < kNumOps; ++k) {
    const OpResult& o = r.ops[k];
    const Histogram& h = o.latency_us;
    if (h.count() == 0) continue;
    const char* n = kOpNames[k];
    std::fprintf(out, "[%s], Operations, %lu\n", n, UL(h.count()));
    std::fprintf(out, "[%s], AverageLatency(us), %.2f\n", n, h.mean());
    std::fprintf(out, "[%s], MinLatency(us), %lu\n", n, UL(h.min()));
    std::fprintf(out, "[%s], MaxLatency(us), %lu\n", n, UL(h.max()));
    for (const Quantile& q : kQuantiles)
      std::fprintf(out, "[%s], %sPercentileLatency(us), %lu\n", n, q.ycsb, UL(h.Percentile(q.q)));
    std::fprintf(out, "[%s], Return=OK, %lu\n", n, UL(o.ok));
    if (o.not_found) std::fprintf(out, "[%s], Return=NOT_FOUND, %lu\n", n, UL(o.not_found));
    if (o.errors) std::fprintf(out, "[%s], Return=ERROR, %lu\n", n, UL(o.errors));
    for (const auto& [code, count] : o.errors_by_code)
      std::fprintf(out, "[%s], Return=%s, %lu\n", n, code.c_str(), UL(count));
  }
  if (r.gets) {
    std::fprintf(out, "[RKV], READsPerGet, %.3f\n", double(r.reads_posted) / double(r.gets));
    std::fprintf(out, "[RKV], RoundTripsPerGet, %.3f\n", double(r.round_trips) / double(r.gets));
    std::fprintf(out, "[RKV], ChecksumRetries, %lu\n", UL(r.checksum_retries));
    std::fprintf(out, "[RKV], BytesReadPerGet, %.1f\n", double(r.bytes_read) / double(r.gets));
    const uint64_t looked = r.cache_hits + r.cache_misses;
    std::fprintf(out, "[RKV], CacheHitRate, %.4f\n",
                 looked ? double(r.cache_hits) / double(looked) : 0.0);
    std::fprintf(out, "[RKV], CacheMisses, %lu\n", UL(r.cache_misses));
  }
  if (r.wire_packets >= 0 && r.operations > 0)
    std::fprintf(out, "[RKV], WirePacketsPerOp, %.3f\n",
                 double(r.wire_packets) / double(r.operations));
  if (r.verify) {
    std::fprintf(out, "[VERIFY], Failures, %lu\n", UL(r.verify_failures));
    std::fprintf(out, "[VERIFY], NotWrittenByKvbench, %lu\n", UL(r.verify_foreign));
  }
  if (r.reconnect || r.reconnects || r.server_restarts) {
    std::fprintf(out, "[RECONNECT], Reconnects, %lu\n", UL(r.reconnects));
    std::fprintf(out, "[RECONNECT], ServerRestarts, %lu\n", UL(r.server_restarts));
  }
}

void WriteJson(const Report& r, FILE* f) {
  double gets = r.gets ? double(r.gets) : 1;
  std::fprintf(f,
               "{\"phase\": \"%s\", \"workload\": \"%s\", \"distribution\": \"%s\", "
               "\"threads\": %d, \"connections\": %d, \"depth\": %d,\n \"server\": \"%s\", "
               "\"device\": \"%s\", \"port\": %u, \"gid_index\": %d, \"path_mtu\": %u, "
               "\"qp_num\": %u,\n "
               "\"runtime_ms\": %.0f, \"operations\": %lu, \"throughput_ops\": %.1f,\n "
               "\"reads_per_get\": %.4f, \"rounds_per_get\": %.4f, \"checksum_retries\": %lu, "
               "\"bytes_read_per_get\": %.1f, \"cache_hits\": %lu, \"cache_misses\": %lu, "
               "\"wire_packets\": %ld, "
               "\"verify\": %s, \"verify_failures\": %lu, \"verify_foreign\": %lu,\n "
               "\"reconnect\": %s, "
               "\"reconnects\": %lu, \"server_restarts\": %lu,\n \"ops\": {",
               r.phase.c_str(), r.workload.c_str(), r.distribution.c_str(), r.threads,
               r.connections, r.depth, r.server.c_str(), r.device.c_str(), r.port, r.gid_index,
               r.path_mtu, r.qp_num, r.runtime_ms, UL(r.operations), r.throughput(),
               double(r.reads_posted) / gets, double(r.round_trips) / gets, UL(r.checksum_retries),
               double(r.bytes_read) / gets, UL(r.cache_hits), UL(r.cache_misses),
               (long)r.wire_packets, r.verify ? "true" : "false", UL(r.verify_failures),
               UL(r.verify_foreign), r.reconnect ? "true" : "false", UL(r.reconnects),
               UL(r.server_restarts));
  bool first = true;
  for (int k = 0; k < kNumOps; ++k) {
    const OpResult& o = r.ops[k];
    const Histogram& h = o.latency_us;
    if (h.count() == 0) continue;
    std::fprintf(f,
                 "%s\n  \"%s\": {\"operations\": %lu, \"ok\": %lu, \"not_found\": %lu, "
                 "\"errors\": %lu, \"avg_us\": %.2f, \"min_us\": %lu, \"max_us\": %lu",
                 first ? "" : ",", kOpNames[k], UL(h.count()), UL(o.ok), UL(o.not_found),
                 UL(o.errors), h.mean(), UL(h.min()), UL(h.max()));
    first = false;
    std::fprintf(f, ", \"errors_by_code\": {");
    bool first_code = true;
    for (const auto& [code, count] : o.errors_by_code) {
      std::fprintf(f, "%s\"%s\": %lu", first_code ? "" : ", ", code.c_str(), UL(count));
      first_code = false;
    }
    std::fprintf(f, "}");
    for (const Quantile& q : kQuantiles)
      std::fprintf(f, ", \"%s\": %lu", q.json, UL(h.Percentile(q.q)));
    std::fprintf(f, ", \"histogram_us\": [");
    auto buckets = h.Buckets();
    for (size_t b = 0; b < buckets.size(); ++b)
      std::fprintf(f, "%s[%lu, %lu]", b ? ", " : "", UL(buckets[b].first), UL(buckets[b].second));
    std::fprintf(f, "]}");
  }
  std::fprintf(f, "},\n \"series\": [");
  for (size_t k = 0; k < r.series.size(); ++k) {
    const SecondSample& s = r.series[k];
    std::fprintf(f,
                 "%s\n  {\"t\": %.1f, \"ops\": %lu, \"p50_us\": %lu, \"p99_us\": %lu, "
                 "\"p999_us\": %lu}",
                 k ? "," : "", s.elapsed_s, UL(s.operations), UL(s.p50_us), UL(s.p99_us),
                 UL(s.p999_us));
  }
  std::fprintf(f, "]}\n");
}

}  // namespace rkv::bench
