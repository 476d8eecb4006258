// SPDX-License-Identifier: Apache-2.0
// Parameter exchange for manual connection mode: the messages both sides send (ExchangeMsg,
// one encoding for every method; docs/wire-format.md) and the channel interfaces the TCP,
// file and etcd methods implement.
//
// Handshake (client first): client PARAMS -> server PARAMS (its record + ServerHello) or ERROR
// -> client READY or ERROR. `kvctl check` sends CHECK instead and gets CHECK_REPLY (the
// server's record, ServerHello and the server-side validator's verdict); no QP is connected.
// After the handshake the channel stays open as the control channel: its closing (TCP EOF,
// removed or stale file, removed or expired etcd key) tells the server that the client left.
// Thread safety: a channel is used by one thread at a time; a listener by its owner only.
#ifndef RKV_COMMON_EXCHANGE_EXCHANGE_H_
#define RKV_COMMON_EXCHANGE_EXCHANGE_H_

#include <sys/socket.h>

#include <cstdint>
#include <memory>
#include <string>

#include "common/verbs/conn_params.h"
#include "common/wire.h"
#include "rkv/connection_params.h"
#include "rkv/status.h"

namespace rkv {

enum class MsgType : uint16_t {
  kParams = 1,      // record (+ ServerHello from the server)
  kError = 2,       // code + text: the sender stopped the connection
  kReady = 3,       // the client's QP is in RTS
  kCheck = 4,       // kvctl check: record, validate only
  kCheckReply = 5,  // record + ServerHello + violations (empty: none)
};

struct ExchangeMsg {
  MsgType type = MsgType::kParams;
  ConnParams params;
  bool has_hello = false;
  wire::ServerHello hello{};
  Code code = Code::kOk;  // kError
  std::string text;       // kError: message; kCheckReply: violations
};

inline constexpr uint32_t kExchangeMagic = 0x58564b52;  // "RKVX" little-endian
inline constexpr uint16_t kExchangeVersion = 1;
inline constexpr size_t kExchangeHeaderSize = 16;
inline constexpr size_t kMaxExchangeMessage = 8192;

std::string EncodeExchangeMsg(const ExchangeMsg& m);
// Validates magic, version, type, length and the embedded records.
[[nodiscard]] Status DecodeExchangeMsg(const uint8_t* data, size_t len, ExchangeMsg* out);
// Payload length announced by a header (for stream framing); error if not a valid header.
[[nodiscard]] Status ExchangePayloadLength(const uint8_t* header, uint32_t* len);

class ExchangeChannel {
 public:
  virtual ~ExchangeChannel() = default;
  [[nodiscard]] virtual Status Send(const ExchangeMsg& m) = 0;
  [[nodiscard]] virtual Status Receive(ExchangeMsg* m, int timeout_ms) = 0;
  // True once the peer closed its side (never blocks for long).
  virtual bool PeerGone() = 0;
  // "tcp 10.0.0.1:7470", "file /dir/ID", "etcd /rkv/ID"
  virtual std::string Describe() const = 0;
  // The local IPv4 address (network order) the channel uses, 0 if it has none (file, etcd).
  virtual uint32_t LocalIpv4() const { return 0; }
  // The peer's address (for per-address limits); false if the channel has none (file, etcd).
  virtual bool PeerAddress(sockaddr_storage* out) const {
    (void)out;
    return false;
  }
};

class ExchangeListener {
 public:
  virtual ~ExchangeListener() = default;
  // Waits up to timeout_ms for a new client; *out stays null if none arrived.
  [[nodiscard]] virtual Status Accept(std::unique_ptr<ExchangeChannel>* out, int timeout_ms) = 0;
  // Periodic upkeep (lease keepalive); called by the server's exchange thread.
  virtual void Tick() {}
  virtual std::string Describe() const = 0;
};

// Client side: opens a channel to the server at host:port (tcp) or under the options' dir /
// etcd prefix (file, etcd).
[[nodiscard]] Status ConnectExchange(const ExchangeOptions& o, const std::string& host,
                                     uint16_t port, std::unique_ptr<ExchangeChannel>* out);
// Server side.
[[nodiscard]] Status ListenExchange(const ExchangeOptions& o, const std::string& host,
                                    uint16_t port, std::unique_ptr<ExchangeListener>* out);

}  // namespace rkv

#endif  // RKV_COMMON_EXCHANGE_EXCHANGE_H_
