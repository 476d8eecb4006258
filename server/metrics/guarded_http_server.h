// SPDX-License-Identifier: Apache-2.0
// GuardedHttpServer: the httplib::Server under kvserver's metrics endpoint, with the bounds
// cpp-httplib 0.11.4 (Debian 12) lacks. It replaces httplib's per-connection loop
// (process_and_close_socket) with its own over GuardedStream, a Stream that
//  - gives at most `head_max` bytes to one request (GET/HEAD only: bodies are never read), so
//    an endless request line or endless headers end the connection instead of growing a string
//    without bound (httplib checks line lengths only after a whole line has arrived);
//  - ends a request whose header block has a Range line, before httplib parses it (its range
//    parser is a recursive std::regex whose depth follows the header's length);
//  - waits for each read and write until an absolute deadline: `io_timeout_ms` per request and
//    `connection_deadline_ms` per connection, so a client trickling one byte at a time cannot
//    hold a thread longer than that (httplib restarts its read timeout on every byte).
// It tracks every connection it serves, so Stop can shut exactly those down (ShutdownClients),
// and a connection run while the task queue is full (RunRejecting) is closed unserved.
// Thread safety: process_and_close_socket runs on the task queue's threads; ShutdownClients
// from any thread (under the tracking mutex). Ownership: each connection's socket is owned by
// the call serving it, which closes it on every path.
#ifndef RKV_SERVER_METRICS_GUARDED_HTTP_SERVER_H_
#define RKV_SERVER_METRICS_GUARDED_HTTP_SERVER_H_

#include <httplib.h>

#include <cstddef>
#include <functional>
#include <mutex>
#include <set>

namespace rkv::metrics {

class GuardedHttpServer : public httplib::Server {
 public:
  struct Bounds {
    size_t head_max = 4096;
    int io_timeout_ms = 3000;
    int connection_deadline_ms = 10000;
    int keepalive_timeout_ms = 3000;
    size_t keepalive_max = 16;
  };
  explicit GuardedHttpServer(Bounds b) : bounds_(b) {}

  // Shuts down (SHUT_RDWR) the socket of every connection being served: their reads and
  // writes fail at once and each closes its socket.
  void ShutdownClients();
  // Runs fn (an httplib task: it serves one accepted socket) so that the connection is closed
  // without being served: for a task the full queue cannot take.
  static void RunRejecting(const std::function<void()>& fn);

 private:
  bool process_and_close_socket(socket_t sock) override;
  bool Serve(socket_t sock);

  const Bounds bounds_;
  std::mutex mu_;
  std::set<socket_t> clients_;  // guarded by mu_
};

}  // namespace rkv::metrics

#endif  // RKV_SERVER_METRICS_GUARDED_HTTP_SERVER_H_
