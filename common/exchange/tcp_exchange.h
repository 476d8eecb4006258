// SPDX-License-Identifier: Apache-2.0
// The `tcp` exchange method: parameters travel over a TCP connection between client and
// server, as perftest does. Messages are ExchangeMsg frames (16-byte header with magic,
// version and length, then the payload); a frame with a bad header or a length over
// kMaxExchangeMessage ends the exchange with a clear error before anything more is read.
// Deadlines: Receive reads a whole message within its timeout (one deadline for header and
// payload, so a peer dribbling bytes cannot stretch it), Send gives up after 5 s of a peer
// not reading, Accept and Connect wait at most their timeout.
// After the handshake the socket stays open as the control connection: EOF or a reset means
// the peer is gone.
// Thread safety: one thread at a time per object. Ownership: each object owns its socket.
#ifndef RKV_COMMON_EXCHANGE_TCP_EXCHANGE_H_
#define RKV_COMMON_EXCHANGE_TCP_EXCHANGE_H_

#include <netinet/in.h>

#include <chrono>
#include <memory>
#include <string>

#include "common/exchange/exchange.h"

namespace rkv {

class TcpChannel : public ExchangeChannel {
 public:
  [[nodiscard]] static Status Connect(const std::string& host, uint16_t port, int timeout_ms,
                                      std::unique_ptr<ExchangeChannel>* out);
  // peer_addr: the peer's address as connect or accept4 gave it (PeerAddress returns it).
  TcpChannel(int fd, std::string peer, const sockaddr_in& peer_addr)
      : fd_(fd), peer_(std::move(peer)), peer_addr_(peer_addr) {}
  ~TcpChannel() override;
  Status Send(const ExchangeMsg& m) override;
  Status Receive(ExchangeMsg* m, int timeout_ms) override;
  bool PeerGone() override;
  std::string Describe() const override { return "tcp " + peer_; }
  uint32_t LocalIpv4() const override;
  // The address accept4 (or connect) named, not getpeername's: a peer that has already reset
  // the connection still has its address (getpeername would fail with ENOTCONN).
  bool PeerAddress(sockaddr_storage* out) const override;

 private:
  // Reads exactly len bytes before `deadline` (timeout_ms is for the message).
  Status ReadFull(uint8_t* buf, size_t len, std::chrono::steady_clock::time_point deadline,
                  int timeout_ms);
  int fd_;
  std::string peer_;
  sockaddr_in peer_addr_;
};

class TcpListener : public ExchangeListener {
 public:
  [[nodiscard]] static Status Listen(const std::string& host, uint16_t port,
                                     std::unique_ptr<ExchangeListener>* out);
  ~TcpListener() override;
  Status Accept(std::unique_ptr<ExchangeChannel>* out, int timeout_ms) override;
  std::string Describe() const override { return "tcp " + where_; }

 private:
  TcpListener(int fd, std::string where) : fd_(fd), where_(std::move(where)) {}
  int fd_;
  std::string where_;
};

}  // namespace rkv

#endif  // RKV_COMMON_EXCHANGE_TCP_EXCHANGE_H_
