// SPDX-License-Identifier: Apache-2.0
#include "server/conn/limit_options.h"

#include <algorithm>
#include <cstdio>
#include <string>

namespace rkv {
namespace {

std::string Number(double v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%g", v);
  return buf;
}

Status OutOfRange(const char* field, const char* flag, const std::string& range,
                  const std::string& got) {
  return Status(Code::kInvalidArgument, std::string("ServerOptions::") + field + " (kvserver " +
                                            flag + ") must be " + range + ", got " + got);
}

}  // namespace

Status CheckLimitOptions(const ServerOptions& o) {
  struct IntRange {
    const char* field;
    const char* flag;
    int value, lo, hi;
  };
  const IntRange ints[] = {
      {"max_connections", "--max_connections", o.max_connections, 1, 65536},
      {"max_pending", "--max_pending", o.max_pending, 1, 4096},
      {"accept_timeout_ms", "--accept_timeout", o.accept_timeout_ms, 100, 600000},
      {"max_conns_per_source", "--max_conns_per_source", o.max_conns_per_source, 0, 65536},
      {"max_pending_per_source", "--max_pending_per_source", o.max_pending_per_source, -1, 4096},
      {"connect_burst_per_source", "--connect_burst_per_source", o.connect_burst_per_source, 1,
       1000000},
  };
  for (const IntRange& r : ints)
    if (r.value < r.lo || r.value > r.hi)
      return OutOfRange(r.field, r.flag, std::to_string(r.lo) + ".." + std::to_string(r.hi),
                        std::to_string(r.value));
  const double rate = o.connects_per_source_per_s;
  if (!(rate >= 0 && rate <= 1e6))  // NaN fails both
    return OutOfRange("connects_per_source_per_s", "--max_connects_per_source_per_s",
                      "0..1000000 (0: no limit)", Number(rate));
  return Status::Ok();
}

int EffectivePendingPerSource(const ServerOptions& o) {
  return o.max_pending_per_source >= 0 ? o.max_pending_per_source : std::max(1, o.max_pending / 8);
}

}  // namespace rkv
