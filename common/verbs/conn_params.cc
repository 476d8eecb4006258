// SPDX-License-Identifier: Apache-2.0
#include "common/verbs/conn_params.h"

#include <cstdio>
#include <cstring>

namespace rkv {
namespace {
template <typename T>
void Put(uint8_t* p, T v) {
  std::memcpy(p, &v, sizeof(T));  // little-endian hosts only (static_assert in wire.h)
}
template <typename T>
T Get(const uint8_t* p) {
  T v;
  std::memcpy(&v, p, sizeof(T));
  return v;
}
// Field offsets of the encoding (docs/wire-format.md).
enum : size_t {
  kMagic = 0,
  kVersion = 4,
  kLength = 6,
  kTransport = 8,
  kLinkLayer = 9,
  kPort = 10,
  kGidIndex = 11,
  kLid = 12,
  kSrcPathBits = 14,
  kSl = 15,
  kGid = 16,
  kQpNum = 32,
  kPsn = 36,
  kPathMtu = 40,
  kActiveMtu = 41,
  kMtuExplicit = 42,
  kPkeyIndex = 43,
  kPkey = 44,
  kMaxRdAtomic = 46,
  kMaxDestRdAtomic = 47,
  kQkey = 48,
  kMinRnrTimer = 52,
  kTimeout = 53,
  kRetryCnt = 54,
  kRnrRetry = 55,
  kHopLimit = 56,
  kTrafficClass = 57,
  kGrhRequired = 58,
  kRemoteAddr = 64,
  kRkey = 72,
  kRegionSize = 80,
  kEnd = 88,
};
static_assert(kEnd <= kConnParamsSize, "record fields exceed the record");
}  // namespace

const char* TransportName(Transport t) {
  switch (t) {
    case Transport::kRC:
      return "RC";
    case Transport::kUC:
      return "UC";
    case Transport::kUD:
      return "UD";
  }
  return "?";
}

const char* ExchangeName(Exchange e) {
  switch (e) {
    case Exchange::kRdmaCm:
      return "rdma_cm";
    case Exchange::kTcp:
      return "tcp";
    case Exchange::kFile:
      return "file";
    case Exchange::kEtcd:
      return "etcd";
  }
  return "?";
}

bool ParseExchange(const std::string& name, Exchange* out) {
  if (name == "cm" || name == "rdma_cm")
    *out = Exchange::kRdmaCm;
  else if (name == "tcp")
    *out = Exchange::kTcp;
  else if (name == "file")
    *out = Exchange::kFile;
  else if (name == "etcd")
    *out = Exchange::kEtcd;
  else
    return false;
  return true;
}

uint32_t MtuEnumToBytes(uint8_t mtu) { return mtu >= 1 && mtu <= 5 ? 128u << mtu : 0; }

uint8_t MtuBytesToEnum(uint32_t bytes) {
  for (uint8_t m = 1; m <= 5; ++m)
    if (MtuEnumToBytes(m) == bytes) return m;
  return 0;
}

std::string GidToString(const uint8_t gid[16]) {
  char buf[48];
  std::snprintf(buf, sizeof buf,
                "%02x%02x:%02x%02x:%02x%02x:%02x%02x:%02x%02x:%02x%02x:%02x%02x:%02x%02x", gid[0],
                gid[1], gid[2], gid[3], gid[4], gid[5], gid[6], gid[7], gid[8], gid[9], gid[10],
                gid[11], gid[12], gid[13], gid[14], gid[15]);
  return buf;
}

void EncodeConnParams(const ConnParams& p, uint8_t* o) {
  std::memset(o, 0, kConnParamsSize);
  Put<uint32_t>(o + kMagic, kConnParamsMagic);
  Put<uint16_t>(o + kVersion, kConnParamsVersion);
  Put<uint16_t>(o + kLength, kConnParamsSize);
  o[kTransport] = static_cast<uint8_t>(p.transport);
  o[kLinkLayer] = p.link_layer;
  o[kPort] = p.port_num;
  o[kGidIndex] = p.gid_index;
  Put<uint16_t>(o + kLid, p.lid);
  o[kSrcPathBits] = p.src_path_bits;
  o[kSl] = p.sl;
  std::memcpy(o + kGid, p.gid, 16);
  Put<uint32_t>(o + kQpNum, p.qp_num);
  Put<uint32_t>(o + kPsn, p.psn);
  o[kPathMtu] = p.path_mtu;
  o[kActiveMtu] = p.active_mtu;
  o[kMtuExplicit] = p.mtu_explicit;
  o[kPkeyIndex] = p.pkey_index;
  Put<uint16_t>(o + kPkey, p.pkey);
  o[kMaxRdAtomic] = p.max_rd_atomic;
  o[kMaxDestRdAtomic] = p.max_dest_rd_atomic;
  Put<uint32_t>(o + kQkey, p.qkey);
  o[kMinRnrTimer] = p.min_rnr_timer;
  o[kTimeout] = p.timeout;
  o[kRetryCnt] = p.retry_cnt;
  o[kRnrRetry] = p.rnr_retry;
  o[kHopLimit] = p.hop_limit;
  o[kTrafficClass] = p.traffic_class;
  o[kGrhRequired] = p.grh_required;
  Put<uint64_t>(o + kRemoteAddr, p.remote_addr);
  Put<uint32_t>(o + kRkey, p.rkey);
  Put<uint64_t>(o + kRegionSize, p.region_size);
}

Status DecodeConnParams(const uint8_t* d, size_t len, ConnParams* out) {
  auto bad = [](const std::string& m) {
    return Status(Code::kProtocolError, "connection parameter record: " + m);
  };
  if (d == nullptr || len < kConnParamsSize)
    return bad(std::to_string(len) + " bytes, need " + std::to_string(kConnParamsSize));
  if (Get<uint32_t>(d + kMagic) != kConnParamsMagic) return bad("bad magic (not from rkv?)");
  if (Get<uint16_t>(d + kVersion) != kConnParamsVersion)
    return bad("version " + std::to_string(Get<uint16_t>(d + kVersion)) + ", expected " +
               std::to_string(kConnParamsVersion));
  if (Get<uint16_t>(d + kLength) != kConnParamsSize)
    return bad("length field " + std::to_string(Get<uint16_t>(d + kLength)));
  ConnParams p;
  if (d[kTransport] > 2) return bad("unknown transport " + std::to_string(d[kTransport]));
  p.transport = static_cast<Transport>(d[kTransport]);
  p.link_layer = d[kLinkLayer];
  if (p.link_layer != kLinkInfiniBand && p.link_layer != kLinkEthernet)
    return bad("unknown link layer " + std::to_string(p.link_layer));
  p.port_num = d[kPort];
  if (p.port_num == 0) return bad("port number 0");
  p.gid_index = d[kGidIndex];
  p.lid = Get<uint16_t>(d + kLid);
  p.src_path_bits = d[kSrcPathBits];
  p.sl = d[kSl];
  if (p.sl > 15) return bad("service level " + std::to_string(p.sl) + " above 15");
  std::memcpy(p.gid, d + kGid, 16);
  p.qp_num = Get<uint32_t>(d + kQpNum);
  p.psn = Get<uint32_t>(d + kPsn);
  if (p.qp_num > 0xffffff || p.psn > 0xffffff) return bad("QP number or PSN wider than 24 bits");
  p.path_mtu = d[kPathMtu];
  p.active_mtu = d[kActiveMtu];
  if (!MtuEnumToBytes(p.path_mtu) || !MtuEnumToBytes(p.active_mtu))
    return bad("invalid MTU code " + std::to_string(p.path_mtu) + "/" +
               std::to_string(p.active_mtu));
  p.mtu_explicit = d[kMtuExplicit] != 0;
  p.pkey_index = d[kPkeyIndex];
  p.pkey = Get<uint16_t>(d + kPkey);
  p.max_rd_atomic = d[kMaxRdAtomic];
  p.max_dest_rd_atomic = d[kMaxDestRdAtomic];
  p.qkey = Get<uint32_t>(d + kQkey);
  p.min_rnr_timer = d[kMinRnrTimer];
  p.timeout = d[kTimeout];
  p.retry_cnt = d[kRetryCnt];
  p.rnr_retry = d[kRnrRetry];
  if (p.min_rnr_timer > 31 || p.timeout > 31 || p.retry_cnt > 7 || p.rnr_retry > 7)
    return bad("timer or retry field out of range");
  p.hop_limit = d[kHopLimit];
  p.traffic_class = d[kTrafficClass];
  p.grh_required = d[kGrhRequired] != 0;
  p.remote_addr = Get<uint64_t>(d + kRemoteAddr);
  p.rkey = Get<uint32_t>(d + kRkey);
  p.region_size = Get<uint64_t>(d + kRegionSize);
  *out = p;
  return Status::Ok();
}

std::string FormatConnParams(const ConnParams& p) {
  char buf[1024];
  std::snprintf(
      buf, sizeof buf,
      "transport %s\nlink_layer %s\nport %u\nlid 0x%x\ngid %s\ngid_index %u\nsrc_path_bits %u\n"
      "sl %u\nqp_num 0x%x\npsn 0x%x\npath_mtu %u\nactive_mtu %u\npkey_index %u\npkey 0x%04x\n"
      "qkey 0x%x\nmax_rd_atomic %u\nmax_dest_rd_atomic %u\nmin_rnr_timer %u\ntimeout %u\n"
      "retry_cnt %u\nrnr_retry %u\nhop_limit %u\ntraffic_class %u\nremote_addr 0x%llx\n"
      "rkey 0x%x\nregion_size %llu\n",
      TransportName(p.transport), p.link_layer == kLinkEthernet ? "Ethernet" : "InfiniBand",
      p.port_num, p.lid, GidToString(p.gid).c_str(), p.gid_index, p.src_path_bits, p.sl, p.qp_num,
      p.psn, MtuEnumToBytes(p.path_mtu), MtuEnumToBytes(p.active_mtu), p.pkey_index, p.pkey, p.qkey,
      p.max_rd_atomic, p.max_dest_rd_atomic, p.min_rnr_timer, p.timeout, p.retry_cnt, p.rnr_retry,
      p.hop_limit, p.traffic_class, (unsigned long long)p.remote_addr, p.rkey,
      (unsigned long long)p.region_size);
  return buf;
}

std::string FormatParamsLine(const ConnParams& l, const ConnParams& r) {
  char buf[640];
  std::snprintf(buf, sizeof buf,
                "qp 0x%x -> peer qp 0x%x, port %u, lid 0x%x -> 0x%x, gid[%u] %s -> %s, sq_psn "
                "0x%x, rq_psn 0x%x, path_mtu %u, pkey_index %u (0x%04x), sl %u, max_rd_atomic %u, "
                "max_dest_rd_atomic %u, min_rnr_timer %u, timeout %u, retry_cnt %u, rnr_retry %u",
                l.qp_num, r.qp_num, l.port_num, l.lid, r.lid, l.gid_index,
                GidToString(l.gid).c_str(), GidToString(r.gid).c_str(), l.psn, r.psn,
                MtuEnumToBytes(l.path_mtu), l.pkey_index, l.pkey, l.sl, l.max_rd_atomic,
                l.max_dest_rd_atomic, l.min_rnr_timer, l.timeout, l.retry_cnt, l.rnr_retry);
  return buf;
}

std::string FormatParamTable(const ConnParams& l, const ConnParams& r) {
  std::string out;
  auto row = [&](const char* name, const std::string& a, const std::string& b) {
    char buf[256];
    std::snprintf(buf, sizeof buf, "%-20s %-40s %s\n", name, a.c_str(), b.c_str());
    out += buf;
  };
  auto num = [](uint64_t v) { return std::to_string(v); };
  auto hex = [](uint64_t v) {
    char b[24];
    std::snprintf(b, sizeof b, "0x%llx", static_cast<unsigned long long>(v));
    return std::string(b);
  };
  auto link = [](uint8_t l) { return std::string(l == kLinkEthernet ? "Ethernet" : "InfiniBand"); };
  auto mtu = [](uint8_t m) { return std::to_string(MtuEnumToBytes(m)); };
  row("parameter", "local", "peer");
  row("transport", TransportName(l.transport), TransportName(r.transport));
  row("link_layer", link(l.link_layer), link(r.link_layer));
  row("port", num(l.port_num), num(r.port_num));
  row("lid", hex(l.lid), hex(r.lid));
  row("gid", GidToString(l.gid), GidToString(r.gid));
  row("gid_index", num(l.gid_index), num(r.gid_index));
  row("qp_num", hex(l.qp_num), hex(r.qp_num));
  row("psn (sq_psn)", hex(l.psn), hex(r.psn));
  row("path_mtu", mtu(l.path_mtu), mtu(r.path_mtu));
  row("active_mtu", mtu(l.active_mtu), mtu(r.active_mtu));
  row("pkey_index", num(l.pkey_index), num(r.pkey_index));
  row("pkey", hex(l.pkey), hex(r.pkey));
  row("qkey", hex(l.qkey), hex(r.qkey));
  row("sl", num(l.sl), num(r.sl));
  row("src_path_bits", num(l.src_path_bits), num(r.src_path_bits));
  row("max_rd_atomic", num(l.max_rd_atomic), num(r.max_rd_atomic));
  row("max_dest_rd_atomic", num(l.max_dest_rd_atomic), num(r.max_dest_rd_atomic));
  row("min_rnr_timer", num(l.min_rnr_timer), num(r.min_rnr_timer));
  row("timeout", num(l.timeout), num(r.timeout));
  row("retry_cnt", num(l.retry_cnt), num(r.retry_cnt));
  row("rnr_retry", num(l.rnr_retry), num(r.rnr_retry));
  row("hop_limit", num(l.hop_limit), num(r.hop_limit));
  row("traffic_class", num(l.traffic_class), num(r.traffic_class));
  // Memory parameters: granted at OPEN, so none before a connection is open (kvctl check).
  const bool granted = l.rkey != 0 || r.rkey != 0 || l.region_size != 0 || r.region_size != 0;
  const std::string none = "- (granted at OPEN)";
  row("remote_addr", granted ? hex(l.remote_addr) : none, granted ? hex(r.remote_addr) : none);
  row("rkey", granted ? hex(l.rkey) : none, granted ? hex(r.rkey) : none);
  row("region_size", granted ? num(l.region_size) : none, granted ? num(r.region_size) : none);
  return out;
}

}  // namespace rkv
