// SPDX-License-Identifier: Apache-2.0
#include "common/verbs/qp_setup.h"

#include <arpa/inet.h>
#include <glog/logging.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <vector>

#include "common/secure_random.h"
#include "common/verbs/qp_plan.h"

namespace rkv {
namespace {
bool IsIpv4Mapped(const uint8_t* g) {
  static const uint8_t kPrefix[12] = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff};
  return std::memcmp(g, kPrefix, 12) == 0;
}

QpOverrides Overrides(const QpSettings& s) {
  QpOverrides o;
  if (s.force_rq_psn >= 0) o.rq_psn = static_cast<uint32_t>(s.force_rq_psn) & 0xffffff;
  if (s.force_dest_qp_num >= 0) o.dest_qp_num = static_cast<uint32_t>(s.force_dest_qp_num);
  return o;
}

// GID table entries of one port, valid ones only.
std::vector<ibv_gid_entry> GidTable(ibv_context* ctx, uint8_t port) {
  ibv_port_attr pa{};
  if (ibv_query_port(ctx, port, &pa) != 0) return {};
  std::vector<ibv_gid_entry> out;
  for (int i = 0; i < pa.gid_tbl_len; ++i) {
    ibv_gid_entry e{};
    if (ibv_query_gid_ex(ctx, port, i, &e, 0) != 0) continue;
    out.push_back(e);
  }
  return out;
}
}  // namespace

Status OpenDevice(const std::string& name, ContextPtr* out) {
  int n = 0;
  ibv_device** list = ibv_get_device_list(&n);
  if (list == nullptr) return ErrnoStatus("ibv_get_device_list", errno);
  std::string names;
  ibv_device* dev = nullptr;
  for (int i = 0; i < n; ++i) {
    const char* dn = ibv_get_device_name(list[i]);
    names += (names.empty() ? "" : ", ") + std::string(dn);
    if (dev == nullptr && (name.empty() || name == dn)) dev = list[i];
  }
  if (dev == nullptr) {
    ibv_free_device_list(list);
    return Status(Code::kInvalidArgument,
                  n == 0 ? "no RDMA device found (ibv_devices lists none)"
                         : "no RDMA device '" + name + "' (devices: " + names + ")");
  }
  out->reset(ibv_open_device(dev));
  int err = errno;
  ibv_free_device_list(list);
  if (!*out) return ErrnoStatus("ibv_open_device", err);
  return Status::Ok();
}

Status OpenDeviceByAddress(uint32_t ipv4, ContextPtr* out, int* port, int* gid_index) {
  int n = 0;
  ibv_device** list = ibv_get_device_list(&n);
  if (list == nullptr) return ErrnoStatus("ibv_get_device_list", errno);
  for (int i = 0; i < n; ++i) {
    ContextPtr ctx(ibv_open_device(list[i]));
    if (!ctx) continue;
    ibv_device_attr da{};
    if (ibv_query_device(ctx.get(), &da) != 0) continue;
    for (uint8_t p = 1; p <= da.phys_port_cnt; ++p) {
      for (const ibv_gid_entry& e : GidTable(ctx.get(), p)) {
        if (IsIpv4Mapped(e.gid.raw) && std::memcmp(e.gid.raw + 12, &ipv4, 4) == 0) {
          *port = p;
          *gid_index = static_cast<int>(e.gid_index);
          *out = std::move(ctx);
          ibv_free_device_list(list);
          return Status::Ok();
        }
      }
    }
  }
  ibv_free_device_list(list);
  return Status(Code::kNotFound, "no RDMA device has a GID for that address");
}

Status OpenDeviceFor(uint32_t local_ipv4, QpSettings* s, ContextPtr* out) {
  if (s->device.empty() && local_ipv4 != 0) {
    int p = 0, gi = -1;
    if (OpenDeviceByAddress(local_ipv4, out, &p, &gi).ok()) {
      if (s->port == 0) s->port = p;
      if (s->gid_index < 0) s->gid_index = gi;
      return Status::Ok();
    }
  }
  return OpenDevice(s->device, out);
}

Status RandomPsn(uint32_t* out) { return SecureRandom::Psn(out); }

Status FillLocalParams(ibv_context* ctx, const QpSettings& s, ConnParams* p) {
  const std::string dev = ibv_get_device_name(ctx->device);
  p->port_num = static_cast<uint8_t>(s.port > 0 ? s.port : 1);
  ibv_port_attr pa{};
  if (int rc = ibv_query_port(ctx, p->port_num, &pa); rc != 0)
    return ErrnoStatus("ibv_query_port(" + dev + " port " + std::to_string(p->port_num) + ")", rc);
  if (pa.state != IBV_PORT_ACTIVE)
    return Status(Code::kIoError, dev + " port " + std::to_string(p->port_num) +
                                      " is not active (state " + ibv_port_state_str(pa.state) +
                                      ")");
  ibv_device_attr da{};
  if (int rc = ibv_query_device(ctx, &da); rc != 0) return ErrnoStatus("ibv_query_device", rc);
  p->link_layer = pa.link_layer == IBV_LINK_LAYER_INFINIBAND ? kLinkInfiniBand : kLinkEthernet;
  p->lid = pa.lid;
  p->active_mtu = static_cast<uint8_t>(pa.active_mtu);
  if (s.path_mtu != 0) {
    uint8_t m = MtuBytesToEnum(s.path_mtu);
    if (m == 0)
      return Status(Code::kInvalidArgument, "path_mtu " + std::to_string(s.path_mtu) +
                                                " is not one of 256, 512, 1024, 2048, 4096");
    p->path_mtu = m;
    p->mtu_explicit = 1;
  } else {
    p->path_mtu = p->active_mtu;
    p->mtu_explicit = 0;
  }
  // GID: the given index, else (RoCE) the IPv4-mapped RoCE v2 entry, else 0.
  int gi = s.gid_index;
  if (gi < 0) {
    gi = 0;
    if (p->link_layer == kLinkEthernet) {
      int fallback = -1;
      for (const ibv_gid_entry& e : GidTable(ctx, p->port_num)) {
        if (!IsIpv4Mapped(e.gid.raw)) continue;
        if (e.gid_type == IBV_GID_TYPE_ROCE_V2) {
          fallback = static_cast<int>(e.gid_index);
          break;
        }
        if (fallback < 0) fallback = static_cast<int>(e.gid_index);
      }
      if (fallback >= 0) gi = fallback;
    }
  }
  if (gi >= pa.gid_tbl_len)
    return Status(Code::kInvalidArgument, "gid_index " + std::to_string(gi) + " beyond " + dev +
                                              " port's GID table (" +
                                              std::to_string(pa.gid_tbl_len) + " entries)");
  ibv_gid gid{};
  if (int rc = ibv_query_gid(ctx, p->port_num, gi, &gid); rc != 0)
    return ErrnoStatus("ibv_query_gid(index " + std::to_string(gi) + ")", rc);
  if (p->link_layer == kLinkEthernet &&
      std::all_of(gid.raw, gid.raw + 16, [](uint8_t b) { return b == 0; }))
    return Status(Code::kInvalidArgument, "GID index " + std::to_string(gi) + " of " + dev +
                                              " is empty (RoCE needs a GID)");
  p->gid_index = static_cast<uint8_t>(gi);
  std::memcpy(p->gid, gid.raw, 16);
  // P_Key.
  if (s.pkey_index < 0 || s.pkey_index >= pa.pkey_tbl_len)
    return Status(Code::kInvalidArgument, "pkey_index " + std::to_string(s.pkey_index) +
                                              " beyond the P_Key table (" +
                                              std::to_string(pa.pkey_tbl_len) + " entries)");
  uint16_t pkey_be = 0;
  if (int rc = ibv_query_pkey(ctx, p->port_num, s.pkey_index, &pkey_be); rc != 0)
    return ErrnoStatus("ibv_query_pkey(index " + std::to_string(s.pkey_index) + ")", rc);
  p->pkey_index = static_cast<uint8_t>(s.pkey_index);
  p->pkey = ntohs(pkey_be);
  if (s.pkey >= 0 && static_cast<uint16_t>(s.pkey) != p->pkey) {
    // Look the value up; if the table lacks it, advertise it anyway so that the validator on
    // both sides reports the partition mismatch by name.
    bool found = false;
    for (int i = 0; i < pa.pkey_tbl_len && !found; ++i) {
      if (ibv_query_pkey(ctx, p->port_num, i, &pkey_be) == 0 && ntohs(pkey_be) == s.pkey) {
        p->pkey_index = static_cast<uint8_t>(i);
        found = true;
      }
    }
    if (!found)
      LOG(WARNING) << "P_Key 0x" << std::hex << s.pkey << " is not in " << dev
                   << "'s P_Key table; advertising it as set (the QP uses index " << std::dec
                   << s.pkey_index << ")";
    p->pkey = static_cast<uint16_t>(s.pkey);
  }
  if (s.sl < 0 || s.sl > 15) return Status(Code::kInvalidArgument, "sl must be 0..15");
  p->sl = static_cast<uint8_t>(s.sl);
  p->src_path_bits = static_cast<uint8_t>(s.src_path_bits);
  p->traffic_class = static_cast<uint8_t>(s.traffic_class);
  p->hop_limit = static_cast<uint8_t>(s.hop_limit);
  p->grh_required = s.grh ? 1 : 0;
  p->qkey = s.qkey;
  p->max_rd_atomic = RdAtomicDepth(s.max_rd_atomic, da.max_qp_init_rd_atom);
  p->max_dest_rd_atomic = RdAtomicDepth(s.max_dest_rd_atomic, da.max_qp_rd_atom);
  if (Status rd = CheckRdAtomicLimits(da, s); !rd.ok()) return rd;
  if (s.min_rnr_timer < 0 || s.min_rnr_timer > 31 || s.timeout < 0 || s.timeout > 31 ||
      s.retry_cnt < 0 || s.retry_cnt > 7 || s.rnr_retry < 0 || s.rnr_retry > 7)
    return Status(Code::kInvalidArgument,
                  "min_rnr_timer and timeout must be 0..31, retry_cnt and rnr_retry 0..7");
  p->min_rnr_timer = static_cast<uint8_t>(s.min_rnr_timer);
  p->timeout = static_cast<uint8_t>(s.timeout);
  p->retry_cnt = static_cast<uint8_t>(s.retry_cnt);
  p->rnr_retry = static_cast<uint8_t>(s.rnr_retry);
  if (s.psn > 0xffffff) return Status(Code::kInvalidArgument, "psn must fit in 24 bits");
  if (s.psn >= 0) {
    p->psn = static_cast<uint32_t>(s.psn);
  } else if (Status r = RandomPsn(&p->psn); !r.ok()) {
    return Status(r.code(), "choosing a PSN: " + r.message());
  }
  return Status::Ok();
}

uint8_t RdAtomicDepth(int want, int dev_max) {
  return static_cast<uint8_t>(want < 0 ? std::min(dev_max, 16) : std::min(want, 255));
}

Status CheckRdAtomicLimits(const ibv_device_attr& da, const QpSettings& s) {
  if (s.max_rd_atomic > da.max_qp_init_rd_atom || s.max_dest_rd_atomic > da.max_qp_rd_atom)
    return Status(Code::kInvalidArgument,
                  "rd_atomic depth above the device's limits (max_qp_init_rd_atom " +
                      std::to_string(da.max_qp_init_rd_atom) + ", max_qp_rd_atom " +
                      std::to_string(da.max_qp_rd_atom) + ")");
  return Status::Ok();
}

Status ModifyQpToInit(ibv_qp* qp, const ConnParams& self, int access_flags) {
  QpTransitions t = BuildTransitions(PlanQp(self, ConnParams{}, {}, access_flags));
  if (int rc = ibv_modify_qp(qp, &t.init.attr, t.init.mask); rc != 0)
    return ErrnoStatus("ibv_modify_qp(RESET->INIT)", rc);
  return Status::Ok();
}

std::string CheckParams(const ConnParams& self, const ConnParams& peer, const QpSettings& s) {
  QpPlan plan = PlanQp(self, peer, Overrides(s), 0);
  return JoinViolations(ValidatePlan(plan, self, peer));
}

Status ConnectQp(ibv_qp* qp, const ConnParams& self, const ConnParams& peer, const QpSettings& s,
                 int access_flags, std::string* note) {
  QpPlan plan = PlanQp(self, peer, Overrides(s), access_flags);
  std::vector<Violation> v = ValidatePlan(plan, self, peer);
  if (!v.empty()) return Status(Code::kParamMismatch, JoinViolations(v));
  if (note) *note = plan.mtu_note;
  QpTransitions t = BuildTransitions(plan);
  if (int rc = ibv_modify_qp(qp, &t.rtr.attr, t.rtr.mask); rc != 0)
    return ErrnoStatus("ibv_modify_qp(INIT->RTR)", rc);
  if (int rc = ibv_modify_qp(qp, &t.rts.attr, t.rts.mask); rc != 0)
    return ErrnoStatus("ibv_modify_qp(RTR->RTS)", rc);
  return Status::Ok();
}

Status ReadBackParams(ibv_qp* qp, ConnParams* l, ConnParams* r) {
  ibv_qp_attr a{};
  ibv_qp_init_attr init{};
  int mask = IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_AV | IBV_QP_PATH_MTU |
             IBV_QP_DEST_QPN | IBV_QP_RQ_PSN | IBV_QP_SQ_PSN | IBV_QP_MAX_QP_RD_ATOMIC |
             IBV_QP_MAX_DEST_RD_ATOMIC | IBV_QP_MIN_RNR_TIMER | IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT |
             IBV_QP_RNR_RETRY | IBV_QP_QKEY;
  if (int rc = ibv_query_qp(qp, &a, mask, &init); rc != 0) return ErrnoStatus("ibv_query_qp", rc);
  ibv_context* ctx = qp->context;
  // rdma_cm leaves port_num of the attr 0 on some providers: fall back to the AV's port.
  uint8_t port = a.port_num != 0 ? a.port_num : a.ah_attr.port_num != 0 ? a.ah_attr.port_num : 1;
  ibv_port_attr pa{};
  if (int rc = ibv_query_port(ctx, port, &pa); rc != 0) return ErrnoStatus("ibv_query_port", rc);
  l->transport = qp->qp_type == IBV_QPT_UD   ? Transport::kUD
                 : qp->qp_type == IBV_QPT_UC ? Transport::kUC
                                             : Transport::kRC;
  r->transport = l->transport;
  l->link_layer = r->link_layer =
      pa.link_layer == IBV_LINK_LAYER_INFINIBAND ? kLinkInfiniBand : kLinkEthernet;
  l->port_num = port;
  l->lid = pa.lid;
  l->active_mtu = static_cast<uint8_t>(pa.active_mtu);
  l->qp_num = qp->qp_num;
  l->psn = a.sq_psn;
  l->path_mtu = r->path_mtu = static_cast<uint8_t>(a.path_mtu);
  l->pkey_index = static_cast<uint8_t>(a.pkey_index);
  uint16_t pkey_be = 0;
  if (ibv_query_pkey(ctx, port, a.pkey_index, &pkey_be) == 0) l->pkey = ntohs(pkey_be);
  l->qkey = r->qkey = a.qkey;
  l->sl = a.ah_attr.sl;
  l->src_path_bits = a.ah_attr.src_path_bits;
  l->max_rd_atomic = a.max_rd_atomic;
  l->max_dest_rd_atomic = a.max_dest_rd_atomic;
  l->min_rnr_timer = a.min_rnr_timer;
  l->timeout = a.timeout;
  l->retry_cnt = a.retry_cnt;
  l->rnr_retry = a.rnr_retry;
  r->qp_num = a.dest_qp_num;
  r->psn = a.rq_psn;
  r->lid = a.ah_attr.dlid;
  if (a.ah_attr.is_global) {
    const ibv_global_route& g = a.ah_attr.grh;
    l->gid_index = g.sgid_index;
    ibv_gid sgid{};
    if (ibv_query_gid(ctx, port, g.sgid_index, &sgid) == 0) std::memcpy(l->gid, sgid.raw, 16);
    std::memcpy(r->gid, g.dgid.raw, 16);
    l->hop_limit = g.hop_limit;
    l->traffic_class = g.traffic_class;
  }
  return Status::Ok();
}

}  // namespace rkv
