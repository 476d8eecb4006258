// SPDX-License-Identifier: Apache-2.0
#include <gtest/gtest.h>

#include <cstdio>
#include <string>

#include "bench/report.h"

namespace rkv::bench {
namespace {
std::string Capture(void (*fn)(const Report&, FILE*), const Report& r) {
  char* buf = nullptr;
  size_t len = 0;
  FILE* f = open_memstream(&buf, &len);
  fn(r, f);
  std::fclose(f);
  std::string s(buf, len);
  std::free(buf);
  return s;
}
Report Sample() {
  Report r;
  r.phase = "run";
  r.workload = "a";
  r.distribution = "zipfian";
  r.runtime_ms = 2000;
  r.operations = 4;
  for (uint64_t us : {10, 20, 30}) r.ops[kRead].latency_us.Record(us);
  r.ops[kRead].ok = 2;
  r.ops[kRead].not_found = 1;
  r.ops[kUpdate].latency_us.Record(100);
  r.ops[kUpdate].errors = 1;
  r.gets = 3;
  r.reads_posted = 6;
  r.round_trips = 3;
  r.verify = true;
  r.series.push_back({1.0, 4, 20, 100, 100});
  return r;
}
}  // namespace

TEST(BenchReport, YcsbSummaryLines) {
  std::string s = Capture(PrintSummary, Sample());
  EXPECT_EQ(s,
            "[OVERALL], RunTime(ms), 2000\n"
            "[OVERALL], Throughput(ops/sec), 2.0\n"
            "[READ], Operations, 3\n"
            "[READ], AverageLatency(us), 20.00\n"
            "[READ], MinLatency(us), 10\n"
            "[READ], MaxLatency(us), 30\n"
            "[READ], 50thPercentileLatency(us), 20\n"
            "[READ], 95thPercentileLatency(us), 30\n"
            "[READ], 99thPercentileLatency(us), 30\n"
            "[READ], 99.9thPercentileLatency(us), 30\n"
            "[READ], Return=OK, 2\n"
            "[READ], Return=NOT_FOUND, 1\n"
            "[UPDATE], Operations, 1\n"
            "[UPDATE], AverageLatency(us), 100.00\n"
            "[UPDATE], MinLatency(us), 100\n"
            "[UPDATE], MaxLatency(us), 100\n"
            "[UPDATE], 50thPercentileLatency(us), 100\n"
            "[UPDATE], 95thPercentileLatency(us), 100\n"
            "[UPDATE], 99thPercentileLatency(us), 100\n"
            "[UPDATE], 99.9thPercentileLatency(us), 100\n"
            "[UPDATE], Return=OK, 0\n"
            "[UPDATE], Return=ERROR, 1\n"
            "[RKV], READsPerGet, 2.000\n"
            "[RKV], RoundTripsPerGet, 1.000\n"
            "[RKV], ChecksumRetries, 0\n"
            "[RKV], BytesReadPerGet, 0.0\n"
            "[RKV], CacheHitRate, 0.0000\n"
            "[RKV], CacheMisses, 0\n"
            "[VERIFY], Failures, 0\n"
            "[VERIFY], NotWrittenByKvbench, 0\n");
}
TEST(BenchReport, ErrorsByCodeAndReconnectLines) {
  Report r = Sample();
  r.verify = false;
  r.ops[kUpdate].errors = 3;
  r.ops[kUpdate].errors_by_code = {{"SERVER_RESTARTED", 1}, {"CONNECTION_LOST", 2}};
  r.reconnect = true;
  r.reconnects = 4;
  r.server_restarts = 2;
  std::string s = Capture(PrintSummary, r);
  EXPECT_NE(s.find("[UPDATE], Return=ERROR, 3\n"
                   "[UPDATE], Return=CONNECTION_LOST, 2\n"
                   "[UPDATE], Return=SERVER_RESTARTED, 1\n"
                   "[RKV], READsPerGet"),
            std::string::npos)
      << s;
  EXPECT_NE(s.find("[RKV], CacheMisses, 0\n"
                   "[RECONNECT], Reconnects, 4\n"
                   "[RECONNECT], ServerRestarts, 2\n"),
            std::string::npos)
      << s;
  const std::string last = "[RECONNECT], ServerRestarts, 2\n";
  ASSERT_GE(s.size(), last.size());
  EXPECT_EQ(s.substr(s.size() - last.size()), last);  // the summary's last line
  // With reconnect off and none happened, no [RECONNECT] lines (the summary above keeps its
  // exact form); with reconnect on they are there even when 0.
  EXPECT_EQ(Capture(PrintSummary, Sample()).find("[RECONNECT]"), std::string::npos);
  Report on = Sample();
  on.reconnect = true;
  EXPECT_NE(Capture(PrintSummary, on).find("[RECONNECT], ServerRestarts, 0\n"), std::string::npos);
  std::string j = Capture(WriteJson, r);
  for (const char* want :
       {"\"reconnect\": true, \"reconnects\": 4, \"server_restarts\": 2",
        "\"errors_by_code\": {\"CONNECTION_LOST\": 2, \"SERVER_RESTARTED\": 1}",
        "\"READ\": {\"operations\": 3, \"ok\": 2, \"not_found\": 1, \"errors\": 0, "})
    EXPECT_NE(j.find(want), std::string::npos) << want << "\n" << j;
  EXPECT_NE(j.find("\"errors_by_code\": {}"), std::string::npos) << j;
}
TEST(BenchReport, JsonHasFiguresHistogramsAndSeries) {
  std::string s = Capture(WriteJson, Sample());
  for (const char* want :
       {"\"phase\": \"run\"", "\"throughput_ops\": 2.0", "\"READ\": {\"operations\": 3",
        "\"not_found\": 1", "\"p50_us\": 20", "\"histogram_us\": [[10, 1], [20, 1], [30, 1]]",
        "\"UPDATE\": {\"operations\": 1", "\"rounds_per_get\": 1.0000",
        "{\"t\": 1.0, \"ops\": 4, \"p50_us\": 20, \"p99_us\": 100, \"p999_us\": 100}"})
    EXPECT_NE(s.find(want), std::string::npos) << want << "\n" << s;
  EXPECT_EQ(s.back(), '\n');
  EXPECT_EQ(s.substr(s.size() - 3), "]}\n");
}
}  // namespace rkv::bench
