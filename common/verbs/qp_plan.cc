// SPDX-License-Identifier: Apache-2.0
#include "common/verbs/qp_plan.h"

#include <algorithm>
#include <cstdio>
#include <cstring>

namespace rkv {
namespace {
std::string Hex(uint32_t v) {
  char b[16];
  std::snprintf(b, sizeof b, "0x%x", v);
  return b;
}
std::string Mtu(uint8_t m) { return std::to_string(MtuEnumToBytes(m)); }
// The path MTU a side derives: its own if fixed, else the peer's if fixed, else the smaller
// of the two ports' active MTUs.
uint8_t EffectiveMtu(const ConnParams& a, const ConnParams& b) {
  if (a.mtu_explicit) return a.path_mtu;
  if (b.mtu_explicit) return b.path_mtu;
  return std::min(a.active_mtu, b.active_mtu);
}
}  // namespace

QpPlan PlanQp(const ConnParams& self, const ConnParams& peer, const QpOverrides& o,
              int access_flags) {
  QpPlan p;
  p.transport = self.transport;
  p.link_layer = self.link_layer;
  p.port_num = self.port_num;
  p.pkey_index = self.pkey_index;
  p.pkey = self.pkey;
  p.qkey = self.qkey;
  p.access_flags = access_flags;
  p.path_mtu = EffectiveMtu(self, peer);
  if (!self.mtu_explicit && !peer.mtu_explicit && self.active_mtu != peer.active_mtu)
    p.mtu_note = "path_mtu: agreed on " + Mtu(p.path_mtu) +
                 ", the smaller of the ports' active MTUs (local " + Mtu(self.active_mtu) +
                 ", peer " + Mtu(peer.active_mtu) + ")";
  p.dest_qp_num = o.dest_qp_num.value_or(peer.qp_num);
  p.rq_psn = o.rq_psn.value_or(peer.psn);
  p.sq_psn = self.psn;
  p.max_rd_atomic = self.max_rd_atomic;
  p.max_dest_rd_atomic = self.max_dest_rd_atomic;
  p.min_rnr_timer = self.min_rnr_timer;
  p.timeout = self.timeout;
  p.retry_cnt = self.retry_cnt;
  p.rnr_retry = self.rnr_retry;
  p.ah.port_num = self.port_num;
  p.ah.sl = self.sl;
  if (self.link_layer == kLinkEthernet) {
    // RoCE: LIDs do not exist; the GRH carries the route.
    p.ah.is_global = 1;
  } else {
    p.ah.dlid = o.dlid.value_or(static_cast<uint16_t>(peer.lid + peer.src_path_bits));
    p.ah.src_path_bits = self.src_path_bits;
    p.ah.is_global = (self.grh_required || peer.grh_required) ? 1 : 0;
  }
  if (p.ah.is_global) {
    std::memcpy(p.ah.grh.dgid.raw, peer.gid, 16);
    p.ah.grh.sgid_index = self.gid_index;
    p.ah.grh.hop_limit = self.hop_limit;
    p.ah.grh.traffic_class = self.traffic_class;
  }
  return p;
}

std::vector<Violation> ValidatePlan(const QpPlan& p, const ConnParams& self,
                                    const ConnParams& peer) {
  std::vector<Violation> v;
  const std::string t = TransportName(p.transport);
  auto add = [&](const char* rule, const std::string& m) { v.push_back({rule, m}); };
  if (self.transport != peer.transport)
    add("transport", std::string("transport mismatch: local ") + TransportName(self.transport) +
                         ", peer " + TransportName(peer.transport));
  if (self.link_layer != peer.link_layer)
    add("link_layer", std::string("link layer mismatch: local ") +
                          (self.link_layer == kLinkEthernet ? "Ethernet" : "InfiniBand") +
                          ", peer " +
                          (peer.link_layer == kLinkEthernet ? "Ethernet" : "InfiniBand"));
  // P_Key: equal values (the index does not matter), at least one full member (bit 15).
  if ((self.pkey & 0x7fff) != (peer.pkey & 0x7fff))
    add("pkey", "pkey mismatch: local " + Hex(self.pkey) + ", peer " + Hex(peer.pkey) + " (" + t +
                    " requires equal P_Key values)");
  else if (((self.pkey | peer.pkey) & 0x8000) == 0)
    add("pkey", "pkey membership: local " + Hex(self.pkey) + " and peer " + Hex(peer.pkey) +
                    " are both limited members (" + t + " requires at least one full member)");
  if (p.port_num != p.ah.port_num)
    add("port", "port mismatch: QP port " + std::to_string(p.port_num) + ", address port " +
                    std::to_string(p.ah.port_num) + " (they must be equal)");
  if (p.transport == Transport::kUD) {
    if (p.dest_qp_num != peer.qp_num)
      add("qpn", "remote_qpn mismatch: local " + Hex(p.dest_qp_num) + ", peer qp_num " +
                     Hex(peer.qp_num) + " (UD requires remote_qpn = peer's QP number)");
    if (self.qkey != peer.qkey)
      add("qkey", "qkey mismatch: local " + Hex(self.qkey) + ", peer " + Hex(peer.qkey) +
                      " (UD requires equal Q_Keys)");
  } else {
    if (p.rq_psn != peer.psn)
      add("psn", "rq_psn mismatch: local rq_psn " + Hex(p.rq_psn) + ", peer sq_psn " +
                     Hex(peer.psn) + " (" + t + " requires rq_psn = peer's sq_psn)");
    if (p.dest_qp_num != peer.qp_num)
      add("qpn", "dest_qp_num mismatch: local " + Hex(p.dest_qp_num) + ", peer qp_num " +
                     Hex(peer.qp_num) + " (" + t + " requires dest_qp_num = peer's QP number)");
    uint8_t peer_mtu = EffectiveMtu(peer, self);
    if (p.path_mtu != peer_mtu)
      add("path_mtu", "path_mtu mismatch: local " + Mtu(p.path_mtu) + ", peer " + Mtu(peer_mtu) +
                          " (" + t + " requires equal path MTU)");
    if (p.path_mtu > self.active_mtu)
      add("path_mtu", "path_mtu " + Mtu(p.path_mtu) + " above the local port's active MTU " +
                          Mtu(self.active_mtu));
  }
  if (p.transport == Transport::kRC && p.max_rd_atomic > peer.max_dest_rd_atomic)
    add("rd_atomic", "max_rd_atomic " + std::to_string(p.max_rd_atomic) +
                         " above peer's max_dest_rd_atomic " +
                         std::to_string(peer.max_dest_rd_atomic) +
                         " (RC requires max_rd_atomic <= peer's max_dest_rd_atomic)");
  if (p.transport == Transport::kRC && peer.max_rd_atomic > p.max_dest_rd_atomic)
    add("rd_atomic", "peer max_rd_atomic " + std::to_string(peer.max_rd_atomic) +
                         " above local max_dest_rd_atomic " + std::to_string(p.max_dest_rd_atomic) +
                         " (RC requires max_rd_atomic <= peer's max_dest_rd_atomic)");
  if (p.link_layer == kLinkInfiniBand) {
    if (peer.lid == 0)
      add("lid", "peer port " + std::to_string(peer.port_num) + " has no LID assigned");
    else if (p.ah.dlid != peer.lid + peer.src_path_bits)
      add("lid", "dlid mismatch: local dlid " + Hex(p.ah.dlid) + ", peer port LID " +
                     Hex(peer.lid) + " + src_path_bits " + std::to_string(peer.src_path_bits) +
                     " (the dlid must be assigned to the peer's port)");
  } else if (!p.ah.is_global) {
    add("gid", "RoCE requires a GRH (is_global=1) with the peer's GID");
  }
  if (p.ah.is_global && std::memcmp(p.ah.grh.dgid.raw, peer.gid, 16) != 0)
    add("gid", "dgid mismatch: local dgid " + GidToString(p.ah.grh.dgid.raw) + ", peer GID " +
                   GidToString(peer.gid) + " at index " + std::to_string(peer.gid_index) +
                   " (the dgid must be in the peer port's GID table)");
  return v;
}

std::string JoinViolations(const std::vector<Violation>& v) {
  std::string s;
  for (const Violation& x : v) s += (s.empty() ? "" : "; ") + x.message;
  return s;
}

QpTransitions BuildTransitions(const QpPlan& p) {
  QpTransitions t;
  ibv_qp_attr& i = t.init.attr;
  i.qp_state = IBV_QPS_INIT;
  i.pkey_index = p.pkey_index;
  i.port_num = p.port_num;
  t.init.mask = IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT;
  if (p.transport == Transport::kUD) {
    i.qkey = p.qkey;
    t.init.mask |= IBV_QP_QKEY;
  } else {
    i.qp_access_flags = p.access_flags;
    t.init.mask |= IBV_QP_ACCESS_FLAGS;
  }

  ibv_qp_attr& r = t.rtr.attr;
  r.qp_state = IBV_QPS_RTR;
  t.rtr.mask = IBV_QP_STATE;
  if (p.transport != Transport::kUD) {
    r.ah_attr = p.ah;
    r.path_mtu = static_cast<ibv_mtu>(p.path_mtu);
    r.dest_qp_num = p.dest_qp_num;
    r.rq_psn = p.rq_psn;
    t.rtr.mask |= IBV_QP_AV | IBV_QP_PATH_MTU | IBV_QP_DEST_QPN | IBV_QP_RQ_PSN;
    if (p.transport == Transport::kRC) {
      r.max_dest_rd_atomic = p.max_dest_rd_atomic;
      r.min_rnr_timer = p.min_rnr_timer;
      t.rtr.mask |= IBV_QP_MAX_DEST_RD_ATOMIC | IBV_QP_MIN_RNR_TIMER;
    }
  }

  ibv_qp_attr& s = t.rts.attr;
  s.qp_state = IBV_QPS_RTS;
  s.sq_psn = p.sq_psn;
  t.rts.mask = IBV_QP_STATE | IBV_QP_SQ_PSN;
  if (p.transport == Transport::kRC) {
    s.timeout = p.timeout;
    s.retry_cnt = p.retry_cnt;
    s.rnr_retry = p.rnr_retry;
    s.max_rd_atomic = p.max_rd_atomic;
    t.rts.mask |= IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT | IBV_QP_RNR_RETRY | IBV_QP_MAX_QP_RD_ATOMIC;
  }
  return t;
}

}  // namespace rkv
