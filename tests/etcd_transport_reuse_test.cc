// SPDX-License-Identifier: Apache-2.0
// EtcdTransport keeps its connections (common/etcd/etcd_transport.h, "Connections"): requests
// after the first reuse an open connection instead of connecting again, and a connection the
// server closed (a restart, a server without keep-alive) is replaced without an error. The
// server is a stand-in for etcd's gateway built on cpp-httplib, answering /v3/kv/range with an
// empty range; it runs on a loopback port.
#include <gtest/gtest.h>
#include <httplib.h>

#include <atomic>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "common/etcd/etcd_client.h"
#include "common/etcd/etcd_transport.h"

namespace rkv {
namespace {

class FakeEtcd {
 public:
  // keep_alive false: the server closes every connection after its answer.
  explicit FakeEtcd(bool keep_alive, int port = 0) {
    srv_.set_keep_alive_max_count(keep_alive ? 1000 : 1);
    srv_.set_keep_alive_timeout(1);  // stop() waits for kept connections at most this long
    srv_.set_tcp_nodelay(true);      // as etcd (Go) does: no Nagle wait on its answers
    srv_.Post("/v3/kv/range", [this](const httplib::Request&, httplib::Response& res) {
      ++requests_;
      res.set_content(R"({"header":{"revision":"7"}})", "application/json");
    });
    // A watch that is created and then ends (the stream closes at once).
    srv_.Post("/v3/watch", [this](const httplib::Request&, httplib::Response& res) {
      ++requests_;
      res.set_content(R"({"result":{"header":{"revision":"7"},"created":true}})"
                      "\n",
                      "application/json");
    });
    port_ = port == 0 ? srv_.bind_to_any_port("127.0.0.1") : port;
    if (port != 0 && !srv_.bind_to_port("127.0.0.1", port)) port_ = -1;
    if (port_ > 0) thread_ = std::thread([this] { srv_.listen_after_bind(); });
  }
  ~FakeEtcd() {
    srv_.stop();
    if (thread_.joinable()) thread_.join();
  }
  int port() const { return port_; }
  int requests() const { return requests_.load(); }

 private:
  httplib::Server srv_;
  std::thread thread_;
  int port_ = -1;
  std::atomic<int> requests_{0};
};

std::unique_ptr<EtcdClient> ClientOf(int port) {
  EtcdSettings s;
  s.endpoints = {"http://127.0.0.1:" + std::to_string(port)};
  std::unique_ptr<EtcdClient> c;
  EXPECT_TRUE(EtcdClient::Open(s, &c).ok());
  return c;
}

TEST(EtcdTransportReuse, RequestsAfterTheFirstReuseItsConnection) {
  FakeEtcd etcd(true);
  ASSERT_GT(etcd.port(), 0);
  auto c = ClientOf(etcd.port());
  ASSERT_TRUE(c);
  for (int i = 0; i < 20; ++i) {
    bool found = true;
    EtcdKv kv;
    int64_t rev = 0;
    Status s = c->Get("/k", &found, &kv, &rev);
    ASSERT_TRUE(s.ok()) << s.ToString();
    EXPECT_FALSE(found);
    EXPECT_EQ(rev, 7);
  }
  EXPECT_EQ(etcd.requests(), 20);
  EXPECT_EQ(c->transport().connects(), 1u) << "one connection for 20 requests";
  EXPECT_EQ(c->transport().posts(), 20u);
}

TEST(EtcdTransportReuse, AConnectionTheServerClosedIsReplaced) {
  int port = 0;
  std::unique_ptr<EtcdClient> c;
  {
    FakeEtcd etcd(true);
    ASSERT_GT(etcd.port(), 0);
    port = etcd.port();
    c = ClientOf(port);
    bool found = false;
    EtcdKv kv;
    ASSERT_TRUE(c->Get("/k", &found, &kv, nullptr).ok());
  }                            // the server stops: the client's idle connection is closed under it
  FakeEtcd again(true, port);  // a restarted server on the same port
  if (again.port() <= 0) GTEST_SKIP() << "port " << port << " was taken meanwhile";
  for (int i = 0; i < 3; ++i) {
    bool found = false;
    EtcdKv kv;
    Status s = c->Get("/k", &found, &kv, nullptr);
    ASSERT_TRUE(s.ok()) << "request " << i << " after the restart: " << s.ToString();
  }
  EXPECT_EQ(again.requests(), 3);
  EXPECT_EQ(c->transport().connects(), 2u);
}

TEST(EtcdTransportReuse, AServerWithoutKeepAliveGetsAConnectionPerRequest) {
  FakeEtcd etcd(false);
  ASSERT_GT(etcd.port(), 0);
  auto c = ClientOf(etcd.port());
  ASSERT_TRUE(c);
  for (int i = 0; i < 5; ++i) {
    bool found = false;
    EtcdKv kv;
    Status s = c->Get("/k", &found, &kv, nullptr);
    ASSERT_TRUE(s.ok()) << "request " << i << ": " << s.ToString();
  }
  EXPECT_EQ(etcd.requests(), 5);
  EXPECT_EQ(c->transport().connects(), 5u);
}

// A watch has a handle and connection of its own: the kept connection survives it.
TEST(EtcdTransportReuse, AWatchLeavesTheKeptConnectionAlone) {
  FakeEtcd etcd(true);
  ASSERT_GT(etcd.port(), 0);
  auto c = ClientOf(etcd.port());
  ASSERT_TRUE(c);
  bool found = false;
  EtcdKv kv;
  ASSERT_TRUE(c->Get("/k", &found, &kv, nullptr).ok());
  for (int i = 0; i < 2; ++i) {
    Status w = c->Watch(
        "/k", false, 8, 2000, [](const std::vector<EtcdEvent>&, int64_t) { return false; },
        [] { return false; });
    EXPECT_EQ(w.code(), Code::kTimeout) << w.ToString();  // the stream ended without events
  }
  ASSERT_TRUE(c->Get("/k", &found, &kv, nullptr).ok());
  EXPECT_EQ(etcd.requests(), 4);
  EXPECT_EQ(c->transport().connects(), 3u) << "the two watches' own, and one kept for the Gets";
}

// Several threads at once: each request has a handle of its own.
TEST(EtcdTransportReuse, ConcurrentRequestsEachHaveAHandle) {
  FakeEtcd etcd(true);
  ASSERT_GT(etcd.port(), 0);
  auto c = ClientOf(etcd.port());
  ASSERT_TRUE(c);
  std::vector<std::thread> ts;
  std::atomic<int> failed{0};
  for (int t = 0; t < 6; ++t)
    ts.emplace_back([&] {
      for (int i = 0; i < 20; ++i) {
        bool found = false;
        EtcdKv kv;
        if (!c->Get("/k", &found, &kv, nullptr).ok()) ++failed;
      }
    });
  for (auto& t : ts) t.join();
  EXPECT_EQ(failed.load(), 0);
  EXPECT_EQ(etcd.requests(), 120);
  EXPECT_LE(c->transport().connects(), 6u) << "no more connections than threads at once";
}

}  // namespace
}  // namespace rkv
