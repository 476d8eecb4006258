// SPDX-License-Identifier: Apache-2.0
// Prometheus text exposition format, version 0.0.4 (what `GET /metrics` returns): the metric
// model (families of samples) and a pure renderer. Each family is written as
//   # HELP <name> <help>
//   # TYPE <name> counter|gauge|histogram
//   <name><suffix>{label="value",...} <value>
// once, with its samples in order. Counters are named ..._total by the caller (the family name
// is the sample name); a histogram's samples are <name>_bucket{le=...} (cumulative, ending with
// le="+Inf"), <name>_sum and <name>_count: AddHistogram makes them.
// Escaping: label values escape \ " and newline; HELP text escapes \ and newline. Names are the
// caller's (compile-time constants; [a-zA-Z_:][a-zA-Z0-9_:]*, checked by IsValidMetricName).
// Thread safety: pure functions over values.
#ifndef RKV_SERVER_METRICS_PROMETHEUS_TEXT_H_
#define RKV_SERVER_METRICS_PROMETHEUS_TEXT_H_

#include <cstdint>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "server/metrics/latency_histogram.h"

namespace rkv::metrics {

enum class MetricType { kCounter, kGauge, kHistogram };

using Labels = std::vector<std::pair<std::string, std::string>>;

struct Sample {
  std::string suffix;  // "", "_bucket", "_sum", "_count"
  Labels labels;
  bool is_double = false;
  uint64_t u = 0;
  double d = 0;
};

struct MetricFamily {
  std::string name;
  std::string help;
  MetricType type = MetricType::kGauge;
  std::vector<Sample> samples;

  void Add(Labels labels, uint64_t v) { samples.push_back({"", std::move(labels), false, v, 0}); }
  void AddDouble(Labels labels, double v) {
    samples.push_back({"", std::move(labels), true, 0, v});
  }
};

// The histogram's samples (buckets in seconds, cumulative, +Inf = count, sum in seconds) with
// `labels` on each, appended to `f` (type kHistogram).
void AddHistogram(MetricFamily* f, const Labels& labels, const LatencyHistogram::Snapshot& h);

std::string RenderPrometheusText(const std::vector<MetricFamily>& families);

std::string EscapeLabelValue(std::string_view v);
std::string EscapeHelp(std::string_view v);
// Shortest text that parses back to exactly v; "+Inf", "-Inf", "NaN".
std::string FormatDouble(double v);
bool IsValidMetricName(std::string_view name);

inline constexpr const char* kContentType = "text/plain; version=0.0.4; charset=utf-8";

}  // namespace rkv::metrics

#endif  // RKV_SERVER_METRICS_PROMETHEUS_TEXT_H_
