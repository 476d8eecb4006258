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

// Sends `request` on a new connection and returns everything until the server closes it.
std::string Exchange(uint16_t port, const std::string& request) {
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

TEST(MetricsHttpServer, IdleClientsDoNotBlockAScrape) {
  MetricsHttpServer s([] { return std::string(kPage); }, TestLimits());
  ASSERT_TRUE(s.Start("127.0.0.1", 0).ok());
  // More idle connections than threads and queue slots: they send nothing (slowloris).
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
  std::string r = Get(s.port(), "/metrics");  // completes once the idle ones time out
  EXPECT_EQ(r.rfind("HTTP/1.1 200", 0), 0u) << r;
  // Stop with connections still open ends (the sockets are shut down).
  int late = Connect(s.port());
  s.Stop();
  for (int fd : idle) close(fd);
  close(partial);
  if (late >= 0) close(late);
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
