// SPDX-License-Identifier: Apache-2.0
// CheckConnection (rkv/client.h): the validator against a server, no data QP connected.
#include <arpa/inet.h>

#include <cerrno>
#include <cstring>

#include "common/exchange/exchange.h"
#include "common/parse.h"
#include "common/printable.h"
#include "common/verbs/conn_params.h"
#include "common/verbs/qp_setup.h"
#include "common/verbs/rdma.h"
#include "rkv/client.h"

namespace rkv {
namespace {
// rdma_cm: resolve address and route; report the path rdma_cm would program.
Status CheckCm(const std::string& host, uint16_t port, const Options& o, std::string* report) {
  EventChannelPtr channel(rdma_create_event_channel());
  if (!channel) return ErrnoStatus("rdma_create_event_channel", errno);
  rdma_cm_id* raw = nullptr;
  if (rdma_create_id(channel.get(), &raw, nullptr, RDMA_PS_TCP) != 0)
    return ErrnoStatus("rdma_create_id", errno);
  CmIdPtr id(raw);
  Status s = ResolveRoute(channel.get(), raw, host, port, o.connect_timeout_ms,
                          static_cast<uint8_t>(o.qp.traffic_class), nullptr, o.local_address);
  if (!s.ok()) return s;
  QpSettings qs = o.qp;
  qs.port = raw->port_num;
  ConnParams self;
  s = FillLocalParams(raw->verbs, qs, &self);
  if (!s.ok()) return s;
  ConnParams path;  // the route as rdma_cm resolved it
  path.port_num = raw->port_num;
  if (raw->route.num_paths > 0) {
    const ibv_sa_path_rec& p = raw->route.path_rec[0];
    std::memcpy(self.gid, p.sgid.raw, 16);
    std::memcpy(path.gid, p.dgid.raw, 16);
    if (self.link_layer == kLinkInfiniBand) path.lid = ntohs(p.dlid);
    path.pkey = ntohs(p.pkey);
    path.path_mtu = path.active_mtu = p.mtu;
    path.sl = p.sl;
    path.traffic_class = p.traffic_class;
    path.hop_limit = p.hop_limit;
  }
  *report = std::string("exchange rdma_cm: route to ") + host + ":" + std::to_string(port) +
            " resolved on " + ibv_get_device_name(raw->verbs->device) + " port " +
            std::to_string(raw->port_num) +
            " (peer column: the resolved path; rdma_cm negotiates QP numbers, PSNs and "
            "rd_atomic depths at connect time, and rkv reads them back then: kvctl info)\n" +
            FormatParamTable(self, path);
  return Status::Ok();
}
}  // namespace

Status CheckConnection(const std::string& address, const Options& o, std::string* report) {
  std::string host;
  uint16_t port;
  Status s = ParseHostPort(address, &host, &port);
  if (!s.ok()) return s;
  if (o.exchange.method == Exchange::kRdmaCm) return CheckCm(host, port, o, report);
  std::unique_ptr<ExchangeChannel> ch;
  s = ConnectExchange(o.exchange, host, port, &ch);
  if (!s.ok()) return s;
  QpSettings qs = o.qp;
  ContextPtr ctx;
  s = OpenDeviceFor(ch->LocalIpv4(), &qs, &ctx);
  if (!s.ok()) return s;
  ExchangeMsg m;
  m.type = MsgType::kCheck;
  s = FillLocalParams(ctx.get(), qs, &m.params);
  if (!s.ok()) return s;
  s = ch->Send(m);
  if (!s.ok()) return s;
  ExchangeMsg r;
  s = ch->Receive(&r, o.exchange.timeout_ms);
  if (!s.ok()) return s;
  // The server's words are escaped (Printable) before they reach a message or the terminal.
  const std::string server_text = Printable(r.text, 2048);
  if (r.type == MsgType::kError) return Status(r.code, "server: " + server_text);
  if (r.type != MsgType::kCheckReply)
    return Status(Code::kProtocolError, "expected the server's check reply");
  std::string mine = CheckParams(m.params, r.params, qs);
  *report = "exchange " + ch->Describe() + " (QP numbers are 0: no QP is connected)\n" +
            FormatParamTable(m.params, r.params) +
            "server-side validator: " + (r.text.empty() ? "OK" : server_text) + "\n" +
            "client-side validator: " + (mine.empty() ? "OK" : mine) + "\n";
  if (!r.text.empty() || !mine.empty())
    return Status(Code::kParamMismatch,
                  !r.text.empty() ? "server: " + server_text : "client: " + mine);
  return Status::Ok();
}

}  // namespace rkv
