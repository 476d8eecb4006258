// SPDX-License-Identifier: Apache-2.0
#include "server/metrics/guarded_http_server.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <chrono>
#include <cstring>

namespace rkv::metrics {
namespace {

using Clock = std::chrono::steady_clock;

thread_local bool tl_reject = false;

// Waits until `sock` is ready for `events` or `deadline` passes; true if ready.
bool WaitFor(int sock, short events, Clock::time_point deadline) {
  for (;;) {
    const auto left =
        std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now()).count();
    if (left <= 0) return false;
    pollfd p{sock, events, 0};
    const int n = ::poll(&p, 1, int(std::min<long long>(left, 1000)));
    if (n > 0) return (p.revents & (events | POLLHUP | POLLERR)) != 0;
    if (n < 0 && errno != EINTR) return false;
  }
}

void IpAndPort(const sockaddr_storage& a, std::string& ip, int& port) {
  char buf[INET6_ADDRSTRLEN] = {};
  if (a.ss_family == AF_INET) {
    const auto& in = reinterpret_cast<const sockaddr_in&>(a);
    inet_ntop(AF_INET, &in.sin_addr, buf, sizeof buf);
    port = ntohs(in.sin_port);
  } else if (a.ss_family == AF_INET6) {
    const auto& in6 = reinterpret_cast<const sockaddr_in6&>(a);
    inet_ntop(AF_INET6, &in6.sin6_addr, buf, sizeof buf);
    port = ntohs(in6.sin6_port);
  }
  ip = buf;
}

// The Stream a connection is served over: see the header for the bounds it applies.
class GuardedStream : public httplib::Stream {
 public:
  GuardedStream(int sock, const GuardedHttpServer::Bounds& b, Clock::time_point conn_deadline)
      : sock_(sock), b_(b), conn_deadline_(conn_deadline) {}

  void BeginRequest() {
    given_ = 0;
    at_line_start_ = true;
    prefix_len_ = 0;
    deadline_ =
        std::min(conn_deadline_, Clock::now() + std::chrono::milliseconds(b_.io_timeout_ms));
  }

  bool is_readable() const override {
    return buf_off_ < buf_len_ || WaitFor(sock_, POLLIN, deadline_);
  }
  bool is_writable() const override { return WaitFor(sock_, POLLOUT, deadline_); }

  ssize_t read(char* ptr, size_t size) override {
    if (poisoned_ || size == 0) return -1;
    if (buf_off_ == buf_len_) {
      if (given_ >= b_.head_max || !WaitFor(sock_, POLLIN, deadline_)) return -1;
      const size_t want = std::min(sizeof buf_, b_.head_max - given_);
      ssize_t n;
      do {
        n = ::recv(sock_, buf_, want, 0);
      } while (n < 0 && errno == EINTR);
      if (n <= 0) return n;
      buf_off_ = 0;
      buf_len_ = size_t(n);
    }
    const size_t n = std::min(size, buf_len_ - buf_off_);
    for (size_t i = 0; i < n; ++i) Watch(buf_[buf_off_ + i]);
    if (poisoned_) return -1;
    std::memcpy(ptr, buf_ + buf_off_, n);
    buf_off_ += n;
    given_ += n;
    return ssize_t(n);
  }

  ssize_t write(const char* ptr, size_t size) override {
    if (!WaitFor(sock_, POLLOUT, deadline_)) return -1;
    ssize_t n;
    do {
      n = ::send(sock_, ptr, size, MSG_NOSIGNAL);
    } while (n < 0 && errno == EINTR);
    return n;
  }

  void get_remote_ip_and_port(std::string& ip, int& port) const override {
    sockaddr_storage a{};
    socklen_t len = sizeof a;
    if (getpeername(sock_, reinterpret_cast<sockaddr*>(&a), &len) == 0) IpAndPort(a, ip, port);
  }
  void get_local_ip_and_port(std::string& ip, int& port) const override {
    sockaddr_storage a{};
    socklen_t len = sizeof a;
    if (getsockname(sock_, reinterpret_cast<sockaddr*>(&a), &len) == 0) IpAndPort(a, ip, port);
  }
  socket_t socket() const override { return sock_; }

  // Waits for the next request of a kept-alive connection.
  bool WaitForRequest() const {
    const auto d =
        std::min(conn_deadline_, Clock::now() + std::chrono::milliseconds(b_.keepalive_timeout_ms));
    return buf_off_ < buf_len_ || WaitFor(sock_, POLLIN, d);
  }

 private:
  // A header line starting "range:" (any case) poisons the request.
  void Watch(char c) {
    static constexpr char kRange[] = "range:";
    if (c == '\n') {
      at_line_start_ = true;
      prefix_len_ = 0;
      return;
    }
    if (!at_line_start_) return;
    if (char(std::tolower(static_cast<unsigned char>(c))) == kRange[prefix_len_]) {
      if (++prefix_len_ == sizeof kRange - 1) poisoned_ = true;
    } else {
      at_line_start_ = false;
    }
  }

  const int sock_;
  const GuardedHttpServer::Bounds& b_;
  const Clock::time_point conn_deadline_;
  Clock::time_point deadline_;
  char buf_[2048];
  size_t buf_off_ = 0, buf_len_ = 0;
  size_t given_ = 0;  // bytes of this request handed to httplib
  bool at_line_start_ = true;
  size_t prefix_len_ = 0;
  bool poisoned_ = false;
};

}  // namespace

void GuardedHttpServer::RunRejecting(const std::function<void()>& fn) {
  tl_reject = true;
  struct Reset {
    ~Reset() { tl_reject = false; }
  } reset;
  fn();
}

void GuardedHttpServer::ShutdownClients() {
  std::lock_guard<std::mutex> l(mu_);
  for (socket_t s : clients_) ::shutdown(s, SHUT_RDWR);
}

bool GuardedHttpServer::process_and_close_socket(socket_t sock) {
  // The socket is closed on every path, an exception included.
  struct Closer {
    GuardedHttpServer* self;
    socket_t sock;
    bool tracked = false;
    ~Closer() {
      if (tracked) {
        std::lock_guard<std::mutex> l(self->mu_);
        self->clients_.erase(sock);
      }
      ::shutdown(sock, SHUT_RDWR);
      ::close(sock);
    }
  } closer{this, sock};
  if (tl_reject) return false;
  {
    std::lock_guard<std::mutex> l(mu_);
    closer.tracked = clients_.insert(sock).second;
  }
  return Serve(sock);
}

bool GuardedHttpServer::Serve(socket_t sock) {
  GuardedStream strm(sock, bounds_,
                     Clock::now() + std::chrono::milliseconds(bounds_.connection_deadline_ms));
  bool ok = false;
  for (size_t count = bounds_.keepalive_max; count > 0 && svr_sock_ != INVALID_SOCKET; --count) {
    if (!strm.WaitForRequest()) break;
    strm.BeginRequest();
    bool connection_closed = false;
    ok = process_request(strm, count == 1, connection_closed, nullptr);
    if (!ok || connection_closed) break;
  }
  return ok;
}

}  // namespace rkv::metrics
