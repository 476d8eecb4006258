// SPDX-License-Identifier: Apache-2.0
// The metrics endpoint over real sockets on 127.0.0.1 (an ephemeral port): GET /metrics, 404
// elsewhere, methods other than GET refused, idle connections (slowloris) do not block a scrape,
// bad addresses are refused, Stop() ends with connections still open. No timing is asserted;
// every socket read has a generous deadline so a failure cannot hang the test.
#include "server/metrics/metrics_http_server.h"

#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <stdexcept>
#include <string>
#include <vector>

#include "server/metrics/prometheus_text.h"

namespace rkv::metrics {
namespace {

int Connect(uint16_t port) {
  int fd = socket(AF_INET, SOCK_STREAM, 0);
  if (fd < 0) return -1;
  timeval tv{30, 0};  // a deadline for every read and write of the test
  setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
  setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof tv);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_port = htons(port);
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0) {
    close(fd);
    return -1;
  }
  return fd;
}

// Sends `request` on a new connection and returns everything until the server closes it;
// *closed (if given): whether it ended with the server's close (EOF, or a reset when the
// server closed with the request unread), not with the test's read deadline or another error.
std::string Exchange(uint16_t port, const std::string& request, bool* closed = nullptr) {
  if (closed) *closed = false;
  int fd = Connect(port);
  if (fd < 0) return "connect failed";
  size_t off = 0;
  while (off < request.size()) {
    ssize_t n = send(fd, request.data() + off, request.size() - off, MSG_NOSIGNAL);
    if (n <= 0) break;
    off += size_t(n);
  }
  std::string out;
  char buf[4096];
  for (;;) {
    ssize_t n = recv(fd, buf, sizeof buf, 0);
    // A close with the request unread arrives as a reset.
    if (closed && (n == 0 || (n < 0 && errno == ECONNRESET))) *closed = true;
    if (n <= 0) break;
    out.append(buf, size_t(n));
  }
  close(fd);
  return out;
}

std::string Get(uint16_t port, const std::string& path) {
  return Exchange(port, "GET " + path + " HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n");
}

const char* kPage = "# HELP t_total t\n# TYPE t_total counter\nt_total 1\n";

MetricsHttpServer::Limits TestLimits() {
  MetricsHttpServer::Limits l;
  l.io_timeout_ms = 1000;
  l.keepalive_timeout_s = 1;
  return l;
}

TEST(MetricsHttpServer, ServesMetricsOnly) {
  MetricsHttpServer s([] { return std::string(kPage); }, TestLimits());
  ASSERT_TRUE(s.Start("127.0.0.1", 0).ok());
  ASSERT_NE(s.port(), 0);
  std::string r = Get(s.port(), "/metrics");
  EXPECT_EQ(r.rfind("HTTP/1.1 200", 0), 0u) << r;
  EXPECT_NE(r.find("Content-Type: text/plain; version=0.0.4"), std::string::npos) << r;
  EXPECT_NE(r.find(std::string("\r\n\r\n") + kPage), std::string::npos) << r;

  r = Get(s.port(), "/");
  EXPECT_EQ(r.rfind("HTTP/1.1 404", 0), 0u) << r;
  r = Get(s.port(), "/metrics/x");
  EXPECT_EQ(r.rfind("HTTP/1.1 404", 0), 0u) << r;

  r = Exchange(
      s.port(),
      "POST /metrics HTTP/1.1\r\nHost: x\r\nConnection: close\r\nContent-Length: 0\r\n\r\n");
  EXPECT_EQ(r.rfind("HTTP/1.1 405", 0), 0u) << r;
  r = Exchange(s.port(),
               "POST /metrics HTTP/1.1\r\nHost: x\r\nConnection: close\r\nContent-Length: 5\r\n\r\n"
               "a=b&c");
  EXPECT_TRUE(r.rfind("HTTP/1.1 413", 0) == 0 || r.rfind("HTTP/1.1 405", 0) == 0) << r;
  EXPECT_EQ(r.find("t_total"), std::string::npos);
  r = Exchange(s.port(), "DELETE /metrics HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n");
  EXPECT_EQ(r.rfind("HTTP/1.1 405", 0), 0u) << r;
  // Still serving.
  r = Get(s.port(), "/metrics");
  EXPECT_EQ(r.rfind("HTTP/1.1 200", 0), 0u) << r;
  s.Stop();
}

TEST(MetricsHttpServer, PageExceptionIsA500) {
  std::atomic<int> n{0};
  MetricsHttpServer s(
      [&n]() -> std::string {
        if (n++ == 0) throw std::runtime_error("boom");
        return kPage;
      },
      TestLimits());
  ASSERT_TRUE(s.Start("127.0.0.1", 0).ok());
  std::string r = Get(s.port(), "/metrics");
  EXPECT_EQ(r.rfind("HTTP/1.1 500", 0), 0u) << r;
  r = Get(s.port(), "/metrics");
  EXPECT_EQ(r.rfind("HTTP/1.1 200", 0), 0u) << r;
}

// Whether the server has closed connection `fd` (EOF or reset waiting), without blocking.
bool ClosedByServer(int fd) {
  char c;
  const ssize_t n = recv(fd, &c, 1, MSG_DONTWAIT | MSG_PEEK);
  return n == 0 || (n < 0 && errno != EAGAIN && errno != EWOULDBLOCK);
}

// Idle clients (slowloris) can take every thread and queue slot, but never the accept thread:
// a scrape meanwhile is closed unserved at once, and one is served as soon as they leave. No
// time is asserted: every deadline of the server is 60 s, and the order of events is checked.
// The scrape's close must come while the idle clients are still held (before any of their
// deadlines: a server whose accept thread served a connection itself would answer the scrape
// only when that one's deadline ends, 60 s on, and the test's read deadline, 30 s, comes first),
// and the scrape after they leave must be served before the deadline that would have cut them.
TEST(MetricsHttpServer, IdleClientsDoNotBlockAScrape) {
  MetricsHttpServer::Limits l = TestLimits();
  l.io_timeout_ms = 60000;
  l.keepalive_timeout_s = 60;
  l.connection_deadline_ms = 60000;
  MetricsHttpServer s([] { return std::string(kPage); }, l);
  ASSERT_TRUE(s.Start("127.0.0.1", 0).ok());
  const auto start = std::chrono::steady_clock::now();
  // More idle connections than threads and queue slots: they send nothing.
  std::vector<int> idle;
  for (int i = 0; i < 12; ++i) {
    int fd = Connect(s.port());
    ASSERT_GE(fd, 0);
    idle.push_back(fd);
  }
  // One that starts a request and never finishes it.
  int partial = Connect(s.port());
  ASSERT_GE(partial, 0);
  ASSERT_GT(send(partial, "GET /metr", 9, MSG_NOSIGNAL), 0);
  idle.push_back(partial);
  // Accepted after all of them (the listen queue is first in, first out): every thread and
  // queue slot is taken, so it is closed unserved, and the accept thread goes on.
  bool closed = false;
  std::string r = Exchange(s.port(), "GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n", &closed);
  EXPECT_TRUE(closed) << "the scrape was not closed by the server (the accept thread held?)";
  EXPECT_EQ(r, "") << "served while every thread and queue slot was taken";
  size_t held = 0;
  for (int fd : idle) held += !ClosedByServer(fd);
  // Held: those on the threads and in the queue (the threads may not have taken theirs from
  // the queue yet when it filled, so between max_queued and threads + max_queued).
  EXPECT_GE(held, l.max_queued);
  EXPECT_LE(held, l.threads + l.max_queued);
  // They leave: a scrape is served (a few may still be refused while the threads read the
  // closes), before any server deadline could have freed a thread.
  for (int fd : idle) close(fd);
  r.clear();
  int refused = 0;
  while (r.rfind("HTTP/1.1 200", 0) != 0 &&
         std::chrono::steady_clock::now() - start < std::chrono::milliseconds(l.io_timeout_ms)) {
    r = Get(s.port(), "/metrics");
    if (r.rfind("HTTP/1.1 200", 0) != 0) {
      ++refused;
      usleep(10 * 1000);
    }
  }
  EXPECT_EQ(r.rfind("HTTP/1.1 200", 0), 0u) << r;
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::milliseconds(l.io_timeout_ms))
      << "served only once the idle clients' deadline had passed";
  std::printf("idle clients held %zu of %zu; %d scrapes refused after they left\n", held,
              idle.size(), refused);
  // Stop with connections still open ends (the sockets are shut down).
  int late = Connect(s.port());
  s.Stop();
  if (late >= 0) close(late);
}

// Each idle client is cut at its own deadline (io_timeout_ms, 1 s here): the server closes every
// one of them (before the test's read deadline, 30 s from the start, which would otherwise end
// the wait), not before that deadline, and a scrape is served afterwards.
TEST(MetricsHttpServer, IdleClientsAreCutAtTheirDeadline) {
  const MetricsHttpServer::Limits l = TestLimits();
  MetricsHttpServer s([] { return std::string(kPage); }, l);
  ASSERT_TRUE(s.Start("127.0.0.1", 0).ok());
  const auto start = std::chrono::steady_clock::now();
  std::vector<int> idle;
  for (size_t i = 0; i < l.threads + l.max_queued; ++i) {
    int fd = Connect(s.port());
    ASSERT_GE(fd, 0);
    idle.push_back(fd);
  }
  // One read deadline for all of them: 30 s from the start.
  const auto read_deadline = start + std::chrono::seconds(30);
  int cut = 0;
  for (int fd : idle) {
    const auto left = std::chrono::duration_cast<std::chrono::microseconds>(
        read_deadline - std::chrono::steady_clock::now());
    timeval tv{0, 1};  // (a zero timeval would mean no deadline)
    if (left.count() > 1)
      tv = {time_t(left.count() / 1000000), suseconds_t(left.count() % 1000000)};
    setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
    char c;
    const ssize_t n = recv(fd, &c, 1, 0);  // until the server closes it, or the deadline
    cut += n == 0 || (n < 0 && errno == ECONNRESET);
    close(fd);
  }
  EXPECT_EQ(cut, int(idle.size())) << "idle clients the server never cut";
  EXPECT_GE(std::chrono::steady_clock::now() - start, std::chrono::milliseconds(l.io_timeout_ms))
      << "cut before their deadline";
  const std::string r = Get(s.port(), "/metrics");
  EXPECT_EQ(r.rfind("HTTP/1.1 200", 0), 0u) << r;
  s.Stop();
}

TEST(MetricsHttpServer, StopEndsATricklingClient) {
  MetricsHttpServer::Limits l = TestLimits();
  l.io_timeout_ms = 20000;  // the trickle would hold the thread long without Stop's shutdown
  MetricsHttpServer s([] { return std::string(kPage); }, l);
  ASSERT_TRUE(s.Start("127.0.0.1", 0).ok());
  int fd = Connect(s.port());
  ASSERT_GE(fd, 0);
  ASSERT_GT(send(fd, "GET /metrics HTTP/1.1\r\nX-A: ", 28, MSG_NOSIGNAL), 0);
  usleep(100 * 1000);
  s.Stop();  // returns: the assertion is that it does
  char c;
  EXPECT_LE(recv(fd, &c, 1, 0), 0);  // closed by the server
  close(fd);
}

// Sends `chunk` again and again (up to `limit` bytes) until the server closes the connection;
// the bytes it got through.
size_t SendUntilClosed(uint16_t port, const std::string& head, const std::string& chunk,
                       size_t limit, int pause_us) {
  int fd = Connect(port);
  if (fd < 0) return 0;
  size_t sent = 0;
  if (send(fd, head.data(), head.size(), MSG_NOSIGNAL) > 0) sent = head.size();
  while (sent < limit) {
    ssize_t n = send(fd, chunk.data(), chunk.size(), MSG_NOSIGNAL);
    if (n <= 0) break;
    sent += size_t(n);
    if (pause_us > 0) usleep(pause_us);
  }
  close(fd);
  return sent;
}

// cpp-httplib 0.11.4 alone appends an unterminated request line (or endless headers) to a
// string without bound: the guarded stream cuts the request at head_max bytes.
TEST(MetricsHttpServer, EndlessRequestLineOrHeadersAreCut) {
  MetricsHttpServer s([] { return std::string(kPage); }, TestLimits());
  ASSERT_TRUE(s.Start("127.0.0.1", 0).ok());
  const size_t limit = 64 << 20;
  EXPECT_LT(SendUntilClosed(s.port(), "GET /", std::string(65536, 'a'), limit, 0), limit);
  EXPECT_LT(SendUntilClosed(s.port(), "GET /metrics HTTP/1.1\r\n",
                            std::string(4096, 'X') + ": a\r\n", limit, 0),
            limit);
  std::string header;
  for (int i = 0; i < 2000; ++i) header += "X: a\r\n";
  EXPECT_LT(SendUntilClosed(s.port(), "GET /metrics HTTP/1.1\r\n", header, limit, 0), limit);
  std::string r = Get(s.port(), "/metrics");
  EXPECT_EQ(r.rfind("HTTP/1.1 200", 0), 0u) << r;
}

// A Range header reaches cpp-httplib's recursive regex before any handler: such a request is
// dropped unparsed (no 206, no crash), whatever the case of the header's name.
TEST(MetricsHttpServer, RangeRequestsAreDropped) {
  MetricsHttpServer s([] { return std::string(kPage); }, TestLimits());
  ASSERT_TRUE(s.Start("127.0.0.1", 0).ok());
  std::string ranges = "bytes=0-";
  for (int i = 0; i < 1300; ++i) ranges += ",0-";
  for (const char* name : {"Range", "range", "RANGE"}) {
    std::string r = Exchange(s.port(), "GET /metrics HTTP/1.1\r\nHost: x\r\n" + std::string(name) +
                                           ": " + ranges + "\r\nConnection: close\r\n\r\n");
    EXPECT_EQ(r.find("t_total"), std::string::npos) << name;
    EXPECT_EQ(r.find("206"), std::string::npos) << name;
  }
  std::string r = Get(s.port(), "/metrics");
  EXPECT_EQ(r.rfind("HTTP/1.1 200", 0), 0u) << r;
}

// cpp-httplib restarts its read timeout on every byte; the guarded stream gives a connection
// an absolute deadline, so a client trickling a byte at a time is cut off.
TEST(MetricsHttpServer, TricklingClientIsCutAtTheConnectionDeadline) {
  MetricsHttpServer::Limits l = TestLimits();
  l.io_timeout_ms = 60000;
  l.connection_deadline_ms = 1000;
  MetricsHttpServer s([] { return std::string(kPage); }, l);
  ASSERT_TRUE(s.Start("127.0.0.1", 0).ok());
  // 1 byte every 20 ms for up to 3000 bytes (a minute): the server closes long before.
  const size_t sent = SendUntilClosed(s.port(), "GET /metrics HTTP/1.1\r\nX-A: ", "a", 3000, 20000);
  EXPECT_LT(sent, 3000u);
}

TEST(MetricsHttpServer, BadAddressesAreRefused) {
  MetricsHttpServer a([] { return std::string(kPage); });
  Status st = a.Start("256.1.1.1", 0);
  EXPECT_FALSE(st.ok());
  EXPECT_NE(st.message().find("256.1.1.1"), std::string::npos) << st.ToString();
  MetricsHttpServer b([] { return std::string(kPage); });
  st = b.Start("192.0.2.77", 9);  // TEST-NET-1: not an address of this host
  EXPECT_FALSE(st.ok());
  EXPECT_NE(st.message().find("192.0.2.77:9"), std::string::npos) << st.ToString();
  // A port in use is refused (no SO_REUSEPORT sharing between two servers).
  MetricsHttpServer c([] { return std::string(kPage); });
  ASSERT_TRUE(c.Start("127.0.0.1", 0).ok());
  MetricsHttpServer d([] { return std::string(kPage); });
  st = d.Start("127.0.0.1", c.port());
  EXPECT_FALSE(st.ok()) << "bound a port another server listens on";
  EXPECT_NE(st.message().find(std::to_string(c.port())), std::string::npos) << st.ToString();
  // IPv6 loopback, bracketed as in --metrics_listen=[::1]:PORT (skipped without IPv6).
  MetricsHttpServer e([] { return std::string(kPage); });
  st = e.Start("[::1]", 0);
  if (!st.ok()) GTEST_LOG_(INFO) << "no IPv6 loopback: " << st.ToString();
}

}  // namespace
}  // namespace rkv::metrics
