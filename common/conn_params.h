// ConnParams: the connection parameter record two RDMA peers exchange, and its wire encoding.
//
// One record per side. The same 128-byte encoding travels over every exchange method (TCP,
// file, etcd; docs/wire-format.md); in rdma_cm mode the server's memory parameters travel in
// the accept private data instead (wire::ServerHello) and the rest is read back from the QP.
// Wire format: fixed-width fields, little-endian, GID in network byte order as ibverbs keeps it.
// Thread safety: plain values; Encode/Decode are pure.
#ifndef RKV_COMMON_CONN_PARAMS_H_
#define RKV_COMMON_CONN_PARAMS_H_

#include <cstddef>
#include <cstdint>
#include <string>

#include "rkv/status.h"

namespace rkv {

enum class Transport : uint8_t { kRC = 0, kUC = 1, kUD = 2 };
const char* TransportName(Transport t);
// Link layers use the ibverbs values: 1 InfiniBand, 2 Ethernet (RoCE).
inline constexpr uint8_t kLinkInfiniBand = 1;
inline constexpr uint8_t kLinkEthernet = 2;

struct ConnParams {
  Transport transport = Transport::kRC;
  uint8_t link_layer = kLinkEthernet;
  uint8_t port_num = 1;
  uint8_t gid_index = 0;
  uint16_t lid = 0;  // the port's LID (0 on RoCE)
  uint8_t src_path_bits = 0;
  uint8_t sl = 0;        // service level
  uint8_t gid[16] = {};  // the port's GID at gid_index
  uint32_t qp_num = 0;
  uint32_t psn = 0;          // this side's send PSN (sq_psn); the peer's rq_psn must equal it
  uint8_t path_mtu = 3;      // enum ibv_mtu (1: 256 ... 5: 4096) this side will use
  uint8_t active_mtu = 3;    // the port's active MTU (enum ibv_mtu)
  uint8_t mtu_explicit = 0;  // 1 if the user fixed path_mtu; 0 if it may be negotiated down
  uint8_t pkey_index = 0;
  uint16_t pkey = 0xffff;          // the P_Key value at pkey_index (bit 15: full member)
  uint8_t max_rd_atomic = 1;       // READs this side has in flight (rdma_cm: initiator_depth)
  uint8_t max_dest_rd_atomic = 1;  // READs it accepts (rdma_cm: responder_resources)
  uint32_t qkey = 0;               // UD only
  uint8_t min_rnr_timer = 12;
  uint8_t timeout = 14;
  uint8_t retry_cnt = 7;
  uint8_t rnr_retry = 7;
  uint8_t hop_limit = 64;
  uint8_t traffic_class = 0;
  uint8_t grh_required = 0;  // InfiniBand: 1 to route with a GRH (always on RoCE)
  uint64_t remote_addr = 0;  // memory parameters (server side; 0 on a client)
  uint32_t rkey = 0;
  uint64_t region_size = 0;
};

inline constexpr uint32_t kConnParamsMagic = 0x504b5652;  // "RVKP" little-endian
inline constexpr uint16_t kConnParamsVersion = 1;
inline constexpr size_t kConnParamsSize = 128;

// Writes exactly kConnParamsSize bytes.
void EncodeConnParams(const ConnParams& p, uint8_t* out);
// Checks magic, version, length and field ranges; the message says what is wrong.
[[nodiscard]] Status DecodeConnParams(const uint8_t* data, size_t len, ConnParams* out);

// ibv_mtu enum value <-> bytes (0 if invalid).
uint32_t MtuEnumToBytes(uint8_t mtu);
uint8_t MtuBytesToEnum(uint32_t bytes);
std::string GidToString(const uint8_t gid[16]);
// "name value" lines, one per parameter, for logs and `kvctl info`.
std::string FormatConnParams(const ConnParams& p);

}  // namespace rkv

#endif  // RKV_COMMON_CONN_PARAMS_H_
