// SPDX-License-Identifier: Apache-2.0
// Connection parameters of rkv's RDMA connections: what the two peers of a QP agree on
// (ConnParams), what a user may set (QpSettings), and how the parameters are exchanged
// (ExchangeOptions). See docs/connection.md for every parameter, where its value comes from,
// how each method exchanges it and where it is applied.
//
// Plain values: copyable, no thread-safety concerns. Used by rkv::Options (client) and by
// kvserver; the wire encoding of ConnParams is internal (docs/wire-format.md).
#ifndef RKV_CONNECTION_PARAMS_H_
#define RKV_CONNECTION_PARAMS_H_

#include <cstdint>
#include <string>

namespace rkv {

enum class Transport : uint8_t { kRC = 0, kUC = 1, kUD = 2 };
// Link layers use the ibverbs values: 1 InfiniBand, 2 Ethernet (RoCE).
inline constexpr uint8_t kLinkInfiniBand = 1;
inline constexpr uint8_t kLinkEthernet = 2;

// One side's parameters. In manual mode each side sends its own record to the peer; in
// rdma_cm mode both records are read back from the established QP (ibv_query_qp), the peer's
// as this QP addresses it (dest QP number, rq_psn, dlid/dgid).
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

// How the two sides exchange parameters. kRdmaCm: rdma_cm's handshake (the default). The
// others are "manual mode": QPs are created with ibv_create_qp and moved to RTR/RTS with
// ibv_modify_qp from records exchanged over a TCP socket, files in a shared directory, or etcd.
enum class Exchange : uint8_t { kRdmaCm = 0, kTcp = 1, kFile = 2, kEtcd = 3 };
const char* ExchangeName(Exchange e);
// "cm"/"rdma_cm", "tcp", "file", "etcd" -> Exchange; false if unknown.
bool ParseExchange(const std::string& name, Exchange* out);

struct ExchangeOptions {
  Exchange method = Exchange::kRdmaCm;
  std::string dir;                                      // kFile: directory both sides can read
  std::string etcd_endpoint = "http://127.0.0.1:2379";  // kEtcd: v3 JSON gateway
  std::string etcd_prefix = "/rkv";                     // kEtcd: key prefix (one per server)
  // kEtcd security (all optional; docs/connection.md): TLS needs an https:// endpoint.
  std::string etcd_cacert;         // CA bundle that verifies etcd's certificate
  std::string etcd_cert;           // client certificate (PEM), with etcd_key
  std::string etcd_key;            // client private key (PEM)
  std::string etcd_user;           // etcd v3 auth user (needs etcd_password_file)
  std::string etcd_password_file;  // file holding the user's password (not readable by others)
  int timeout_ms = 10000;          // waiting for the peer's record
};

// Parameters a user may set. -1 / 0 means "derive" as documented per field. In rdma_cm mode
// only device-independent ones apply (see docs/connection.md): rd_atomic depths, retry_cnt,
// rnr_retry, timeout, traffic_class, min_rnr_timer; the rest is chosen by rdma_cm.
struct QpSettings {
  std::string device;           // manual mode: RDMA device name ("" = the first, or the one
                                // holding the TCP connection's local address)
  int port = 0;                 // manual mode: port number (0 = 1)
  int gid_index = -1;           // -1: RoCE: the IPv4-mapped RoCE v2 GID; IB: 0
  uint32_t path_mtu = 0;        // bytes (256..4096); 0 = the smaller of both ports' active MTUs
  int pkey_index = 0;           // index into the port's P_Key table
  int pkey = -1;                // P_Key value to use; -1 = the value at pkey_index
  int sl = 0;                   // service level 0..15 (InfiniBand)
  int src_path_bits = 0;        // InfiniBand LMC path bits
  int traffic_class = 0;        // GRH traffic class (RoCE: DSCP << 2)
  int hop_limit = 64;           // GRH hop limit
  int64_t psn = -1;             // this side's send PSN; -1 = random 24-bit, never 0
  uint32_t qkey = 0x11111111;   // UD only
  int max_rd_atomic = -1;       // READs in flight (initiator_depth); -1 = device max, <= 16
  int max_dest_rd_atomic = -1;  // READs accepted (responder_resources); -1 = device max, <= 16
  int min_rnr_timer = 12;
  int timeout = 14;  // 4.096 us * 2^timeout
  int retry_cnt = 7;
  int rnr_retry = 7;
  bool grh = false;  // InfiniBand: route with a GRH
  // Forced values that break the rules on purpose (to check the validator): the rq_psn and
  // dest_qp_num this side programs instead of the peer's PSN and QP number. -1 = unset.
  int64_t force_rq_psn = -1;
  int64_t force_dest_qp_num = -1;
};

}  // namespace rkv

#endif  // RKV_CONNECTION_PARAMS_H_
