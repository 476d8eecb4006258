// SPDX-License-Identifier: Apache-2.0
#include "common/verbs/conn_flags.h"

#include <gflags/gflags.h>

#include <cstdlib>
#include <utility>

DEFINE_string(exchange, "cm",
              "how peers exchange connection parameters: cm (rdma_cm, default), or manual mode "
              "over tcp, file or etcd");
DEFINE_string(exchange_dir, "", "--exchange=file: directory both sides can read and write");
DEFINE_string(etcd, "http://127.0.0.1:2379", "--exchange=etcd: etcd v3 JSON gateway endpoint");
DEFINE_string(etcd_prefix, "/rkv", "--exchange=etcd: key prefix (one per server)");
DEFINE_string(etcd_cacert, "", "--exchange=etcd: CA file verifying etcd's TLS certificate (https)");
DEFINE_string(etcd_cert, "", "--exchange=etcd: TLS client certificate (PEM; with --etcd_key)");
DEFINE_string(etcd_key, "", "--exchange=etcd: TLS client private key (PEM)");
DEFINE_string(etcd_user, "", "--exchange=etcd: etcd user (v3 auth; with --etcd_password_file)");
DEFINE_string(etcd_password_file, "",
              "--exchange=etcd: file holding --etcd_user's password (mode 0600 or stricter)");
DEFINE_int32(exchange_timeout_ms, 10000, "manual mode: how long to wait for the peer's record");
DEFINE_string(device, "", "manual mode: RDMA device (default: the one with the address, or first)");
DEFINE_int32(ib_port, 0, "manual mode: device port number (default 1)");
DEFINE_int32(gid_index, -1, "manual mode: GID index (-1: the IPv4-mapped RoCE v2 GID)");
DEFINE_int32(path_mtu, 0, "manual mode: path MTU in bytes (0: smaller of both ports' active MTU)");
DEFINE_int32(pkey_index, 0, "manual mode: P_Key table index");
DEFINE_string(pkey, "", "manual mode: P_Key value to use, e.g. 0xffff (default: the table's)");
DEFINE_int32(sl, 0, "manual mode: service level 0..15 (InfiniBand)");
DEFINE_int32(src_path_bits, 0, "manual mode: source path bits (InfiniBand LMC)");
DEFINE_int32(traffic_class, 0, "GRH traffic class (rdma_cm: type of service)");
DEFINE_int32(hop_limit, 64, "manual mode: GRH hop limit");
DEFINE_int64(psn, -1, "manual mode: this side's start PSN (-1: random, never 0)");
DEFINE_string(qkey, "0x11111111", "Q_Key (UD QPs; checked by the validator's UD rule)");
DEFINE_int32(max_rd_atomic, -1,
             "READs this side keeps in flight (rdma_cm initiator_depth); -1: role default");
DEFINE_int32(max_dest_rd_atomic, -1,
             "READs this side accepts (rdma_cm responder_resources); -1: role default");
DEFINE_int32(min_rnr_timer, 12, "manual mode: minimum RNR NAK timer code 0..31");
DEFINE_int32(qp_timeout, 14, "local ACK timeout code 0..31 (4.096 us * 2^N)");
DEFINE_int32(retry_cnt, 7, "transport retries 0..7");
DEFINE_int32(rnr_retry, 7, "RNR retries 0..7 (7: infinite)");
DEFINE_bool(grh, false, "manual mode, InfiniBand: route with a GRH");
DEFINE_int64(force_rq_psn, -1, "testing: program this rq_psn instead of the peer's PSN");
DEFINE_int64(force_dest_qp_num, -1, "testing: program this dest QP number instead of the peer's");

namespace rkv {
namespace {
bool ParseU32(const std::string& s, uint32_t max, uint32_t* out) {
  if (s.empty()) return false;
  char* end = nullptr;
  unsigned long long v = std::strtoull(s.c_str(), &end, 0);
  if (*end != '\0' || v > max) return false;
  *out = static_cast<uint32_t>(v);
  return true;
}
}  // namespace

Status ConnFlags(Role role, ExchangeOptions* x, QpSettings* q) {
  auto bad = [](const std::string& m) { return Status(Code::kInvalidArgument, m); };
  if (!ParseExchange(FLAGS_exchange, &x->method))
    return bad("--exchange=" + FLAGS_exchange + ": expected cm, tcp, file or etcd");
  x->dir = FLAGS_exchange_dir;
  x->etcd_endpoint = FLAGS_etcd;
  x->etcd_prefix = FLAGS_etcd_prefix;
  x->etcd_cacert = FLAGS_etcd_cacert;
  x->etcd_cert = FLAGS_etcd_cert;
  x->etcd_key = FLAGS_etcd_key;
  x->etcd_user = FLAGS_etcd_user;
  x->etcd_password_file = FLAGS_etcd_password_file;
  if (FLAGS_exchange_timeout_ms < 1) return bad("--exchange_timeout_ms must be positive");
  x->timeout_ms = FLAGS_exchange_timeout_ms;
  if (x->method == Exchange::kFile && x->dir.empty())
    return bad("--exchange=file needs --exchange_dir=DIR");
  q->device = FLAGS_device;
  if (FLAGS_ib_port < 0 || FLAGS_ib_port > 255) return bad("--ib_port must be 1..255");
  q->port = FLAGS_ib_port;
  if (FLAGS_gid_index < -1 || FLAGS_gid_index > 255) return bad("--gid_index must be 0..255");
  q->gid_index = FLAGS_gid_index;
  if (FLAGS_path_mtu != 0 && FLAGS_path_mtu != 256 && FLAGS_path_mtu != 512 &&
      FLAGS_path_mtu != 1024 && FLAGS_path_mtu != 2048 && FLAGS_path_mtu != 4096)
    return bad("--path_mtu=" + std::to_string(FLAGS_path_mtu) +
               ": expected 256, 512, 1024, 2048 or 4096");
  q->path_mtu = static_cast<uint32_t>(FLAGS_path_mtu);
  if (FLAGS_pkey_index < 0 || FLAGS_pkey_index > 255) return bad("--pkey_index must be 0..255");
  q->pkey_index = FLAGS_pkey_index;
  uint32_t v = 0;
  if (!FLAGS_pkey.empty()) {
    if (!ParseU32(FLAGS_pkey, 0xffff, &v))
      return bad("--pkey=" + FLAGS_pkey + ": expected 0..0xffff");
    q->pkey = int(v);
  }
  if (FLAGS_sl < 0 || FLAGS_sl > 15) return bad("--sl must be 0..15");
  q->sl = FLAGS_sl;
  if (FLAGS_src_path_bits < 0 || FLAGS_src_path_bits > 127)
    return bad("--src_path_bits must be 0..127");
  q->src_path_bits = FLAGS_src_path_bits;
  if (FLAGS_traffic_class < 0 || FLAGS_traffic_class > 255)
    return bad("--traffic_class must be 0..255");
  q->traffic_class = FLAGS_traffic_class;
  if (FLAGS_hop_limit < 0 || FLAGS_hop_limit > 255) return bad("--hop_limit must be 0..255");
  q->hop_limit = FLAGS_hop_limit;
  if (FLAGS_psn < -1 || FLAGS_psn > 0xffffff) return bad("--psn must be 0..0xffffff");
  q->psn = FLAGS_psn;
  if (!ParseU32(FLAGS_qkey, 0xffffffff, &q->qkey))
    return bad("--qkey=" + FLAGS_qkey + ": not a number");
  if (FLAGS_max_rd_atomic < -1 || FLAGS_max_rd_atomic > 255 || FLAGS_max_dest_rd_atomic < -1 ||
      FLAGS_max_dest_rd_atomic > 255)
    return bad("--max_rd_atomic and --max_dest_rd_atomic must be 0..255");
  q->max_rd_atomic = FLAGS_max_rd_atomic;
  q->max_dest_rd_atomic = FLAGS_max_dest_rd_atomic;
  if (role == Role::kServer && q->max_rd_atomic < 0) q->max_rd_atomic = 0;
  if (role == Role::kClient && q->max_dest_rd_atomic < 0) q->max_dest_rd_atomic = 0;
  if (FLAGS_min_rnr_timer < 0 || FLAGS_min_rnr_timer > 31)
    return bad("--min_rnr_timer must be 0..31");
  q->min_rnr_timer = FLAGS_min_rnr_timer;
  if (FLAGS_qp_timeout < 0 || FLAGS_qp_timeout > 31) return bad("--qp_timeout must be 0..31");
  q->timeout = FLAGS_qp_timeout;
  if (FLAGS_retry_cnt < 0 || FLAGS_retry_cnt > 7) return bad("--retry_cnt must be 0..7");
  q->retry_cnt = FLAGS_retry_cnt;
  if (FLAGS_rnr_retry < 0 || FLAGS_rnr_retry > 7) return bad("--rnr_retry must be 0..7");
  q->rnr_retry = FLAGS_rnr_retry;
  q->grh = FLAGS_grh;
  if (FLAGS_force_rq_psn > 0xffffff || FLAGS_force_dest_qp_num > 0xffffff)
    return bad("--force_rq_psn and --force_dest_qp_num must fit in 24 bits");
  q->force_rq_psn = FLAGS_force_rq_psn;
  q->force_dest_qp_num = FLAGS_force_dest_qp_num;
  return Status::Ok();
}

cli::Usage WithConnFlagGroups(cli::Usage usage) {
  for (auto& g : ConnFlagGroups()) usage.groups.push_back(std::move(g));
  return usage;
}

std::vector<cli::FlagGroup> ConnFlagGroups() {
  return {
      {"Parameter exchange (rdma_cm, or manual mode over tcp, file or etcd)",
       {"exchange", "exchange_timeout_ms", "exchange_dir", "etcd", "etcd_prefix", "etcd_cacert",
        "etcd_cert", "etcd_key", "etcd_user", "etcd_password_file"}},
      {"Device and path (manual mode)",
       {"device", "ib_port", "gid_index", "path_mtu", "pkey_index", "pkey", "sl", "src_path_bits",
        "traffic_class", "hop_limit", "grh", "qkey"}},
      {"Queue pair",
       {"psn", "max_rd_atomic", "max_dest_rd_atomic", "min_rnr_timer", "qp_timeout", "retry_cnt",
        "rnr_retry"}},
      {"Testing (break a connection on purpose)", {"force_rq_psn", "force_dest_qp_num"}},
  };
}

}  // namespace rkv
