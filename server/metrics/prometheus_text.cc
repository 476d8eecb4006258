// SPDX-License-Identifier: Apache-2.0
#include "server/metrics/prometheus_text.h"

#include <cmath>
#include <cstdio>
#include <cstdlib>

namespace rkv::metrics {

std::string EscapeLabelValue(std::string_view v) {
  std::string o;
  o.reserve(v.size());
  for (char c : v) {
    if (c == '\\') {
      o += "\\\\";
    } else if (c == '"') {
      o += "\\\"";
    } else if (c == '\n') {
      o += "\\n";
    } else {
      o += c;
    }
  }
  return o;
}

std::string EscapeHelp(std::string_view v) {
  std::string o;
  o.reserve(v.size());
  for (char c : v) {
    if (c == '\\') {
      o += "\\\\";
    } else if (c == '\n') {
      o += "\\n";
    } else {
      o += c;
    }
  }
  return o;
}

std::string FormatDouble(double v) {
  if (std::isnan(v)) return "NaN";
  if (std::isinf(v)) return v > 0 ? "+Inf" : "-Inf";
  char buf[40];
  if (v == std::floor(v) && std::fabs(v) < 1e15) {
    std::snprintf(buf, sizeof buf, "%.0f", v);
    return buf;
  }
  for (int prec = 1; prec <= 17; ++prec) {
    std::snprintf(buf, sizeof buf, "%.*g", prec, v);
    if (std::strtod(buf, nullptr) == v) break;
  }
  return buf;
}

bool IsValidMetricName(std::string_view name) {
  if (name.empty()) return false;
  for (size_t i = 0; i < name.size(); ++i) {
    char c = name[i];
    bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_' || c == ':' ||
              (i > 0 && c >= '0' && c <= '9');
    if (!ok) return false;
  }
  return true;
}

void AddHistogram(MetricFamily* f, const Labels& labels, const LatencyHistogram::Snapshot& h) {
  uint64_t cumulative = 0;
  for (size_t i = 0; i < LatencyHistogram::kBounds; ++i) {
    cumulative += h.buckets[i];
    Labels l = labels;
    l.emplace_back("le", FormatDouble(double(LatencyHistogram::kBoundsNs[i]) / 1e9));
    f->samples.push_back({"_bucket", std::move(l), false, cumulative, 0});
  }
  Labels inf = labels;
  inf.emplace_back("le", "+Inf");
  f->samples.push_back({"_bucket", std::move(inf), false, h.count, 0});
  f->samples.push_back({"_sum", labels, true, 0, double(h.sum_ns) / 1e9});
  f->samples.push_back({"_count", labels, false, h.count, 0});
}

std::string RenderPrometheusText(const std::vector<MetricFamily>& families) {
  std::string o;
  o.reserve(families.size() * 256);
  for (const MetricFamily& f : families) {
    const char* type = f.type == MetricType::kCounter     ? "counter"
                       : f.type == MetricType::kHistogram ? "histogram"
                                                          : "gauge";
    o += "# HELP " + f.name + " " + EscapeHelp(f.help) + "\n";
    o += "# TYPE " + f.name + " " + type + "\n";
    for (const Sample& s : f.samples) {
      o += f.name;
      o += s.suffix;
      if (!s.labels.empty()) {
        o += '{';
        for (size_t i = 0; i < s.labels.size(); ++i) {
          if (i > 0) o += ',';
          o += s.labels[i].first + "=\"" + EscapeLabelValue(s.labels[i].second) + "\"";
        }
        o += '}';
      }
      o += ' ';
      o += s.is_double ? FormatDouble(s.d) : std::to_string(s.u);
      o += '\n';
    }
  }
  return o;
}

}  // namespace rkv::metrics
