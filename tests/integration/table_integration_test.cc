// SPDX-License-Identifier: Apache-2.0
// Integration tests of the table over real RDMA (run by run.sh inside tools/rdma-sandbox): the
// value heap's refill targets, crafted hash collisions read with one-sided READs, and MultiGet's
// per-key statuses when the connection fails. Each test starts its own kvserver (RKV_KVSERVER)
// on RKV_SANDBOX_ADDR so that it can fill or kill it.
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "common/table/layout.h"
#include "rkv/client.h"
#include "tests/colliding_keys.h"
#include "tests/integration/stats_text.h"

namespace rkv {
namespace {

std::string Env(const char* name) {
  const char* v = std::getenv(name);
  return v ? v : "";
}

// A kvserver child process with its own port; killed (SIGKILL) by the destructor.
class ChildServer {
 public:
  ChildServer(int port, std::vector<std::string> flags) {
    bin_ = Env("RKV_KVSERVER");
    ip_ = Env("RKV_SANDBOX_ADDR");
    if (bin_.empty() || ip_.empty()) return;
    addr_ = ip_ + ":" + std::to_string(port);
    flags.insert(flags.begin(), "--listen=" + addr_);
    pid_ = fork();
    if (pid_ == 0) {
      std::vector<char*> argv{const_cast<char*>(bin_.c_str())};
      for (std::string& f : flags) argv.push_back(f.data());
      argv.push_back(nullptr);
      execv(bin_.c_str(), argv.data());
      _exit(127);
    }
  }
  ~ChildServer() { Kill(); }
  bool available() const { return !bin_.empty() && !ip_.empty(); }
  const std::string& addr() const { return addr_; }
  Status Connect(std::unique_ptr<Client>* c) {
    Status s;
    for (int i = 0; i < 100; ++i) {
      s = Client::Connect(addr_, Options(), c);
      if (s.ok()) break;
      std::this_thread::sleep_for(std::chrono::milliseconds(200));
    }
    return s;
  }
  void Kill() {
    if (pid_ <= 0) return;
    kill(pid_, SIGKILL);
    waitpid(pid_, nullptr, 0);
    pid_ = -1;
  }

 private:
  std::string bin_, ip_, addr_;
  pid_t pid_ = -1;
};

std::map<std::string, double> StatsOf(Client* c) {
  std::string text;
  Status s = c->Stats(&text);
  EXPECT_TRUE(s.ok()) << s.ToString();
  return testing::ParseStats(text);
}

std::string SizedKey(const std::string& prefix, uint64_t i) {
  char buf[40];
  snprintf(buf, sizeof buf, "%s%010llu", prefix.c_str(), static_cast<unsigned long long>(i));
  return buf;
}

struct Fill {
  uint64_t stored = 0;
  uint64_t live_bytes = 0;  // key + value + block header of the heap entries stored
  bool heap_refused = false;
  std::string refusal;
};
// PUTs values of `size` until the heap refuses; index refusals (a full bucket pair) are skipped,
// 200 of them in a row end the fill as index-limited.
Fill FillUntilRefused(Client* c, const std::string& prefix, size_t size,
                      std::vector<std::string>* keys) {
  Fill f;
  int index_refusals = 0;
  const std::string value(size, 'v');
  for (uint64_t i = 0; index_refusals < 200; ++i) {
    std::string k = SizedKey(prefix, i);
    Status s = c->Put(k, value);
    if (s.ok()) {
      index_refusals = 0;
      keys->push_back(k);
      ++f.stored;
      if (!layout::FitsInline(k.size(), size)) f.live_bytes += layout::BlockBytes(k.size(), size);
      continue;
    }
    EXPECT_EQ(s.code(), Code::kTableFull) << s.ToString();
    if (s.code() != Code::kTableFull) break;
    f.refusal = s.message();
    if (s.message().find("heap") != std::string::npos) {
      f.heap_refused = true;
      break;
    }
    ++index_refusals;
  }
  return f;
}

// The scenario on a real server (--memory=8M): fill with one size, delete all, refill
// with another, both directions. A refusal by the heap comes only past 85% of its bytes live,
// and the refill stores at least 85% of the first fill's live bytes, unless the index (not the
// heap) ran out first.
TEST(TableOverRdma, HeapRefillWithAnotherSizeBothWays) {
  ChildServer srv(7481, {"--memory=8M"});
  if (!srv.available()) GTEST_SKIP() << "RKV_KVSERVER/RKV_SANDBOX_ADDR not set";
  std::unique_ptr<Client> c;
  ASSERT_TRUE(srv.Connect(&c).ok());
  const double cap = StatsOf(c.get())["heap_capacity"];
  ASSERT_GT(cap, 0);
  const std::pair<size_t, size_t> cases[] = {
      {3000, 1000}, {1000, 3000}, {400, 16000}, {16000, 400}, {65536, 100}};
  for (auto [a, b] : cases) {
    std::vector<std::string> keys;
    Fill first = FillUntilRefused(c.get(), "a" + std::to_string(a) + "-", a, &keys);
    for (const std::string& k : keys) ASSERT_TRUE(c->Delete(k).ok()) << k;
    keys.clear();
    auto st = StatsOf(c.get());
    EXPECT_EQ(st["entries"], 0);
    EXPECT_EQ(st["heap_bytes_in_use"], 0);
    Fill second = FillUntilRefused(c.get(), "b" + std::to_string(b) + "-", b, &keys);
    st = StatsOf(c.get());
    printf(
        "--memory=8M: %5zu B x %llu (%s, %.1f%% of the heap live), delete all, %5zu B x %llu "
        "(%s, %.1f%% live): refill holds %.1f%% of the first fill's bytes; %g blocks moved\n",
        a, static_cast<unsigned long long>(first.stored),
        first.heap_refused ? "heap full" : "index full", 100 * first.live_bytes / cap, b,
        static_cast<unsigned long long>(second.stored),
        second.heap_refused ? "heap full" : "index full", 100 * second.live_bytes / cap,
        100.0 * second.live_bytes / std::max<uint64_t>(1, first.live_bytes),
        st["heap_blocks_moved"]);
    if (first.heap_refused) {
      EXPECT_GE(first.live_bytes / cap, 0.85) << first.refusal;
    }
    if (second.heap_refused) {
      EXPECT_GE(second.live_bytes / cap, 0.85) << second.refusal;
    }
    if (first.heap_refused && second.heap_refused) {
      EXPECT_GE(double(second.live_bytes) / first.live_bytes, 0.85) << a << " then " << b;
    }
    EXPECT_TRUE(first.heap_refused || second.heap_refused);  // the heap was the limit somewhere
    // Every value of the refill reads back (one-sided), moved blocks included.
    std::string v;
    for (const std::string& k : keys) {
      ASSERT_TRUE(c->Get(k, &v).ok()) << k;
      ASSERT_EQ(v, std::string(b, 'v')) << k;
    }
    for (const std::string& k : keys) ASSERT_TRUE(c->Delete(k).ok()) << k;
  }
}

// Fragmentation: fill with small values, delete every other one (the heap is half holes of
// small-value size), then fill with large values. The cleaner must move the survivors so the
// large values fit: the heap refuses only past 85% of its bytes live, survivors included.
TEST(TableOverRdma, HeapFragmentedBySmallHolesTakesLargeValues) {
  ChildServer srv(7484, {"--memory=8M"});
  if (!srv.available()) GTEST_SKIP() << "RKV_KVSERVER/RKV_SANDBOX_ADDR not set";
  std::unique_ptr<Client> c;
  ASSERT_TRUE(srv.Connect(&c).ok());
  const double cap = StatsOf(c.get())["heap_capacity"];
  std::vector<std::string> small, large;
  Fill first = FillUntilRefused(c.get(), "s", 400, &small);
  ASSERT_TRUE(first.heap_refused) << first.refusal;
  uint64_t survivors = 0;
  for (size_t i = 0; i < small.size(); ++i) {
    if (i % 2 == 0) {
      ASSERT_TRUE(c->Delete(small[i]).ok());
    } else {
      survivors += layout::BlockBytes(small[i].size(), 400);
    }
  }
  Fill second = FillUntilRefused(c.get(), "L", 30000, &large);
  auto st = StatsOf(c.get());
  const double live = double(survivors + second.live_bytes) / cap;
  printf(
      "--memory=8M: 400 B x %llu, every other deleted, then 30000 B x %llu: %.1f%% of the heap "
      "live at the refusal (%s); %g blocks (%g bytes) moved\n",
      static_cast<unsigned long long>(first.stored), static_cast<unsigned long long>(second.stored),
      100 * live, second.heap_refused ? "heap full" : "index full", st["heap_blocks_moved"],
      st["heap_bytes_moved"]);
  ASSERT_TRUE(second.heap_refused) << second.refusal;
  EXPECT_GE(live, 0.85);
  EXPECT_GT(st["heap_blocks_moved"], 0);
  std::string v;
  for (size_t i = 1; i < small.size(); i += 2) {
    ASSERT_TRUE(c->Get(small[i], &v).ok()) << small[i];
    ASSERT_EQ(v, std::string(400, 'v'));
  }
  for (const std::string& k : large) {
    ASSERT_TRUE(c->Get(k, &v).ok()) << k;
    ASSERT_EQ(v, std::string(30000, 'v')) << k;
  }
}

// Keys with equal 64-bit hashes (crafted with the public seed) share a bucket pair and tag: the
// one-sided GET and MultiGet find every one, skip the twins, and never answer NOT_FOUND for a
// present key or a value for a deleted one.
TEST(TableOverRdma, CraftedHashCollisionsAreReadCorrectly) {
  ChildServer srv(7482, {"--memory=8M"});
  if (!srv.available()) GTEST_SKIP() << "RKV_KVSERVER/RKV_SANDBOX_ADDR not set";
  std::unique_ptr<Client> c;
  ASSERT_TRUE(srv.Connect(&c).ok());
  std::vector<std::string> keys = testing::CollidingKeys(c->server_info().hash_seed, 26);
  std::map<std::string, std::string> model;
  auto check = [&] {
    std::vector<std::string_view> views(keys.begin(), keys.end());
    std::vector<std::string> values;
    std::vector<Status> statuses;
    ASSERT_TRUE(c->MultiGet(views, &values, &statuses).ok());
    std::string v;
    for (size_t i = 0; i < keys.size(); ++i) {
      auto it = model.find(keys[i]);
      Status s = c->Get(keys[i], &v);
      if (it == model.end()) {
        EXPECT_TRUE(s.IsNotFound()) << i << " " << s.ToString();
        EXPECT_TRUE(statuses[i].IsNotFound()) << i << " " << statuses[i].ToString();
      } else {
        ASSERT_TRUE(s.ok()) << i << " " << s.ToString();
        EXPECT_EQ(v, it->second) << i;
        ASSERT_TRUE(statuses[i].ok()) << i << " " << statuses[i].ToString();
        EXPECT_EQ(values[i], it->second) << i;
      }
    }
  };
  for (size_t i = 0; i < keys.size(); ++i) {
    std::string v = i % 2 ? std::string(300 + i, char('A' + i)) : "small" + std::to_string(i);
    ASSERT_TRUE(c->Put(keys[i], v).ok()) << i;
    model[keys[i]] = v;
  }
  EXPECT_GT(StatsOf(c.get())["overflow_entries"], 0);
  check();
  for (size_t i = 0; i < keys.size(); i += 3) {
    model[keys[i]] = model[keys[i]].size() > 50 ? "s" : std::string(5000, 'L');
    ASSERT_TRUE(c->Put(keys[i], model[keys[i]]).ok());
  }
  check();
  for (size_t i = 1; i < keys.size(); i += 2) {
    ASSERT_TRUE(c->Delete(keys[i]).ok());
    model.erase(keys[i]);
  }
  check();
  printf("26 colliding keys: %llu READ round trips for %llu GETs, %llu retries\n",
         static_cast<unsigned long long>(c->counters().round_trips),
         static_cast<unsigned long long>(c->counters().gets),
         static_cast<unsigned long long>(c->counters().checksum_retries));
}

// When the connection fails in the middle of a MultiGet, no key it did not read says OK.
TEST(TableOverRdma, MultiGetStatusesSayWhatHappenedToEveryKey) {
  ChildServer srv(7483, {"--memory=8M"});
  if (!srv.available()) GTEST_SKIP() << "RKV_KVSERVER/RKV_SANDBOX_ADDR not set";
  std::unique_ptr<Client> c;
  ASSERT_TRUE(srv.Connect(&c).ok());
  std::vector<std::string> keys;
  for (int i = 0; i < 40; ++i) {
    keys.push_back("mg" + std::to_string(i));
    ASSERT_TRUE(c->Put(keys.back(), std::string(i % 2 ? 2000 : 10, 'x')).ok());
  }
  keys.push_back(std::string());  // an invalid key gets its own error
  std::vector<std::string_view> views(keys.begin(), keys.end());
  std::vector<std::string> values;
  std::vector<Status> statuses;
  ASSERT_TRUE(c->MultiGet(views, &values, &statuses).ok());
  for (size_t i = 0; i + 1 < keys.size(); ++i) {
    EXPECT_TRUE(statuses[i].ok()) << i;
    EXPECT_EQ(values[i], std::string(i % 2 ? 2000 : 10, 'x')) << i;
  }
  EXPECT_EQ(statuses.back().code(), Code::kInvalidArgument);
  srv.Kill();
  values.assign(keys.size(), "stale");
  Status s = c->MultiGet(views, &values, &statuses);
  EXPECT_FALSE(s.ok());
  ASSERT_EQ(statuses.size(), keys.size());
  for (size_t i = 0; i + 1 < keys.size(); ++i)
    EXPECT_FALSE(statuses[i].ok()) << i << ": " << statuses[i].ToString();
  // Once broken, every key fails fast with the connection's status.
  s = c->MultiGet(views, &values, &statuses);
  EXPECT_EQ(s.code(), Code::kConnectionLost);
  for (const Status& st : statuses) EXPECT_EQ(st.code(), Code::kConnectionLost);
}

}  // namespace
}  // namespace rkv
