// SPDX-License-Identifier: Apache-2.0
// The metrics page's pieces: histogram bucket placement, the Prometheus text format (each
// family's HELP and TYPE once, cumulative buckets ending in +Inf = _count, escaping), and the
// mapping of `kvctl stats` figures to metric names.
#include <gtest/gtest.h>

#include <map>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "server/metrics/latency_histogram.h"
#include "server/metrics/metrics_registry.h"
#include "server/metrics/prometheus_text.h"
#include "server/metrics/rpc_metrics.h"

namespace rkv::metrics {
namespace {

TEST(LatencyHistogram, BucketBoundariesAreInclusive) {
  EXPECT_EQ(LatencyHistogram::BucketOf(0), 0u);
  EXPECT_EQ(LatencyHistogram::BucketOf(1000), 0u);  // le="1e-06" holds exactly 1 µs
  EXPECT_EQ(LatencyHistogram::BucketOf(1001), 1u);
  EXPECT_EQ(LatencyHistogram::BucketOf(2500), 1u);
  EXPECT_EQ(LatencyHistogram::BucketOf(2501), 2u);
  for (size_t i = 0; i < LatencyHistogram::kBounds; ++i) {
    EXPECT_EQ(LatencyHistogram::BucketOf(LatencyHistogram::kBoundsNs[i]), i);
    EXPECT_EQ(LatencyHistogram::BucketOf(LatencyHistogram::kBoundsNs[i] + 1), i + 1);
  }
  EXPECT_EQ(LatencyHistogram::BucketOf(10'000'000'000ull), LatencyHistogram::kBounds - 1);
  EXPECT_EQ(LatencyHistogram::BucketOf(10'000'000'001ull), LatencyHistogram::kBounds);  // +Inf
  EXPECT_EQ(LatencyHistogram::BucketOf(UINT64_MAX), LatencyHistogram::kBounds);
}

TEST(LatencyHistogram, CountIsTheSumOfBuckets) {
  LatencyHistogram h;
  h.Record(500);
  h.Record(1000);
  h.Record(30'000);
  h.Record(20'000'000'000ull);
  LatencyHistogram::Snapshot s = h.Read();
  EXPECT_EQ(s.count, 4u);
  EXPECT_EQ(s.buckets[0], 2u);
  EXPECT_EQ(s.buckets[5], 1u);  // 25 µs < 30 µs <= 50 µs
  EXPECT_EQ(s.buckets[LatencyHistogram::kBounds], 1u);
  EXPECT_EQ(s.sum_ns, 500u + 1000u + 30'000u + 20'000'000'000ull);
}

TEST(PrometheusText, Escaping) {
  EXPECT_EQ(EscapeLabelValue("a\"b\\c\nd"), "a\\\"b\\\\c\\nd");
  EXPECT_EQ(EscapeHelp("x \\ \"y\"\nz"), "x \\\\ \"y\"\\nz");
  EXPECT_EQ(FormatDouble(0.5), "0.5");
  EXPECT_EQ(FormatDouble(2.5e-06), "2.5e-06");
  EXPECT_EQ(FormatDouble(10), "10");
  EXPECT_EQ(FormatDouble(1.0 / 0.0), "+Inf");
  EXPECT_TRUE(IsValidMetricName("rkv_up"));
  EXPECT_FALSE(IsValidMetricName("9rkv"));
  EXPECT_FALSE(IsValidMetricName("rkv-up"));

  MetricFamily f{"t_total", "help with \\ and\nnewline", MetricType::kCounter, {}};
  f.Add({{"k", "v\"1\n"}}, 7);
  std::string text = RenderPrometheusText({f});
  EXPECT_EQ(text,
            "# HELP t_total help with \\\\ and\\nnewline\n"
            "# TYPE t_total counter\n"
            "t_total{k=\"v\\\"1\\n\"} 7\n");
}

// A small checker of the text format's rules this page relies on (not a full parser; the
// sandbox test parses the real page with prometheus_client).
struct Checked {
  std::map<std::string, std::string> type;  // family -> type
  std::map<std::string, double> values;     // "name{labels}" -> value
};
Checked CheckText(const std::string& text) {
  Checked c;
  std::set<std::string> help;
  std::string family;
  std::istringstream in(text);
  std::string line;
  // Histogram state per label set (labels without le).
  std::map<std::string, double> last_bucket;
  std::map<std::string, double> inf_bucket;
  while (std::getline(in, line)) {
    EXPECT_FALSE(line.empty());
    if (line.rfind("# HELP ", 0) == 0) {
      std::string name = line.substr(7, line.find(' ', 7) - 7);
      EXPECT_TRUE(help.insert(name).second) << "HELP twice: " << name;
      family = name;
      continue;
    }
    if (line.rfind("# TYPE ", 0) == 0) {
      std::string rest = line.substr(7);
      std::string name = rest.substr(0, rest.find(' '));
      EXPECT_EQ(name, family) << "TYPE without its HELP first";
      EXPECT_TRUE(c.type.emplace(name, rest.substr(rest.find(' ') + 1)).second)
          << "TYPE twice: " << name;
      continue;
    }
    EXPECT_NE(line[0], '#') << line;
    if (line[0] == '#') continue;
    size_t sp = line.rfind(' ');
    std::string key = line.substr(0, sp);
    double v = std::stod(line.substr(sp + 1) == "+Inf" ? "inf" : line.substr(sp + 1));
    std::string name = key.substr(0, key.find('{'));
    EXPECT_TRUE(IsValidMetricName(name)) << name;
    EXPECT_EQ(name.rfind(family, 0), 0u) << name << " outside its family " << family;
    const std::string& t = c.type[family];
    if (t == "counter") {
      EXPECT_EQ(name, family);
      EXPECT_EQ(name.substr(name.size() - 6), "_total");
    }
    if (t == "histogram") {
      std::string suffix = name.substr(family.size());
      EXPECT_TRUE(suffix == "_bucket" || suffix == "_sum" || suffix == "_count") << name;
      if (suffix == "_bucket") {
        size_t le = key.find("le=\"");
        EXPECT_NE(le, std::string::npos);
        std::string series = key.substr(0, le);
        std::string bound = key.substr(le + 4, key.find('"', le + 4) - le - 4);
        EXPECT_GE(v, last_bucket[series]) << "buckets not cumulative: " << key;
        last_bucket[series] = v;
        if (bound == "+Inf") inf_bucket[family + key.substr(key.find('{'), le - key.find('{'))] = v;
      }
      if (suffix == "_count") {
        std::string labels = key.find('{') == std::string::npos ? "{" : key.substr(key.find('{'));
        if (labels.back() == '}') labels = labels.substr(0, labels.size() - 1) + ",";
        if (labels == "{,") labels = "{";
        auto it = inf_bucket.find(family + labels);
        EXPECT_NE(it, inf_bucket.end()) << "no +Inf bucket before " << key;
        if (it != inf_bucket.end()) {
          EXPECT_EQ(it->second, v) << key;
        }
      }
    }
    c.values[key] = v;
  }
  return c;
}

TEST(MetricsRegistry, PageIsValidAndNamed) {
  RpcMetrics rpcs;
  rpcs.Record(1, 0, 20'000);     // put OK
  rpcs.Record(1, 2, 3'000'000);  // put TABLE_FULL
  rpcs.Record(2, 1, 5'000);      // delete NOT_FOUND
  rpcs.Record(99, 4, 1'000);     // unknown op
  rpcs.Record(1, 999, 1'000);    // code beyond rkv::Code: OTHER
  std::vector<StatValue> stats = {
      StatValue::U("instance_id", 42),        StatValue::U("connections_total", 3),
      StatValue::U("connections_active", 2),  StatValue::U("clients_dropped", 1),
      StatValue::U("credit_drops", 4),        StatValue::U("rpc_put", 2),
      StatValue::D("load_factor", 0.25),      StatValue::U("heap_bytes_in_use", 100),
      StatValue::U("heap_capacity", 1000),    StatValue::U("snapshot_last_ms", 1500),
      StatValue::U("brand_new_figure", 9),    StatValue::U("rpc_moved", 5),
      StatValue::U("rpc_try_again", 6),       StatValue::U("migrations_in", 2),
      StatValue::U("migrated_keys_in", 30),   StatValue::U("migration_purged", 7),
      StatValue::U("migrations_failed", 1),   StatValue::U("migrations_out", 3),
      StatValue::U("migrated_keys_out", 40),  StatValue::U("repl_applied", 11),
      StatValue::U("repl_refused_epoch", 12), StatValue::U("repl_writes", 13),
      StatValue::U("repl_kept", 14),          StatValue::U("cluster_found_dead", 15),
  };
  std::string text = RenderPrometheusText(MetricsRegistry::Families(stats, &rpcs, 1.7e9));
  Checked c = CheckText(text);
  EXPECT_EQ(c.type["rkv_up"], "gauge");
  EXPECT_EQ(c.values["rkv_up"], 1);
  EXPECT_EQ(c.values["rkv_instance_info{instance_id=\"42\"}"], 1);
  EXPECT_EQ(c.type["rkv_connections_accepted_total"], "counter");
  EXPECT_EQ(c.values["rkv_connections_accepted_total"], 3);
  EXPECT_EQ(c.values["rkv_connections_active"], 2);
  EXPECT_EQ(c.values["rkv_clients_dropped_total{reason=\"malformed\"}"], 1);
  EXPECT_EQ(c.values["rkv_clients_dropped_total{reason=\"credit_overrun\"}"], 4);
  EXPECT_EQ(c.values["rkv_table_load_factor"], 0.25);
  EXPECT_EQ(c.values["rkv_heap_free_bytes"], 900);
  EXPECT_EQ(c.values["rkv_snapshot_last_duration_seconds"], 1.5);
  EXPECT_EQ(c.values["rkv_stat_brand_new_figure"], 9);
  EXPECT_EQ(c.values["rkv_cluster_redirects_total{answer=\"moved\"}"], 5);
  EXPECT_EQ(c.values["rkv_cluster_redirects_total{answer=\"try_again\"}"], 6);
  EXPECT_EQ(c.type["rkv_cluster_migration_begins_total"], "counter");
  EXPECT_EQ(c.values["rkv_cluster_migration_begins_total"], 2);
  EXPECT_EQ(c.values["rkv_cluster_migrated_keys_total{direction=\"in\"}"], 30);
  EXPECT_EQ(c.values["rkv_cluster_migrated_keys_total{direction=\"out\"}"], 40);
  EXPECT_EQ(c.values["rkv_cluster_migration_purged_keys_total"], 7);
  // The failed outcome comes first here: the family's help is the handed_over mapping's.
  EXPECT_EQ(c.values["rkv_cluster_migrations_total{outcome=\"failed\"}"], 1);
  EXPECT_EQ(c.values["rkv_cluster_migrations_total{outcome=\"handed_over\"}"], 3);
  EXPECT_EQ(c.type["rkv_replicate_received_total"], "counter");
  EXPECT_EQ(c.values["rkv_replicate_received_total{result=\"applied\"}"], 11);
  EXPECT_EQ(c.values["rkv_replicate_received_total{result=\"refused_epoch\"}"], 12);
  EXPECT_EQ(c.values["rkv_replicated_writes_total"], 13);
  EXPECT_EQ(c.type["rkv_replication_kept_writes"], "gauge");
  EXPECT_EQ(c.values["rkv_replication_kept_writes"], 14);
  EXPECT_EQ(c.values["rkv_cluster_found_dead_total"], 15);
  EXPECT_EQ(c.values.count("rkv_stat_repl_applied"), 0u);
  EXPECT_NE(text.find("# HELP rkv_cluster_migrations_total Cluster: migration batches"),
            std::string::npos);
  for (const char* stat : {"migrations_in", "migrations_out", "migrations_failed",
                           "migrated_keys_in", "migrated_keys_out", "migration_purged"})
    EXPECT_EQ(c.values.count(std::string("rkv_stat_") + stat), 0u) << stat;
  EXPECT_EQ(c.values.count("rkv_rpc_put"), 0u);
  EXPECT_EQ(c.values["rkv_rpcs_total{op=\"put\",code=\"OK\"}"], 1);
  EXPECT_EQ(c.values["rkv_rpcs_total{op=\"put\",code=\"TABLE_FULL\"}"], 1);
  EXPECT_EQ(c.values["rkv_rpcs_total{op=\"put\",code=\"OTHER\"}"], 1);
  EXPECT_EQ(c.values["rkv_rpcs_total{op=\"delete\",code=\"NOT_FOUND\"}"], 1);
  EXPECT_EQ(c.values["rkv_rpcs_total{op=\"unknown\",code=\"BAD_REQUEST\"}"], 1);
  EXPECT_EQ(c.values["rkv_rpcs_total{op=\"stats\",code=\"OK\"}"], 0);  // present from the start
  EXPECT_EQ(c.type["rkv_request_duration_seconds"], "histogram");
  EXPECT_EQ(c.values["rkv_request_duration_seconds_count{op=\"put\"}"], 3);
  EXPECT_EQ(c.values["rkv_request_duration_seconds_bucket{op=\"put\",le=\"2.5e-05\"}"], 2);
  EXPECT_EQ(c.values["rkv_request_duration_seconds_bucket{op=\"put\",le=\"0.0025\"}"], 2);
  EXPECT_EQ(c.values["rkv_request_duration_seconds_bucket{op=\"put\",le=\"0.005\"}"], 3);
  EXPECT_EQ(c.values["rkv_request_duration_seconds_bucket{op=\"put\",le=\"+Inf\"}"], 3);
  EXPECT_DOUBLE_EQ(c.values["rkv_request_duration_seconds_sum{op=\"put\"}"], 0.003021);
}

TEST(MetricsRegistry, RenderIsRateBounded) {
  int calls = 0;
  MetricsRegistry r({[&calls] {
                       ++calls;
                       return std::vector<StatValue>{StatValue::U("entries", uint64_t(calls))};
                     },
                     nullptr},
                    std::chrono::hours(1));
  std::string a = r.Render();
  std::string b = r.Render();
  EXPECT_EQ(calls, 1);
  EXPECT_EQ(a, b);
  EXPECT_NE(a.find("rkv_table_entries 1\n"), std::string::npos);
}

}  // namespace
}  // namespace rkv::metrics
