#include "common/conn_params.h"

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

}  // namespace rkv
