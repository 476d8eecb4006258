// SPDX-License-Identifier: Apache-2.0
// kvctl --json (tools/kvctl/json_output.h): numbers stay numbers, text stays text, hostile
// server text cannot break the JSON, and info carries every connection parameter.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "tools/kvctl/json_output.h"

namespace rkv::kvctl {
namespace {

using nlohmann::json;

TEST(KvctlJson, StatsNumbersAndText) {
  json j =
      json::parse(StatsJson("connections_active 3\nload_factor 0.75\ndelta -4\n"
                            "durable no\nbig 18446744073709551615\nhuge 99999999999999999999\n"
                            "lonely\n\nweird 1.2.3\nplus +5\nspace  7\n"));
  EXPECT_EQ(j["connections_active"], 3u);
  EXPECT_DOUBLE_EQ(j["load_factor"].get<double>(), 0.75);
  EXPECT_EQ(j["delta"], -4);
  EXPECT_EQ(j["durable"], "no");
  EXPECT_EQ(j["big"].get<uint64_t>(), UINT64_MAX);
  EXPECT_EQ(j["huge"], "99999999999999999999");  // does not fit: kept as text, not wrapped
  EXPECT_EQ(j["lonely"], "");
  EXPECT_EQ(j["weird"], "1.2.3");
  EXPECT_EQ(j["plus"], "+5");
  EXPECT_EQ(j["space"], " 7");
  EXPECT_EQ(j.size(), 10u);
}

TEST(KvctlJson, HostileStatsTextStaysValidJson) {
  std::string text = "quote\" \"\\\n";
  const char bad[] = "bad\xff\xfe utf8\x01\n";
  text += std::string(bad, sizeof bad - 1);
  text += "{\"x\": 1}\n";
  json j = json::parse(StatsJson(text));  // throws (fails the test) if the output is invalid
  EXPECT_EQ(j["quote\""], "\"\\");
  EXPECT_TRUE(j.is_object());
}

TEST(KvctlJson, InfoHasEveryParameter) {
  ServerInfo i;
  i.device = "rxe0";
  i.rkey = 0x1234;
  i.region_size = 1 << 20;
  i.local.qp_num = 17;
  i.peer.qp_num = 18;
  i.local.path_mtu = 3;  // 1024 bytes
  i.local.gid[10] = 0xff;
  i.local.gid[11] = 0xff;
  i.local.gid[12] = 10;
  i.local.gid[15] = 1;
  json j = json::parse(InfoJson(i));
  EXPECT_EQ(j["device"], "rxe0");
  EXPECT_EQ(j["rkey"], 0x1234);
  EXPECT_EQ(j["region_addr"], 0);
  EXPECT_EQ(j["local"]["qp_num"], 17);
  EXPECT_EQ(j["peer"]["qp_num"], 18);
  EXPECT_EQ(j["local"]["path_mtu"], 1024);
  EXPECT_EQ(j["local"]["gid"], "0000:0000:0000:0000:0000:ffff:0a00:0001") << j["local"]["gid"];
  for (const char* k : {"psn", "pkey", "timeout", "retry_cnt", "rnr_retry", "max_rd_atomic",
                        "max_dest_rd_atomic", "min_rnr_timer", "hop_limit", "traffic_class", "sl",
                        "lid", "gid_index", "transport", "link_layer"})
    EXPECT_TRUE(j["peer"].contains(k)) << k;
  EXPECT_FALSE(j.contains("mtu_note"));
}

}  // namespace
}  // namespace rkv::kvctl
