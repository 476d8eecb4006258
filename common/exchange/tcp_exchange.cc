// SPDX-License-Identifier: Apache-2.0
#include "common/exchange/tcp_exchange.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstring>

#include "common/verbs/rdma.h"

namespace rkv {
namespace {
using Clock = std::chrono::steady_clock;
constexpr int kSendTimeoutMs = 5000;

std::string Where(const sockaddr_in& a) {
  char ip[INET_ADDRSTRLEN] = "?";
  inet_ntop(AF_INET, &a.sin_addr, ip, sizeof ip);
  return std::string(ip) + ":" + std::to_string(ntohs(a.sin_port));
}

Status Resolve(const std::string& host, uint16_t port, sockaddr_in* out) {
  addrinfo hints{}, *res = nullptr;
  hints.ai_family = AF_INET;
  hints.ai_socktype = SOCK_STREAM;
  int gai = getaddrinfo(host.c_str(), std::to_string(port).c_str(), &hints, &res);
  if (gai != 0)
    return Status(Code::kInvalidArgument, "cannot resolve '" + host + "': " + gai_strerror(gai));
  std::memcpy(out, res->ai_addr, sizeof(*out));
  freeaddrinfo(res);
  return Status::Ok();
}
}  // namespace

Status TcpChannel::Connect(const std::string& host, uint16_t port, int timeout_ms,
                           std::unique_ptr<ExchangeChannel>* out) {
  sockaddr_in addr{};
  Status s = Resolve(host, port, &addr);
  if (!s.ok()) return s;
  int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
  if (fd < 0) return ErrnoStatus("socket", errno);
  auto channel = std::make_unique<TcpChannel>(fd, Where(addr), addr);
  if (connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0) {
    if (errno != EINPROGRESS)
      return ErrnoStatus("connect(tcp exchange " + Where(addr) + ")", errno);
    pollfd p{fd, POLLOUT, 0};
    int r;
    do r = poll(&p, 1, std::max(timeout_ms, 0));  // (a signal restarts the wait: rare)
    while (r < 0 && errno == EINTR);
    if (r == 0)
      return Status(Code::kTimeout, "tcp exchange: no answer from " + Where(addr) + " within " +
                                        std::to_string(timeout_ms) + " ms");
    int err = 0;
    socklen_t len = sizeof err;
    getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &len);
    if (r < 0 || err != 0)
      return ErrnoStatus(
          "connect(tcp exchange " + Where(addr) + ") (is kvserver running with --exchange=tcp?)",
          r < 0 ? errno : err);
  }
  int one = 1;
  setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
  *out = std::move(channel);
  return Status::Ok();
}

TcpChannel::~TcpChannel() {
  if (fd_ >= 0) close(fd_);
}

bool TcpChannel::PeerAddress(sockaddr_storage* out) const {
  if (peer_addr_.sin_family != AF_INET) return false;
  *out = sockaddr_storage{};
  std::memcpy(out, &peer_addr_, sizeof peer_addr_);
  return true;
}

uint32_t TcpChannel::LocalIpv4() const {
  sockaddr_in a{};
  socklen_t len = sizeof a;
  if (getsockname(fd_, reinterpret_cast<sockaddr*>(&a), &len) != 0) return 0;
  return a.sin_addr.s_addr;
}

Status TcpChannel::Send(const ExchangeMsg& m) {
  std::string bytes = EncodeExchangeMsg(m);
  size_t off = 0;
  // A peer that stops reading must not hold the sender: the whole message goes within this.
  const auto deadline = Clock::now() + std::chrono::milliseconds(kSendTimeoutMs);
  while (off < bytes.size()) {
    ssize_t n = send(fd_, bytes.data() + off, bytes.size() - off, MSG_NOSIGNAL);
    if (n < 0 && (errno == EAGAIN || errno == EINTR)) {
      int left = int(
          std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now()).count());
      if (left <= 0)
        return Status(Code::kTimeout, "send(tcp exchange to " + peer_ + "): peer not reading for " +
                                          std::to_string(kSendTimeoutMs) + " ms");
      pollfd p{fd_, POLLOUT, 0};
      poll(&p, 1, left);
      continue;
    }
    if (n <= 0) return ErrnoStatus("send(tcp exchange to " + peer_ + ")", n < 0 ? errno : EPIPE);
    off += size_t(n);
  }
  return Status::Ok();
}

Status TcpChannel::ReadFull(uint8_t* buf, size_t len, Clock::time_point deadline, int timeout_ms) {
  size_t off = 0;
  while (off < len) {
    int left =
        int(std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now()).count());
    if (left <= 0)
      return Status(Code::kTimeout, "tcp exchange: no complete message from " + peer_ + " within " +
                                        std::to_string(timeout_ms) + " ms");
    pollfd p{fd_, POLLIN, 0};
    int r = poll(&p, 1, left);
    if (r < 0 && errno != EINTR) return ErrnoStatus("poll(tcp exchange from " + peer_ + ")", errno);
    if (r <= 0) continue;
    ssize_t n = recv(fd_, buf + off, len - off, 0);
    if (n == 0)
      return Status(Code::kConnectionLost, "tcp exchange: " + peer_ + " closed the connection");
    if (n < 0) {
      if (errno == EAGAIN || errno == EINTR) continue;
      return ErrnoStatus("recv(tcp exchange from " + peer_ + ")", errno);
    }
    off += size_t(n);
  }
  return Status::Ok();
}

Status TcpChannel::Receive(ExchangeMsg* m, int timeout_ms) {
  // One deadline for the whole message: a peer that dribbles bytes cannot stretch it.
  const auto deadline = Clock::now() + std::chrono::milliseconds(std::max(timeout_ms, 0));
  uint8_t buf[kMaxExchangeMessage];
  static_assert(sizeof buf >= kExchangeHeaderSize);
  Status s = ReadFull(buf, kExchangeHeaderSize, deadline, timeout_ms);
  if (!s.ok()) return s;
  uint32_t len = 0;
  s = ExchangePayloadLength(buf, &len);  // magic, version, and len <= the cap
  if (!s.ok()) return Status(s.code(), s.message() + " (from " + peer_ + ")");
  if (len > sizeof buf - kExchangeHeaderSize)  // ExchangePayloadLength's cap, checked here too
    return Status(Code::kProtocolError, "tcp exchange: " + peer_ + " announced " +
                                            std::to_string(len) + " bytes, over the limit");
  s = ReadFull(buf + kExchangeHeaderSize, len, deadline, timeout_ms);
  if (!s.ok()) return s;
  return DecodeExchangeMsg(buf, kExchangeHeaderSize + len, m);
}

bool TcpChannel::PeerGone() {
  pollfd p{fd_, POLLIN | POLLRDHUP, 0};
  if (poll(&p, 1, 0) <= 0) return false;
  if (p.revents & (POLLHUP | POLLERR | POLLRDHUP)) return true;
  char c;
  ssize_t n = recv(fd_, &c, 1, MSG_PEEK | MSG_DONTWAIT);
  return n == 0 || (n < 0 && errno != EAGAIN && errno != EINTR);
}

Status TcpListener::Listen(const std::string& host, uint16_t port,
                           std::unique_ptr<ExchangeListener>* out) {
  sockaddr_in addr{};
  Status s = Resolve(host, port, &addr);
  if (!s.ok()) return s;
  int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
  if (fd < 0) return ErrnoStatus("socket", errno);
  std::unique_ptr<TcpListener> l(new TcpListener(fd, Where(addr)));
  int one = 1;
  setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
  if (bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0)
    return ErrnoStatus("bind(tcp exchange " + Where(addr) + ")", errno);
  if (listen(fd, 128) != 0) return ErrnoStatus("listen(tcp exchange)", errno);
  *out = std::move(l);
  return Status::Ok();
}

TcpListener::~TcpListener() {
  if (fd_ >= 0) close(fd_);
}

Status TcpListener::Accept(std::unique_ptr<ExchangeChannel>* out, int timeout_ms) {
  out->reset();
  pollfd p{fd_, POLLIN, 0};
  int r = poll(&p, 1, std::max(timeout_ms, 0));
  if (r < 0 && errno != EINTR) return ErrnoStatus("poll(tcp exchange listener)", errno);
  if (r <= 0) return Status::Ok();
  sockaddr_in peer{};
  socklen_t len = sizeof peer;
  int fd = accept4(fd_, reinterpret_cast<sockaddr*>(&peer), &len, SOCK_CLOEXEC | SOCK_NONBLOCK);
  if (fd < 0) {
    if (errno == EAGAIN || errno == EINTR || errno == ECONNABORTED) return Status::Ok();
    return ErrnoStatus("accept(tcp exchange)", errno);
  }
  int one = 1;
  setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
  if (len < socklen_t(sizeof peer) || peer.sin_family != AF_INET) {  // cannot be: AF_INET socket
    close(fd);
    return Status::Ok();
  }
  *out = std::make_unique<TcpChannel>(fd, Where(peer), peer);
  return Status::Ok();
}

}  // namespace rkv
