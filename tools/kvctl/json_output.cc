// SPDX-License-Identifier: Apache-2.0
#include "tools/kvctl/json_output.h"

#include <cerrno>
#include <cmath>
#include <cstdlib>
#include <nlohmann/json.hpp>
#include <sstream>

#include "common/verbs/conn_params.h"

namespace rkv::kvctl {
namespace {

using nlohmann::json;

bool AllDigits(const std::string& s, size_t from, size_t to) {
  if (from >= to) return false;
  for (size_t i = from; i < to; ++i)
    if (s[i] < '0' || s[i] > '9') return false;
  return true;
}

// "123" -> unsigned, "-12" -> signed, "0.75" / "-1.5" -> double (when they fit), else the text.
json ValueOf(const std::string& v) {
  const size_t neg = !v.empty() && v[0] == '-' ? 1 : 0;
  const size_t dot = v.find('.');
  errno = 0;
  if (dot == std::string::npos && AllDigits(v, neg, v.size())) {
    if (neg) {
      const long long i = std::strtoll(v.c_str(), nullptr, 10);
      if (errno == 0) return i;
    } else {
      const unsigned long long u = std::strtoull(v.c_str(), nullptr, 10);
      if (errno == 0) return u;
    }
  } else if (dot != std::string::npos && AllDigits(v, neg, dot) &&
             AllDigits(v, dot + 1, v.size())) {
    const double d = std::strtod(v.c_str(), nullptr);
    if (errno == 0 && std::isfinite(d)) return d;
  }
  return v;
}

json ParamsJson(const ConnParams& p) {
  return json{{"transport", TransportName(p.transport)},
              {"link_layer", p.link_layer == kLinkEthernet ? "Ethernet" : "InfiniBand"},
              {"port", p.port_num},
              {"lid", p.lid},
              {"gid", GidToString(p.gid)},
              {"gid_index", p.gid_index},
              {"qp_num", p.qp_num},
              {"psn", p.psn},
              {"path_mtu", MtuEnumToBytes(p.path_mtu)},
              {"active_mtu", MtuEnumToBytes(p.active_mtu)},
              {"mtu_explicit", p.mtu_explicit != 0},
              {"pkey_index", p.pkey_index},
              {"pkey", p.pkey},
              {"qkey", p.qkey},
              {"sl", p.sl},
              {"src_path_bits", p.src_path_bits},
              {"max_rd_atomic", p.max_rd_atomic},
              {"max_dest_rd_atomic", p.max_dest_rd_atomic},
              {"min_rnr_timer", p.min_rnr_timer},
              {"timeout", p.timeout},
              {"retry_cnt", p.retry_cnt},
              {"rnr_retry", p.rnr_retry},
              {"hop_limit", p.hop_limit},
              {"traffic_class", p.traffic_class},
              {"grh_required", p.grh_required != 0},
              {"remote_addr", p.remote_addr},
              {"rkey", p.rkey},
              {"region_size", p.region_size}};
}

}  // namespace

std::string StatsJson(const std::string& stats_text) {
  json out = json::object();
  std::istringstream in(stats_text);
  std::string line;
  while (std::getline(in, line)) {
    if (line.empty()) continue;
    const size_t sp = line.find(' ');
    if (sp == std::string::npos) {
      out[line] = "";
    } else {
      out[line.substr(0, sp)] = ValueOf(line.substr(sp + 1));
    }
  }
  // Server text is not trusted to be UTF-8: replace invalid bytes rather than throw.
  return out.dump(1, ' ', false, json::error_handler_t::replace) + "\n";
}

std::string InfoJson(const ServerInfo& i) {
  json out{{"exchange", ExchangeName(i.exchange)},
           {"device", i.device},
           {"port", i.port},
           {"link_layer", i.link_layer},
           {"gid_index", i.gid_index},
           {"qp_num", i.qp_num},
           {"path_mtu", i.path_mtu},
           {"protocol_version", i.protocol_version},
           {"instance_id", i.instance_id},
           {"region_addr", i.region_addr},
           {"rkey", i.rkey},
           {"region_size", i.region_size},
           {"num_buckets", i.num_buckets},
           {"overflow_slots", i.overflow_slots},
           {"hash_seed", i.hash_seed},
           {"max_key_size", i.max_key_size},
           {"max_value_size", i.max_value_size},
           {"local", ParamsJson(i.local)},
           {"peer", ParamsJson(i.peer)},
           {"memory_rows_note", kMemoryRowsNote}};
  if (!i.mtu_note.empty()) out["mtu_note"] = i.mtu_note;
  return out.dump(1, ' ', false, json::error_handler_t::replace) + "\n";
}

}  // namespace rkv::kvctl
