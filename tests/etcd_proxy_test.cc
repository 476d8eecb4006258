// SPDX-License-Identifier: Apache-2.0
// EtcdMailbox never uses a proxy (review of issue 12, finding 3): libcurl honours http_proxy and
// ALL_PROXY from the environment, which would send the etcd password, token and records to
// whatever proxy the environment names (in clear for an http:// loopback endpoint).
#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdlib>
#include <fstream>
#include <string>
#include <thread>

#include "common/exchange/etcd_mailbox.h"

namespace rkv {
namespace {

// A fake proxy on a loopback port: records what it is sent (waits 1.5 s at most), answers 401.
class FakeProxy {
 public:
  FakeProxy() {
    fd_ = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    if (bind(fd_, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0 || listen(fd_, 4) != 0) return;
    socklen_t len = sizeof a;
    getsockname(fd_, reinterpret_cast<sockaddr*>(&a), &len);
    url_ = "http://127.0.0.1:" + std::to_string(ntohs(a.sin_port));
    thread_ = std::thread([this] { Serve(); });
  }
  ~FakeProxy() {
    if (thread_.joinable()) thread_.join();
    close(fd_);
  }
  const std::string& url() const { return url_; }
  // Waits for the server thread (its own deadline) and returns what it received.
  std::string Captured() {
    if (thread_.joinable()) thread_.join();
    return captured_;
  }

 private:
  void Serve() {
    pollfd p{fd_, POLLIN, 0};
    if (poll(&p, 1, 1500) <= 0) return;  // Open contacts it at once, if at all
    int c = accept(fd_, nullptr, nullptr);
    if (c < 0) return;
    char buf[8192];
    for (int i = 0; i < 20 && captured_.find('}') == std::string::npos; ++i) {
      pollfd q{c, POLLIN, 0};
      if (poll(&q, 1, 250) <= 0) break;
      ssize_t n = recv(c, buf, sizeof buf, 0);
      if (n <= 0) break;
      captured_.append(buf, size_t(n));
    }
    const std::string r =
        "HTTP/1.1 401 Unauthorized\r\nContent-Length: 2\r\nConnection: close\r\n\r\n{}";
    (void)send(c, r.data(), r.size(), MSG_NOSIGNAL);
    close(c);
  }
  int fd_ = -1;
  std::string url_;
  std::string captured_;
  std::thread thread_;
};

// Sets an environment variable for the scope, restoring the old value.
class ScopedEnv {
 public:
  ScopedEnv(const char* name, const char* value) : name_(name) {
    const char* old = getenv(name);
    had_ = old != nullptr;
    if (had_) old_ = old;
    if (value)
      setenv(name, value, 1);
    else
      unsetenv(name);
  }
  ~ScopedEnv() {
    if (had_)
      setenv(name_, old_.c_str(), 1);
    else
      unsetenv(name_);
  }

 private:
  const char* name_;
  bool had_ = false;
  std::string old_;
};

TEST(EtcdProxy, PasswordNeverGoesToAProxyFromTheEnvironment) {
  for (const char* var : {"http_proxy", "ALL_PROXY"}) {
    FakeProxy proxy;
    ASSERT_FALSE(proxy.url().empty());
    char dir[] = "/tmp/rkv-etcd-proxy.XXXXXX";
    ASSERT_NE(mkdtemp(dir), nullptr);
    const std::string pw = std::string(dir) + "/pw";
    std::ofstream(pw) << "TopSecretPassw0rd\n";
    ASSERT_EQ(chmod(pw.c_str(), 0600), 0);
    Status s;
    {
      ScopedEnv proxy_env(var, proxy.url().c_str());
      ScopedEnv no1("no_proxy", nullptr), no2("NO_PROXY", nullptr);
      ExchangeOptions o;
      o.method = Exchange::kEtcd;
      o.etcd_endpoint = "http://127.0.0.1:1";  // loopback: the password may go in clear
      o.etcd_user = "rkv";
      o.etcd_password_file = pw;
      std::unique_ptr<Mailbox> mb;
      s = EtcdMailbox::Open(o, &mb);
    }
    const std::string captured = proxy.Captured();
    unlink(pw.c_str());
    rmdir(dir);
    EXPECT_FALSE(s.ok()) << "nothing listens on 127.0.0.1:1";
    EXPECT_EQ(captured.find("TopSecretPassw0rd"), std::string::npos)
        << var << "=" << proxy.url() << " received:\n"
        << captured;
    EXPECT_TRUE(captured.empty()) << var << ": the proxy was used:\n" << captured;
  }
}

}  // namespace
}  // namespace rkv
