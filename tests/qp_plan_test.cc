// SPDX-License-Identifier: Apache-2.0
#include "common/verbs/qp_plan.h"

#include <gtest/gtest.h>

#include <cstring>

#include "common/verbs/conn_params.h"

namespace rkv {
namespace {
ConnParams Roce(uint32_t qpn, uint32_t psn, uint8_t last_gid_byte) {
  ConnParams p;
  p.link_layer = kLinkEthernet;
  p.port_num = 1;
  p.gid_index = 1;
  p.gid[10] = p.gid[11] = 0xff;
  p.gid[12] = 10;
  p.gid[15] = last_gid_byte;
  p.qp_num = qpn;
  p.psn = psn;
  p.path_mtu = p.active_mtu = IBV_MTU_1024;
  p.pkey = 0xffff;
  p.max_rd_atomic = 16;
  p.max_dest_rd_atomic = 16;
  return p;
}
ConnParams Ib(uint32_t qpn, uint32_t psn, uint16_t lid) {
  ConnParams p = Roce(qpn, psn, 0);
  p.link_layer = kLinkInfiniBand;
  p.lid = lid;
  p.sl = 3;
  p.path_mtu = p.active_mtu = IBV_MTU_4096;
  return p;
}
bool HasRule(const std::vector<Violation>& v, const std::string& rule, const std::string& text) {
  for (const Violation& x : v)
    if (x.rule == rule && x.message.find(text) != std::string::npos) return true;
  return false;
}
}  // namespace

TEST(ConnParams, EncodeDecodeRoundTripAndValidation) {
  ConnParams p = Ib(0x1234, 0xabcdef, 7);
  p.remote_addr = 0x7f0012340000;
  p.rkey = 0x42;
  p.region_size = 1ull << 30;
  p.qkey = 0x11111111;
  p.mtu_explicit = 1;
  uint8_t buf[kConnParamsSize];
  EncodeConnParams(p, buf);
  ConnParams d;
  ASSERT_TRUE(DecodeConnParams(buf, sizeof buf, &d).ok());
  EXPECT_EQ(d.qp_num, 0x1234u);
  EXPECT_EQ(d.psn, 0xabcdefu);
  EXPECT_EQ(d.lid, 7);
  EXPECT_EQ(d.sl, 3);
  EXPECT_EQ(d.path_mtu, IBV_MTU_4096);
  EXPECT_EQ(d.mtu_explicit, 1);
  EXPECT_EQ(d.remote_addr, p.remote_addr);
  EXPECT_EQ(d.rkey, 0x42u);
  EXPECT_EQ(d.region_size, 1ull << 30);
  EXPECT_EQ(d.qkey, 0x11111111u);
  EXPECT_EQ(0, std::memcmp(d.gid, p.gid, 16));
  EXPECT_FALSE(DecodeConnParams(buf, 100, &d).ok());  // truncated
  uint8_t bad[kConnParamsSize];
  std::memcpy(bad, buf, sizeof bad);
  bad[0] ^= 1;
  EXPECT_NE(DecodeConnParams(bad, sizeof bad, &d).message().find("magic"), std::string::npos);
  std::memcpy(bad, buf, sizeof bad);
  bad[40] = 9;  // path MTU code
  EXPECT_NE(DecodeConnParams(bad, sizeof bad, &d).message().find("MTU"), std::string::npos);
  std::memcpy(bad, buf, sizeof bad);
  bad[35] = 1;  // QP number beyond 24 bits
  EXPECT_FALSE(DecodeConnParams(bad, sizeof bad, &d).ok());
  EXPECT_NE(FormatConnParams(p).find("psn 0xabcdef"), std::string::npos);
}

TEST(QpPlan, RoceRoutesWithGrhAndPassesTheRules) {
  ConnParams a = Roce(0x11, 0x100, 1), b = Roce(0x22, 0x200, 2);
  QpPlan p = PlanQp(a, b, {}, IBV_ACCESS_REMOTE_READ);
  EXPECT_EQ(p.ah.is_global, 1);
  EXPECT_EQ(p.ah.grh.sgid_index, 1);
  EXPECT_EQ(p.ah.grh.dgid.raw[15], 2);
  EXPECT_EQ(p.ah.dlid, 0);
  EXPECT_EQ(p.dest_qp_num, 0x22u);
  EXPECT_EQ(p.rq_psn, 0x200u);
  EXPECT_EQ(p.sq_psn, 0x100u);
  EXPECT_TRUE(ValidatePlan(p, a, b).empty()) << JoinViolations(ValidatePlan(p, a, b));
  QpTransitions t = BuildTransitions(p);
  EXPECT_EQ(t.init.attr.qp_state, IBV_QPS_INIT);
  EXPECT_EQ(t.init.attr.qp_access_flags, IBV_ACCESS_REMOTE_READ);
  EXPECT_EQ(t.init.mask, IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_ACCESS_FLAGS);
  EXPECT_EQ(t.rtr.mask, IBV_QP_STATE | IBV_QP_AV | IBV_QP_PATH_MTU | IBV_QP_DEST_QPN |
                            IBV_QP_RQ_PSN | IBV_QP_MAX_DEST_RD_ATOMIC | IBV_QP_MIN_RNR_TIMER);
  EXPECT_EQ(t.rtr.attr.ah_attr.is_global, 1);
  EXPECT_EQ(t.rtr.attr.path_mtu, IBV_MTU_1024);
  EXPECT_EQ(t.rtr.attr.max_dest_rd_atomic, 16);
  EXPECT_EQ(t.rts.mask, IBV_QP_STATE | IBV_QP_SQ_PSN | IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT |
                            IBV_QP_RNR_RETRY | IBV_QP_MAX_QP_RD_ATOMIC);
  EXPECT_EQ(t.rts.attr.sq_psn, 0x100u);
  EXPECT_EQ(t.rts.attr.max_rd_atomic, 16);
  EXPECT_EQ(t.rts.attr.retry_cnt, 7);
}

TEST(QpPlan, InfinibandRoutesByLidAndAddsGrhOnlyWhenAsked) {
  ConnParams a = Ib(0x11, 1, 5), b = Ib(0x22, 2, 9);
  b.src_path_bits = 2;
  QpPlan p = PlanQp(a, b, {}, 0);
  EXPECT_EQ(p.ah.is_global, 0);
  EXPECT_EQ(p.ah.dlid, 11);  // peer LID 9 + its src_path_bits 2
  EXPECT_EQ(p.ah.sl, 3);
  EXPECT_EQ(p.path_mtu, IBV_MTU_4096);
  EXPECT_TRUE(ValidatePlan(p, a, b).empty()) << JoinViolations(ValidatePlan(p, a, b));
  QpTransitions t = BuildTransitions(p);
  EXPECT_EQ(t.rtr.attr.ah_attr.dlid, 11);
  EXPECT_EQ(t.rtr.attr.ah_attr.is_global, 0);
  b.grh_required = 1;  // a GRH when either side asks for one
  p = PlanQp(a, b, {}, 0);
  EXPECT_EQ(p.ah.is_global, 1);
  EXPECT_EQ(p.ah.grh.sgid_index, 1);
  EXPECT_TRUE(ValidatePlan(p, a, b).empty());
  // A DLID not assigned to the peer's port, and a peer without a LID.
  p = PlanQp(a, b, QpOverrides{{}, {}, 77}, 0);
  EXPECT_TRUE(HasRule(ValidatePlan(p, a, b), "lid", "dlid mismatch: local dlid 0x4d"));
  b.lid = 0;
  p = PlanQp(a, b, {}, 0);
  EXPECT_TRUE(HasRule(ValidatePlan(p, a, b), "lid", "no LID assigned"));
}

TEST(QpPlan, EachRcRuleNamesItselfAndBothValues) {
  ConnParams a = Roce(0x11, 0x100, 1), b = Roce(0x22, 0x200, 2);
  // PSN
  QpPlan p = PlanQp(a, b, QpOverrides{0x999, {}, {}}, 0);
  EXPECT_TRUE(HasRule(ValidatePlan(p, a, b), "psn",
                      "rq_psn mismatch: local rq_psn 0x999, peer sq_psn 0x200 (RC requires"));
  // QPN
  p = PlanQp(a, b, QpOverrides{{}, 0x77, {}}, 0);
  EXPECT_TRUE(
      HasRule(ValidatePlan(p, a, b), "qpn", "dest_qp_num mismatch: local 0x77, peer qp_num 0x22"));
  // MTU: both fixed and different.
  ConnParams m = b;
  a.mtu_explicit = m.mtu_explicit = 1;
  a.path_mtu = IBV_MTU_1024;
  m.path_mtu = IBV_MTU_512;
  p = PlanQp(a, m, {}, 0);
  EXPECT_TRUE(HasRule(ValidatePlan(p, a, m), "path_mtu",
                      "path_mtu mismatch: local 1024, peer 512 (RC requires equal path MTU)"));
  a.mtu_explicit = 0;
  // P_Key: different values; then same value, both limited members.
  ConnParams k = b;
  k.pkey = 0x8001;
  p = PlanQp(a, k, {}, 0);
  EXPECT_TRUE(HasRule(ValidatePlan(p, a, k), "pkey", "pkey mismatch: local 0xffff, peer 0x8001"));
  ConnParams l = a, l2 = b;
  l.pkey = l2.pkey = 0x7fff;
  p = PlanQp(l, l2, {}, 0);
  EXPECT_TRUE(HasRule(ValidatePlan(p, l, l2), "pkey", "both limited members"));
  // rd_atomic
  ConnParams r = b;
  r.max_dest_rd_atomic = 4;
  p = PlanQp(a, r, {}, 0);
  EXPECT_TRUE(HasRule(ValidatePlan(p, a, r), "rd_atomic",
                      "max_rd_atomic 16 above peer's max_dest_rd_atomic 4"));
  // GID: the dgid must be the peer's.
  p = PlanQp(a, b, {}, 0);
  p.ah.grh.dgid.raw[15] = 9;
  EXPECT_TRUE(HasRule(ValidatePlan(p, a, b), "gid", "dgid mismatch"));
  // Port consistency.
  p = PlanQp(a, b, {}, 0);
  p.ah.port_num = 2;
  EXPECT_TRUE(HasRule(ValidatePlan(p, a, b), "port", "port mismatch: QP port 1, address port 2"));
  // Link layers must agree.
  ConnParams ib = Ib(0x22, 0x200, 3);
  p = PlanQp(a, ib, {}, 0);
  EXPECT_TRUE(HasRule(ValidatePlan(p, a, ib), "link_layer", "local Ethernet, peer InfiniBand"));
}

TEST(QpPlan, MtuIsNegotiatedDownAndSaysSo) {
  ConnParams a = Ib(1, 1, 1), b = Ib(2, 2, 2);
  b.active_mtu = b.path_mtu = IBV_MTU_1024;
  QpPlan pa = PlanQp(a, b, {}, 0), pb = PlanQp(b, a, {}, 0);
  EXPECT_EQ(pa.path_mtu, IBV_MTU_1024);
  EXPECT_EQ(pb.path_mtu, IBV_MTU_1024);
  EXPECT_NE(pa.mtu_note.find(
                "agreed on 1024, the smaller of the ports' active MTUs (local 4096, peer 1024)"),
            std::string::npos);
  EXPECT_TRUE(ValidatePlan(pa, a, b).empty());
  // One side fixes it: the other follows; above the local port's active MTU is an error.
  a.mtu_explicit = 1;
  a.path_mtu = IBV_MTU_2048;
  pb = PlanQp(b, a, {}, 0);
  EXPECT_EQ(pb.path_mtu, IBV_MTU_2048);
  EXPECT_TRUE(
      HasRule(ValidatePlan(pb, b, a), "path_mtu", "above the local port's active MTU 1024"));
}

TEST(QpPlan, UcAndUdRules) {
  ConnParams a = Roce(0x11, 0x100, 1), b = Roce(0x22, 0x200, 2);
  a.transport = b.transport = Transport::kUC;
  QpPlan p = PlanQp(a, b, QpOverrides{0x5, {}, {}}, 0);
  auto v = ValidatePlan(p, a, b);
  EXPECT_TRUE(HasRule(v, "psn", "(UC requires rq_psn = peer's sq_psn)"));
  QpTransitions t = BuildTransitions(PlanQp(a, b, {}, 0));
  EXPECT_EQ(t.rtr.mask,
            IBV_QP_STATE | IBV_QP_AV | IBV_QP_PATH_MTU | IBV_QP_DEST_QPN | IBV_QP_RQ_PSN);
  EXPECT_EQ(t.rts.mask, IBV_QP_STATE | IBV_QP_SQ_PSN);
  // UC has no RDMA READ: no rd_atomic rule.
  ConnParams r = b;
  r.max_dest_rd_atomic = 0;
  EXPECT_FALSE(HasRule(ValidatePlan(PlanQp(a, r, {}, 0), a, r), "rd_atomic", ""));

  a.transport = b.transport = Transport::kUD;
  a.qkey = 0x1111;
  b.qkey = 0x2222;
  p = PlanQp(a, b, {}, 0);
  v = ValidatePlan(p, a, b);
  EXPECT_TRUE(
      HasRule(v, "qkey", "qkey mismatch: local 0x1111, peer 0x2222 (UD requires equal Q_Keys)"));
  EXPECT_FALSE(HasRule(v, "psn", ""));  // UD has no PSN or MTU pairing rules
  EXPECT_FALSE(HasRule(v, "path_mtu", ""));
  b.qkey = 0x1111;
  p = PlanQp(a, b, QpOverrides{{}, 0x99, {}}, 0);
  EXPECT_TRUE(HasRule(ValidatePlan(p, a, b), "qpn", "remote_qpn mismatch"));
  t = BuildTransitions(PlanQp(a, b, {}, 0));
  EXPECT_EQ(t.init.mask, IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_QKEY);
  EXPECT_EQ(t.init.attr.qkey, 0x1111u);
  EXPECT_EQ(t.rtr.mask, IBV_QP_STATE);
  EXPECT_EQ(t.rts.mask, IBV_QP_STATE | IBV_QP_SQ_PSN);
}
}  // namespace rkv

namespace rkv {
TEST(QpPlan, RdAtomicIsCheckedFromBothSides) {
  ConnParams a = Roce(0x11, 0x100, 1), b = Roce(0x22, 0x200, 2);
  a.max_dest_rd_atomic = 4;  // we accept 4 READs, the peer wants 16 in flight
  QpPlan p = PlanQp(a, b, {}, IBV_ACCESS_REMOTE_READ);
  std::vector<Violation> v = ValidatePlan(p, a, b);
  ASSERT_EQ(v.size(), 1u);
  EXPECT_EQ(v[0].rule, "rd_atomic");
  EXPECT_NE(v[0].message.find("peer max_rd_atomic 16 above local max_dest_rd_atomic 4"),
            std::string::npos);
}

TEST(ConnParams, TableAndLineNameEveryParameter) {
  ConnParams a = Roce(0x11, 0x100, 1), b = Roce(0x22, 0x200, 2);
  b.rkey = 0x42;
  std::string t = FormatParamTable(a, b);
  for (const char* p : {"transport",
                        "link_layer",
                        "port",
                        "lid",
                        "gid ",
                        "gid_index",
                        "qp_num",
                        "psn",
                        "path_mtu",
                        "active_mtu",
                        "pkey_index",
                        "pkey ",
                        "qkey",
                        "sl",
                        "src_path_bits",
                        "max_rd_atomic",
                        "max_dest_rd_atomic",
                        "min_rnr_timer",
                        "timeout",
                        "retry_cnt",
                        "rnr_retry",
                        "hop_limit",
                        "traffic_class",
                        "remote_addr",
                        "rkey",
                        "region_size"})
    EXPECT_NE(t.find(std::string("\n") + p), std::string::npos) << p;
  EXPECT_NE(t.find("0x42"), std::string::npos);
  EXPECT_NE(FormatParamsLine(a, b).find("qp 0x11 -> peer qp 0x22"), std::string::npos);
  Exchange e;
  EXPECT_TRUE(ParseExchange("etcd", &e) && e == Exchange::kEtcd);
  EXPECT_TRUE(ParseExchange("cm", &e) && e == Exchange::kRdmaCm);
  EXPECT_FALSE(ParseExchange("udp", &e));
}
}  // namespace rkv
