// SPDX-License-Identifier: Apache-2.0
#include "common/exchange/exchange.h"

#include <cstring>

#include "common/exchange/etcd_mailbox.h"
#include "common/exchange/file_mailbox.h"
#include "common/exchange/mailbox_channel.h"
#include "common/exchange/tcp_exchange.h"

namespace rkv {
namespace {
// Header: magic u32, version u16, type u16, payload length u32, code u16, flags u16.
// Payload: [128-byte record] [80-byte ServerHello if flags & 1] [text].
constexpr uint16_t kHasHello = 1;
bool HasRecord(MsgType t) {
  return t == MsgType::kParams || t == MsgType::kCheck || t == MsgType::kCheckReply;
}
// The storage behind the file and etcd methods.
Status OpenMailbox(const ExchangeOptions& o, std::unique_ptr<Mailbox>* mb) {
  return o.method == Exchange::kFile ? FileMailbox::Open(o.dir, mb) : EtcdMailbox::Open(o, mb);
}
}  // namespace

std::string EncodeExchangeMsg(const ExchangeMsg& m) {
  std::string out(kExchangeHeaderSize, '\0');
  if (HasRecord(m.type)) {
    uint8_t rec[kConnParamsSize];
    EncodeConnParams(m.params, rec);
    out.append(reinterpret_cast<const char*>(rec), sizeof rec);
    if (m.has_hello) out.append(reinterpret_cast<const char*>(&m.hello), sizeof m.hello);
  }
  out.append(m.text.substr(0, kMaxExchangeMessage - out.size()));
  uint8_t* h = reinterpret_cast<uint8_t*>(out.data());
  uint32_t magic = kExchangeMagic, len = uint32_t(out.size() - kExchangeHeaderSize);
  uint16_t version = kExchangeVersion, type = uint16_t(m.type), code = uint16_t(m.code);
  uint16_t flags = (HasRecord(m.type) && m.has_hello) ? kHasHello : 0;
  std::memcpy(h, &magic, 4);
  std::memcpy(h + 4, &version, 2);
  std::memcpy(h + 6, &type, 2);
  std::memcpy(h + 8, &len, 4);
  std::memcpy(h + 12, &code, 2);
  std::memcpy(h + 14, &flags, 2);
  return out;
}

Status ExchangePayloadLength(const uint8_t* h, uint32_t* len) {
  uint32_t magic;
  uint16_t version;
  std::memcpy(&magic, h, 4);
  std::memcpy(&version, h + 4, 2);
  std::memcpy(len, h + 8, 4);
  if (magic != kExchangeMagic)
    return Status(Code::kProtocolError, "exchange message: bad magic (is the peer rkv?)");
  if (version != kExchangeVersion)
    return Status(Code::kProtocolError, "exchange message: version " + std::to_string(version) +
                                            ", expected " + std::to_string(kExchangeVersion));
  if (*len > kMaxExchangeMessage - kExchangeHeaderSize)
    return Status(Code::kProtocolError,
                  "exchange message: payload of " + std::to_string(*len) + " bytes is too long");
  return Status::Ok();
}

Status DecodeExchangeMsg(const uint8_t* d, size_t len, ExchangeMsg* out) {
  if (len < kExchangeHeaderSize)
    return Status(Code::kProtocolError,
                  "exchange message: " + std::to_string(len) + " bytes, shorter than a header");
  uint32_t plen = 0;
  Status s = ExchangePayloadLength(d, &plen);
  if (!s.ok()) return s;
  if (plen != len - kExchangeHeaderSize)
    return Status(Code::kProtocolError, "exchange message: length field " + std::to_string(plen) +
                                            ", but " + std::to_string(len - kExchangeHeaderSize) +
                                            " payload bytes");
  uint16_t type, code, flags;
  std::memcpy(&type, d + 6, 2);
  std::memcpy(&code, d + 12, 2);
  std::memcpy(&flags, d + 14, 2);
  if (type < 1 || type > 5)
    return Status(Code::kProtocolError, "exchange message: unknown type " + std::to_string(type));
  ExchangeMsg m;
  m.type = static_cast<MsgType>(type);
  m.code = static_cast<Code>(code);
  size_t off = kExchangeHeaderSize;
  if (HasRecord(m.type)) {
    s = DecodeConnParams(d + off, len - off, &m.params);
    if (!s.ok()) return s;
    off += kConnParamsSize;
    if (flags & kHasHello) {
      s = wire::DecodeServerHello(d + off, len - off, &m.hello);
      if (!s.ok()) return s;
      m.has_hello = true;
      off += sizeof(wire::ServerHello);
    }
  }
  m.text.assign(reinterpret_cast<const char*>(d + off), len - off);
  *out = std::move(m);
  return Status::Ok();
}

Status ConnectExchange(const ExchangeOptions& o, const std::string& host, uint16_t port,
                       std::unique_ptr<ExchangeChannel>* out) {
  switch (o.method) {
    case Exchange::kTcp:
      return TcpChannel::Connect(host, port, o.timeout_ms, out);
    case Exchange::kFile:
    case Exchange::kEtcd: {
      std::unique_ptr<Mailbox> mb;
      Status s = OpenMailbox(o, &mb);
      return s.ok() ? MailboxChannel::ConnectClient(std::move(mb), out) : s;
    }
    case Exchange::kRdmaCm:
      break;
  }
  return Status(Code::kInvalidArgument, "rdma_cm needs no parameter exchange channel");
}

Status ListenExchange(const ExchangeOptions& o, const std::string& host, uint16_t port,
                      std::unique_ptr<ExchangeListener>* out) {
  switch (o.method) {
    case Exchange::kTcp:
      return TcpListener::Listen(host, port, out);
    case Exchange::kFile:
    case Exchange::kEtcd: {
      std::unique_ptr<Mailbox> mb;
      Status s = OpenMailbox(o, &mb);
      return s.ok() ? MailboxListener::Create(std::move(mb), out) : s;
    }
    case Exchange::kRdmaCm:
      break;
  }
  return Status(Code::kInvalidArgument, "rdma_cm needs no parameter exchange listener");
}

}  // namespace rkv
