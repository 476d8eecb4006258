// SPDX-License-Identifier: Apache-2.0
// MetricsHttpServer: kvserver's --metrics_listen endpoint. Serves `GET /metrics` (and HEAD) with
// the page its callback returns, as text/plain; version=0.0.4, over cpp-httplib (Debian's
// libcpp-httplib); any other path is 404, any other method 405.
// Hostile clients (anyone who reaches the port can connect) are bounded: `threads` threads
// serve connections, at most `max_queued` accepted connections wait (then the accept thread
// serves one itself and accepts nothing meanwhile: BoundedTaskQueue), each read and write has
// `io_timeout_ms`, an idle keep-alive connection is closed after `keepalive_timeout_s` and
// after `keepalive_max` requests, request bodies are never read, a request's line and headers
// together get at most `head_max` bytes, a request with a Range header is dropped unparsed, and
// a connection lives at most `connection_deadline_ms` (GuardedHttpServer: cpp-httplib 0.11.4
// alone grows a request line without bound). The listening socket is SO_REUSEADDR only (not
// cpp-httplib's default SO_REUSEPORT, which would let a second server share the port).
// The server never touches the RDMA path: its threads only run the page callback.
// Stop(): closes the page gate (a request still in flight then gets 503 and never calls the
// page callback again), stops accepting, shuts down the sockets of the connections being served
// and joins every thread, within `stop_deadline_ms` (past it, logged, the threads are left to
// end on their own and the httplib::Server is leaked on purpose so they never see it
// destroyed; they cannot reach the callback).
// No exception escapes its threads (caught at each thread's boundary and logged).
// Thread safety: Start() and Stop() from one thread (the owner's); the page callback runs on
// the server's threads, up to `threads` at once.
// Ownership: owns the httplib::Server and its threads.
#ifndef RKV_SERVER_METRICS_METRICS_HTTP_SERVER_H_
#define RKV_SERVER_METRICS_METRICS_HTTP_SERVER_H_

#include <sys/socket.h>

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <thread>

#include "rkv/status.h"

namespace rkv::metrics {

class GuardedHttpServer;

class MetricsHttpServer {
 public:
  struct Limits {
    size_t threads = 2;
    size_t max_queued = 8;
    int io_timeout_ms = 3000;
    int keepalive_timeout_s = 3;
    size_t keepalive_max = 16;
    int stop_deadline_ms = 5000;
    size_t head_max = 4096;              // bytes of one request's line and headers
    int connection_deadline_ms = 10000;  // a connection's whole life
  };
  explicit MetricsHttpServer(std::function<std::string()> page);
  MetricsHttpServer(std::function<std::string()> page, Limits limits);
  ~MetricsHttpServer();
  MetricsHttpServer(const MetricsHttpServer&) = delete;
  MetricsHttpServer& operator=(const MetricsHttpServer&) = delete;

  // Binds host:port (host may be a name, an IPv4 address or an IPv6 one, bracketed or not;
  // port 0: any free port) and starts serving. kInvalidArgument naming host:port when it does
  // not bind.
  [[nodiscard]] Status Start(const std::string& host, uint16_t port);
  uint16_t port() const { return port_; }
  void Stop();

 private:
  // The page callback behind a switch Stop turns off; shared with the request handler.
  struct PageGate {
    std::mutex mu;
    bool open = true;  // guarded by mu
    std::function<std::string()> page;
  };

  const std::shared_ptr<PageGate> gate_;
  const Limits limits_;
  std::unique_ptr<GuardedHttpServer> http_;
  std::thread thread_;
  std::atomic<bool> done_{false};
  uint16_t port_ = 0;
};

}  // namespace rkv::metrics

#endif  // RKV_SERVER_METRICS_METRICS_HTTP_SERVER_H_
