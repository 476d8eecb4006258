// SPDX-License-Identifier: Apache-2.0
// Unit tests of the etcd exchange's defences (issue 12): the pure decoders of etcd's JSON
// (etcd_json.h) give a clear error and never throw on wrong types, missing fields, bad
// base64, deep nesting or oversized input; EtcdMailbox checks its security options (a
// clear-text endpoint judged by the host libcurl connects to) and its password file; a watch
// stream is split into lines in linear work; and against a fake etcd (a local HTTP server in
// the test) a hostile answer or an endless response is an error Status, the transfer aborted
// at the size limit.
#include "common/etcd/etcd_json.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <fstream>
#include <future>
#include <random>
#include <thread>
#include <vector>

#include "common/exchange/etcd_mailbox.h"

namespace rkv {
namespace {

std::string B(const std::string& s) { return EncodeBase64(s); }

const std::string kHeader =
    R"("header":{"cluster_id":"1","member_id":"2","revision":"42","raft_term":"3"})";

std::string RangeReply(const std::string& key, const std::string& value) {
  return "{" + kHeader + R"(,"kvs":[{"key":")" + B(key) +
         R"(","create_revision":"5","mod_revision":"5","version":"1","value":")" + B(value) +
         R"("}],"count":"1"})";
}

TEST(EtcdJson, RangeResponseDecodes) {
  EtcdRangeResponse r;
  ASSERT_TRUE(
      ParseEtcdRangeResponse(RangeReply("/rkv/a.c.1", std::string("\0\x01xyz", 5)), &r).ok());
  EXPECT_EQ(r.revision, 42);
  ASSERT_EQ(r.kvs.size(), 1u);
  EXPECT_EQ(r.kvs[0].key, "/rkv/a.c.1");
  EXPECT_EQ(r.kvs[0].value, std::string("\0\x01xyz", 5));
  // No match: no kvs. Revision as a JSON integer. keys_only: no value.
  ASSERT_TRUE(ParseEtcdRangeResponse(R"({"header":{"revision":7}})", &r).ok());
  EXPECT_EQ(r.revision, 7);
  EXPECT_TRUE(r.kvs.empty());
  ASSERT_TRUE(
      ParseEtcdRangeResponse("{" + kHeader + R"(,"kvs":[{"key":")" + B("k") + "\"}]}", &r).ok());
  EXPECT_EQ(r.kvs.at(0).value, "");
}

// Each hostile answer: an error Status whose message says what was wrong, never an exception.
void ExpectRangeError(const std::string& text, const std::string& says) {
  EtcdRangeResponse r;
  Status s;
  EXPECT_NO_THROW(s = ParseEtcdRangeResponse(text, &r)) << text;
  EXPECT_EQ(s.code(), Code::kProtocolError) << text;
  EXPECT_NE(s.message().find(says), std::string::npos) << s.ToString();
}

TEST(EtcdJson, HostileRangeResponsesAreErrors) {
  ExpectRangeError("", "not JSON");
  ExpectRangeError("{\"header\":", "not JSON");
  ExpectRangeError("[1,2]", "expected a JSON object, got array");
  ExpectRangeError("\"str\"", "expected a JSON object, got string");
  ExpectRangeError("{}", "'header' missing");
  ExpectRangeError(R"({"header":"x"})", "'header' is string");
  ExpectRangeError(R"({"header":{}})", "'revision' missing");
  ExpectRangeError(R"({"header":{"revision":true}})", "'revision' is boolean");
  ExpectRangeError(R"({"header":{"revision":"12x"}})", "not a decimal int64");
  ExpectRangeError(R"({"header":{"revision":"99999999999999999999"}})", "not a decimal int64");
  ExpectRangeError(R"({"header":{"revision":18446744073709551615}})", "out of range");
  ExpectRangeError(R"({"header":{"revision":1.5}})", "'revision' is number");
  ExpectRangeError(R"({"header":{"revision":"-1"}})", "negative revision");
  ExpectRangeError("{" + kHeader + R"(,"kvs":{"key":"YQ=="}})", "'kvs' is object");
  ExpectRangeError("{" + kHeader + R"(,"kvs":[7]})", "'kvs[]' is number");
  ExpectRangeError("{" + kHeader + R"(,"kvs":[{"value":"YQ=="}]})", "'key' missing");
  ExpectRangeError("{" + kHeader + R"(,"kvs":[{"key":17}]})", "'key' is number");
  ExpectRangeError("{" + kHeader + R"(,"kvs":[{"key":null}]})", "'key' is null");
  ExpectRangeError("{" + kHeader + R"(,"kvs":[{"key":"YQ==","value":["x"]}]})", "'value' is array");
  ExpectRangeError("{" + kHeader + R"(,"kvs":[{"key":"Y*Q="}]})", "not base64");
  ExpectRangeError(R"({"error":"etcdserver: permission denied","code":7})", "permission denied");
  ExpectRangeError(R"({"error":{"grpc_code":16,"message":"invalid auth token"}})",
                   "invalid auth token");
  // Nesting that would exhaust a recursive parser or destructor: refused unparsed.
  ExpectRangeError(std::string(200000, '[') + std::string(200000, ']'), "nested deeper");
  ExpectRangeError("{\"a\":" + std::string(100, '{') + std::string(101, '}'), "nested deeper");
  // Over the size limit.
  ExpectRangeError("{" + kHeader + ",\"pad\":\"" + std::string(kMaxEtcdResponseBytes, 'x') + "\"}",
                   "more than");
}

TEST(EtcdJson, ErrorMessagesDoNotCarryRawControlBytes) {
  EtcdRangeResponse r;
  Status s = ParseEtcdRangeResponse("\x1b[31m\r\nnot json", &r);
  EXPECT_EQ(s.message().find('\x1b'), std::string::npos);
  EXPECT_EQ(s.message().find('\n'), std::string::npos);
  EXPECT_NE(s.message().find("\\x1b"), std::string::npos) << s.ToString();
}

TEST(EtcdJson, LeaseGrant) {
  std::string id;
  ASSERT_TRUE(
      ParseEtcdLeaseGrantResponse("{" + kHeader + R"(,"ID":"7587862072907113270","TTL":"10"})", &id)
          .ok());
  EXPECT_EQ(id, "7587862072907113270");
  ASSERT_TRUE(ParseEtcdLeaseGrantResponse(R"({"ID":12,"TTL":10})", &id).ok());
  EXPECT_EQ(id, "12");
  for (const char* bad : {R"({"TTL":"10"})", R"({"ID":{"x":1}})", R"({"ID":"0"})", R"({"ID":"-5"})",
                          R"({"ID":"1 OR 1"})", R"({"ID":[1]})", "null"}) {
    Status s;
    EXPECT_NO_THROW(s = ParseEtcdLeaseGrantResponse(bad, &id)) << bad;
    EXPECT_EQ(s.code(), Code::kProtocolError) << bad;
    EXPECT_NE(s.message().find("lease grant"), std::string::npos) << s.ToString();
  }
}

TEST(EtcdJson, AuthenticateToken) {
  std::string t;
  ASSERT_TRUE(
      ParseEtcdAuthenticateResponse("{" + kHeader + R"(,"token":"sssvIpwfnLAcWAQH.9"})", &t).ok());
  EXPECT_EQ(t, "sssvIpwfnLAcWAQH.9");
  for (const char* bad : {R"({})", R"({"token":5})", R"({"token":""})",
                          R"({"token":"abc\r\nX-Injected: 1"})", R"({"token":"a b"})"}) {
    Status s;
    EXPECT_NO_THROW(s = ParseEtcdAuthenticateResponse(bad, &t)) << bad;
    EXPECT_FALSE(s.ok()) << bad;
  }
}

TEST(EtcdJson, WatchMessages) {
  bool found = true;
  std::string v;
  const std::string key = "/rkv/abc.s.1";
  ASSERT_TRUE(
      ParseEtcdWatchMessage("{\"result\":{" + kHeader + ",\"created\":true}}", key, &found, &v)
          .ok());
  EXPECT_FALSE(found);
  auto event = [&](const std::string& type, const std::string& k, const std::string& val) {
    return "{\"result\":{" + kHeader + ",\"events\":[{" + type + "\"kv\":{\"key\":\"" + B(k) +
           "\",\"value\":\"" + B(val) + "\"}}]}}";
  };
  ASSERT_TRUE(ParseEtcdWatchMessage(event("", key, "rec"), key, &found, &v).ok());
  EXPECT_TRUE(found);
  EXPECT_EQ(v, "rec");
  ASSERT_TRUE(ParseEtcdWatchMessage(event("\"type\":\"DELETE\",", key, "x"), key, &found, &v).ok());
  EXPECT_FALSE(found);
  ASSERT_TRUE(ParseEtcdWatchMessage(event("", "/rkv/other", "x"), key, &found, &v).ok());
  EXPECT_FALSE(found);
  Status s = ParseEtcdWatchMessage(
      R"({"result":{"canceled":true,"cancel_reason":"mvcc: required revision has been compacted"}})",
      key, &found, &v);
  EXPECT_NE(s.message().find("canceled by etcd: mvcc"), std::string::npos) << s.ToString();
  s = ParseEtcdWatchMessage(R"({"error":{"grpc_code":7,"message":"permission denied"}})", key,
                            &found, &v);
  EXPECT_NE(s.message().find("permission denied"), std::string::npos) << s.ToString();
  for (const char* bad :
       {R"({"result":{"events":{}}})", R"({"result":{"events":[1]}})", R"({"result":[]})",
        R"({"result":{"events":[{"kv":"x"}]}})", R"({"result":{"events":[{"type":3}]}})",
        R"({"result":{"canceled":"yes"}})", R"({"nothing":1})"}) {
    EXPECT_NO_THROW(s = ParseEtcdWatchMessage(bad, key, &found, &v)) << bad;
    EXPECT_EQ(s.code(), Code::kProtocolError) << bad;
    EXPECT_FALSE(found);
  }
}

TEST(EtcdJson, Base64) {
  std::mt19937 rng(1);
  for (size_t n = 0; n < 40; ++n) {
    std::string in(n, '\0');
    for (char& c : in) c = char(rng());
    std::string out;
    ASSERT_TRUE(DecodeBase64(EncodeBase64(in), &out));
    EXPECT_EQ(out, in);
  }
  std::string out;
  EXPECT_TRUE(DecodeBase64("-_8", &out));  // URL-safe, unpadded (protobuf JSON accepts both)
  EXPECT_EQ(out, "\xfb\xff");
  EXPECT_FALSE(DecodeBase64("YQ=a", &out));
  EXPECT_FALSE(DecodeBase64("Y===", &out));
  EXPECT_TRUE(DecodeBase64("YQ", &out));
  EXPECT_EQ(out, "a");
  EXPECT_FALSE(DecodeBase64("Y", &out));
  EXPECT_FALSE(DecodeBase64("YQ==\n", &out));
  EXPECT_FALSE(DecodeBase64("YWJj=", &out));
}

// A poor man's fuzzer: mutations of valid answers never throw and never crash (the libFuzzer
// harness goes further).
TEST(EtcdJson, MutatedAnswersNeverThrow) {
  const std::vector<std::string> seeds = {
      RangeReply("/rkv/a.c.1", "v"), "{" + kHeader + R"(,"ID":"5","TTL":"10"})",
      R"({"result":{"events":[{"kv":{"key":"YQ==","value":"Yg=="}}]}})", R"({"token":"abc.1"})"};
  std::mt19937 rng(12);
  const char alphabet[] = "{}[]\":,0123456789-aeYQ=truefalsnl \\";
  for (int i = 0; i < 20000; ++i) {
    std::string t = seeds[i % seeds.size()];
    for (int k = 0, m = 1 + int(rng() % 4); k < m && !t.empty(); ++k) {
      size_t at = rng() % t.size();
      switch (rng() % 3) {
        case 0:
          t[at] = alphabet[rng() % (sizeof alphabet - 1)];
          break;
        case 1:
          t.erase(at, 1 + rng() % 8);
          break;
        default:
          t.insert(at, 1, alphabet[rng() % (sizeof alphabet - 1)]);
      }
    }
    EtcdRangeResponse r;
    std::string s1;
    bool found;
    ASSERT_NO_THROW({
      (void)ParseEtcdRangeResponse(t, &r);
      (void)ParseEtcdLeaseGrantResponse(t, &s1);
      (void)ParseEtcdAuthenticateResponse(t, &s1);
      (void)ParseEtcdWatchMessage(t, "a", &found, &s1);
    }) << t;
  }
}

TEST(EtcdOptions, SecurityOptionsAreChecked) {
  ExchangeOptions o;
  o.method = Exchange::kEtcd;
  EXPECT_TRUE(EtcdMailbox::CheckOptions(o).ok());
  o.etcd_endpoint = "file:///etc/passwd";
  EXPECT_EQ(EtcdMailbox::CheckOptions(o).code(), Code::kInvalidArgument);
  o.etcd_endpoint = "http://10.0.0.1:2379";
  o.etcd_cacert = "/ca.pem";
  EXPECT_NE(EtcdMailbox::CheckOptions(o).message().find("https"), std::string::npos);
  o.etcd_endpoint = "https://10.0.0.1:2379";
  EXPECT_TRUE(EtcdMailbox::CheckOptions(o).ok());
  o.etcd_cert = "/c.pem";
  EXPECT_FALSE(EtcdMailbox::CheckOptions(o).ok());  // cert without key
  o.etcd_key = "/k.pem";
  EXPECT_TRUE(EtcdMailbox::CheckOptions(o).ok());
  o.etcd_user = "rkv";
  EXPECT_FALSE(EtcdMailbox::CheckOptions(o).ok());  // user without password
  o.etcd_password_file = "/pw";
  EXPECT_TRUE(EtcdMailbox::CheckOptions(o).ok());
  ExchangeOptions p;
  p.etcd_user = "rkv";
  p.etcd_password_file = "/pw";
  p.etcd_endpoint = "http://10.0.0.1:2379";
  Status s = EtcdMailbox::CheckOptions(p);
  EXPECT_NE(s.message().find("in clear to 10.0.0.1"), std::string::npos) << s.ToString();
  for (const char* local :
       {"http://127.0.0.1:2379", "http://localhost:2379", "http://[::1]:2379"}) {
    p.etcd_endpoint = local;
    EXPECT_TRUE(EtcdMailbox::CheckOptions(p).ok()) << local;
  }
}

// The clear-text guard judges the host libcurl will connect to, not a prefix of the text.
TEST(EtcdOptions, ClearTextPasswordGuardCannotBeFooled) {
  ExchangeOptions p;
  p.etcd_user = "rkv";
  p.etcd_password_file = "/pw";
  // A name that merely starts with "127.".
  p.etcd_endpoint = "http://127.attacker.example:2379";
  Status s = EtcdMailbox::CheckOptions(p);
  EXPECT_EQ(s.code(), Code::kInvalidArgument);
  EXPECT_NE(s.message().find("in clear to 127.attacker.example"), std::string::npos)
      << s.ToString();
  // '@' in a query or fragment is not userinfo: curl connects to evil.example.
  const std::pair<const char*, const char*> kRefused[] = {
      {"http://evil.example:2379?@127.0.0.1", "query"},
      {"http://evil.example:2379/?@127.0.0.1", "query"},
      {"http://evil.example:2379#@127.0.0.1", "fragment"},
      {"http://evil.example:2379/#@127.0.0.1", "fragment"},
      {"http://127.0.0.1:2379?", "query"},
      {"http://127.0.0.1:2379#", "fragment"},
      {"http://evil.example@127.0.0.1:2379", "user"},
      {"http://u:pw@127.0.0.1:2379", "user"},
      {"http://@127.0.0.1:2379", "user"},
      {"https://u@10.0.0.1:2379", "user"},
      {"http://127.0.0.1:99999", "not a valid URL"},
  };
  for (const auto& [url, part] : kRefused) {
    for (bool user : {true, false}) {  // refused with or without a password to protect
      ExchangeOptions o = p;
      if (!user) o.etcd_user = o.etcd_password_file = "";
      o.etcd_endpoint = url;
      s = EtcdMailbox::CheckOptions(o);
      EXPECT_EQ(s.code(), Code::kInvalidArgument) << url;
      EXPECT_NE(s.message().find(part), std::string::npos) << url << ": " << s.ToString();
      EXPECT_NE(s.message().find(url), std::string::npos) << url << ": " << s.ToString();
    }
  }
  for (const char* local :
       {"http://127.0.0.1:2379", "http://127.255.3.4:2379", "http://localhost:2379",
        "http://[::1]:2379", "http://127.0.0.1", "http://[0:0:0:0:0:0:0:1]:2379"}) {
    p.etcd_endpoint = local;
    s = EtcdMailbox::CheckOptions(p);
    EXPECT_TRUE(s.ok()) << local << ": " << s.ToString();
  }
  for (const char* remote :
       {"http://128.0.0.1:2379", "http://127.0.0.1.evil.example:2379",
        "http://localhost.evil.example:2379", "http://[::2]:2379", "http://[::ffff:10.0.0.1]"}) {
    p.etcd_endpoint = remote;
    s = EtcdMailbox::CheckOptions(p);
    EXPECT_NE(s.message().find("in clear to"), std::string::npos) << remote << ": " << s.ToString();
  }
}

TEST(EtcdOptions, LoopbackHosts) {
  for (const char* h : {"127.0.0.1", "127.1.2.3", "127.255.255.255", "::1", "[::1]", "localhost"})
    EXPECT_TRUE(EtcdMailbox::IsLoopbackHost(h)) << h;
  for (const char* h : {"", "127.attacker.example", "127.0.0.1.nip.io", "127.", "127", "128.0.0.1",
                        "1.127.0.0", "localhost.", "localhost.evil", "xlocalhost", "[::2]",
                        "::", "[::1", "::1]", "::ffff:127.0.0.1", "127.0.0.1 ", "0.0.0.0"})
    EXPECT_FALSE(EtcdMailbox::IsLoopbackHost(h)) << h;
}

class TempDir : public ::testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/rkv-etcd-test.XXXXXX";
    ASSERT_NE(mkdtemp(tmpl), nullptr);
    dir_ = tmpl;
  }
  void TearDown() override {
    std::string cmd = "rm -rf '" + dir_ + "'";
    ASSERT_EQ(system(cmd.c_str()), 0);
  }
  std::string dir_;
};
using EtcdPasswordFile = TempDir;

TEST_F(EtcdPasswordFile, MustBePrivateRegularAndSmall) {
  const std::string f = dir_ + "/pw";
  std::ofstream(f) << "s3cret\n";
  ASSERT_EQ(chmod(f.c_str(), 0644), 0);
  std::string pw;
  Status s = EtcdMailbox::ReadPasswordFile(f, &pw);
  EXPECT_NE(s.message().find("chmod 600"), std::string::npos) << s.ToString();
  ASSERT_EQ(chmod(f.c_str(), 0600), 0);
  ASSERT_TRUE(EtcdMailbox::ReadPasswordFile(f, &pw).ok());
  EXPECT_EQ(pw, "s3cret");
  const std::string big = dir_ + "/big";
  std::ofstream(big) << std::string(5000, 'x');
  ASSERT_EQ(chmod(big.c_str(), 0600), 0);
  EXPECT_FALSE(EtcdMailbox::ReadPasswordFile(big, &pw).ok());
  const std::string fifo = dir_ + "/fifo";
  ASSERT_EQ(mkfifo(fifo.c_str(), 0600), 0);
  // A FIFO with no writer: an open without O_NONBLOCK would block for good. No time is
  // asserted: the read runs aside, and one still inside after 60 s has blocked (that fails,
  // and opening the FIFO for writing lets it go).
  auto read = std::async(std::launch::async, [&] {
    std::string p;
    return EtcdMailbox::ReadPasswordFile(fifo, &p);
  });
  if (read.wait_for(std::chrono::seconds(60)) != std::future_status::ready) {
    ADD_FAILURE() << "ReadPasswordFile blocked on a FIFO";
    const int fd = open(fifo.c_str(), O_WRONLY | O_NONBLOCK);
    read.wait();
    if (fd >= 0) close(fd);
  }
  s = read.get();
  EXPECT_NE(s.message().find("not a regular file"), std::string::npos) << s.ToString();
}

// Review 12, finding 9: the password file gets the token file's checks (common/secret_file.h).
TEST_F(EtcdPasswordFile, HasTheTokenFilesChecks) {
  const std::string f = dir_ + "/pw";
  std::ofstream(f) << "s3cret\r\n";
  ASSERT_EQ(chmod(f.c_str(), 0600), 0);
  std::string pw;
  ASSERT_TRUE(EtcdMailbox::ReadPasswordFile(f, &pw).ok());
  EXPECT_EQ(pw, "s3cret");
  const std::string link = dir_ + "/link";
  ASSERT_EQ(symlink(f.c_str(), link.c_str()), 0);
  Status s = EtcdMailbox::ReadPasswordFile(link, &pw);
  EXPECT_NE(s.message().find("symbolic link"), std::string::npos) << s.ToString();
  const std::string open_dir = dir_ + "/open";
  ASSERT_EQ(mkdir(open_dir.c_str(), 0700), 0);
  ASSERT_EQ(chmod(open_dir.c_str(), 0777), 0);  // not sticky: others could replace the file
  const std::string g = open_dir + "/pw";
  std::ofstream(g) << "s3cret\n";
  ASSERT_EQ(chmod(g.c_str(), 0600), 0);
  s = EtcdMailbox::ReadPasswordFile(g, &pw);
  EXPECT_NE(s.message().find("its directory"), std::string::npos) << s.ToString();
  ASSERT_EQ(chmod(open_dir.c_str(), 01777), 0);  // sticky, like /tmp
  EXPECT_TRUE(EtcdMailbox::ReadPasswordFile(g, &pw).ok());
  if (geteuid() == 0) {  // only root can give a file away
    ASSERT_EQ(chown(f.c_str(), 65534, 65534), 0);
    s = EtcdMailbox::ReadPasswordFile(f, &pw);
    EXPECT_NE(s.message().find("owned by uid 65534"), std::string::npos) << s.ToString();
  }
}

// A hostile etcd dribbles a watch message a byte at a time, inside a JSON string full of
// '}' (so every chunk ends like a message might): the splitter examines each byte once and
// hands the line out once. Before, every chunk rescanned (and JSON-parsed) the whole buffer.
TEST(EtcdLineSplitter, DribbledStreamIsSplitInLinearWork) {
  struct Lines {
    std::vector<std::string> got;
    static bool On(std::string_view line, void* arg) {
      static_cast<Lines*>(arg)->got.emplace_back(line);
      return false;
    }
  } lines;
  const std::string filler(64 * 1024, '}');
  const std::string msg = "{\"result\":{\"x\":\"" + filler + "\"}}";
  const std::string stream = msg + "\n" + msg + "\n{\"tail\":";
  EtcdLineSplitter split;
  std::string buf;
  for (char c : stream) ASSERT_FALSE(split.Feed(&buf, std::string_view(&c, 1), Lines::On, &lines));
  EXPECT_EQ(split.bytes_scanned(), stream.size());  // each byte once
  EXPECT_EQ(split.lines(), 2u);
  ASSERT_EQ(lines.got.size(), 2u);
  EXPECT_EQ(lines.got[0], msg);
  EXPECT_EQ(lines.got[1], msg);
  EXPECT_EQ(buf, "{\"tail\":");  // the unterminated rest stays for the caller
}

TEST(EtcdLineSplitter, ChunksOfAnySizeGiveTheSameLinesAndStopEarly) {
  struct Lines {
    std::vector<std::string> got;
    size_t stop_at = 0;
    static bool On(std::string_view line, void* arg) {
      auto* l = static_cast<Lines*>(arg);
      l->got.emplace_back(line);
      return l->got.size() == l->stop_at;
    }
  };
  std::string stream;
  for (int i = 0; i < 100; ++i) stream += "line " + std::to_string(i) + (i % 7 ? "" : "\r") + "\n";
  stream += "\n\nrest";
  for (size_t chunk : {size_t(1), size_t(3), size_t(64), stream.size()}) {
    Lines lines;
    EtcdLineSplitter split;
    std::string buf;
    for (size_t i = 0; i < stream.size(); i += chunk)
      ASSERT_FALSE(split.Feed(&buf, std::string_view(stream).substr(i, chunk), Lines::On, &lines));
    EXPECT_EQ(split.bytes_scanned(), stream.size()) << chunk;
    ASSERT_EQ(lines.got.size(), 102u) << chunk;
    EXPECT_EQ(lines.got[1], "line 1");
    EXPECT_EQ(lines.got[7], "line 7\r");
    EXPECT_EQ(lines.got[101], "");
    EXPECT_EQ(buf, "rest");
  }
  Lines lines;
  lines.stop_at = 2;
  EtcdLineSplitter split;
  std::string buf;
  EXPECT_TRUE(split.Feed(&buf, "a\nb\nc\nd", Lines::On, &lines));
  EXPECT_EQ(lines.got, (std::vector<std::string>{"a", "b"}));
  EXPECT_EQ(buf, "c\nd");  // not handed out
}

// A fake etcd: answers each HTTP connection with the next canned reply (status line included),
// or with an endless body when the reply is "ENDLESS".
class FakeEtcd {
 public:
  explicit FakeEtcd(std::vector<std::string> replies) : replies_(std::move(replies)) {
    fd_ = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    EXPECT_EQ(bind(fd_, reinterpret_cast<sockaddr*>(&a), sizeof a), 0);
    socklen_t len = sizeof a;
    getsockname(fd_, reinterpret_cast<sockaddr*>(&a), &len);
    port_ = ntohs(a.sin_port);
    EXPECT_EQ(listen(fd_, 8), 0);
    thread_ = std::thread([this] { Serve(); });
  }
  ~FakeEtcd() {
    stop_ = true;
    thread_.join();
    close(fd_);
  }
  std::string Endpoint() const { return "http://127.0.0.1:" + std::to_string(port_); }
  size_t ended_bytes() const { return endless_sent_; }

 private:
  void Serve() {
    for (size_t i = 0; !stop_;) {
      pollfd p{fd_, POLLIN, 0};
      if (poll(&p, 1, 50) <= 0) continue;
      int c = accept4(fd_, nullptr, nullptr, SOCK_CLOEXEC);
      if (c < 0) continue;
      char buf[65536];
      std::string req;
      while (req.find("\r\n\r\n") == std::string::npos) {  // headers; the body is small
        ssize_t n = recv(c, buf, sizeof buf, 0);
        if (n <= 0) break;
        req.append(buf, size_t(n));
      }
      std::string reply = i < replies_.size() ? replies_[i++] : "HTTP/1.1 500 X\r\n\r\n";
      if (reply == "ENDLESS") {
        std::string head = "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\n\r\n{\"x\":\"";
        send(c, head.data(), head.size(), MSG_NOSIGNAL);
        std::string chunk(65536, 'a');
        for (int k = 0; k < 1024 && !stop_; ++k) {  // up to 64 MiB unless the client hangs up
          ssize_t n = send(c, chunk.data(), chunk.size(), MSG_NOSIGNAL);
          if (n <= 0) break;
          endless_sent_ += size_t(n);
        }
      } else {
        send(c, reply.data(), reply.size(), MSG_NOSIGNAL);
      }
      close(c);
    }
  }
  std::vector<std::string> replies_;
  int fd_ = -1;
  uint16_t port_ = 0;
  std::atomic<bool> stop_{false};
  std::atomic<size_t> endless_sent_{0};
  std::thread thread_;
};

std::string Http200(const std::string& body) {
  return "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: " +
         std::to_string(body.size()) + "\r\nConnection: close\r\n\r\n" + body;
}

ExchangeOptions Etcd(const FakeEtcd& f) {
  ExchangeOptions o;
  o.method = Exchange::kEtcd;
  o.etcd_endpoint = f.Endpoint();
  return o;
}

TEST(EtcdMailboxFake, WrongTypeInLeaseGrantIsAnError) {
  FakeEtcd f({Http200(R"({"ID":{"nested":true},"TTL":"10"})")});
  std::unique_ptr<Mailbox> mb;
  Status s;
  EXPECT_NO_THROW(s = EtcdMailbox::Open(Etcd(f), &mb));
  EXPECT_EQ(s.code(), Code::kProtocolError);
  EXPECT_NE(s.message().find("'ID' is object"), std::string::npos) << s.ToString();
}

TEST(EtcdMailboxFake, EndlessResponseIsAbortedAtTheLimit) {
  FakeEtcd f({"ENDLESS"});
  std::unique_ptr<Mailbox> mb;
  Status s = EtcdMailbox::Open(Etcd(f), &mb);
  EXPECT_EQ(s.code(), Code::kProtocolError);
  EXPECT_NE(s.message().find("larger than"), std::string::npos) << s.ToString();
}

TEST(EtcdMailboxFake, AnnouncedHugeResponseIsRefused) {
  FakeEtcd f({"HTTP/1.1 200 OK\r\nContent-Length: 100000000\r\n\r\n{"});
  std::unique_ptr<Mailbox> mb;
  Status s = EtcdMailbox::Open(Etcd(f), &mb);
  EXPECT_NE(s.message().find("larger than"), std::string::npos) << s.ToString();
}

TEST(EtcdMailboxFake, HostileRangeAnswerIsAnErrorNotACrash) {
  FakeEtcd f({Http200(R"({"ID":"9","TTL":"10"})"), Http200(R"({"header":{"revision":[]}})"),
              Http200(RangeReply("/rkv/someone-else", "x")), Http200("{}")});
  std::unique_ptr<Mailbox> mb;
  ASSERT_TRUE(EtcdMailbox::Open(Etcd(f), &mb).ok());
  std::string bytes;
  Status s;
  EXPECT_NO_THROW(s = mb->WaitFor("abc.s.1", &bytes, 100));
  EXPECT_NE(s.message().find("'revision' is array"), std::string::npos) << s.ToString();
  std::vector<std::string> names;
  // A key outside the prefix in a List answer is ignored.
  ASSERT_TRUE(mb->List(".c.1", &names).ok());
  EXPECT_TRUE(names.empty());
  mb.reset();  // revoke answered with "{}": ignored
}

TEST(EtcdMailboxFake, WatchStreamDeliversTheKeyAndCancelIsAnError) {
  const std::string key = "/rkv/0123456789abcdef.s.1";
  const std::string stream = "{\"result\":{" + kHeader + ",\"created\":true}}\n" + "{\"result\":{" +
                             kHeader + ",\"events\":[{\"kv\":{\"key\":\"" + B("/rkv/other") +
                             "\",\"value\":\"" + B("no") + "\"}}]}}\n{\"result\":{" + kHeader +
                             ",\"events\":[{\"kv\":{\"key\":\"" + B(key) + "\",\"value\":\"" +
                             B("record") + "\"}}]}}\n";
  FakeEtcd f({Http200(R"({"ID":"9","TTL":"10"})"), Http200("{" + kHeader + "}"),
              "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\n\r\n" + stream,
              Http200("{" + kHeader + "}"),
              Http200(R"({"result":{"canceled":true,"cancel_reason":"compacted"}})"
                      "\n")});
  std::unique_ptr<Mailbox> mb;
  ASSERT_TRUE(EtcdMailbox::Open(Etcd(f), &mb).ok());
  std::string bytes;
  Status s = mb->WaitFor("0123456789abcdef.s.1", &bytes, 2000);
  ASSERT_TRUE(s.ok()) << s.ToString();
  EXPECT_EQ(bytes, "record");
  // The cancel ends the wait: the error names it, and it came before the wait's own deadline
  // (a WaitFor that ignored the cancel would end at the deadline, with a timeout).
  constexpr int kWaitMs = 30000;
  const auto t0 = std::chrono::steady_clock::now();
  s = mb->WaitFor("0123456789abcdef.s.2", &bytes, kWaitMs);
  EXPECT_LT(std::chrono::steady_clock::now() - t0, std::chrono::milliseconds(kWaitMs));
  EXPECT_NE(s.code(), Code::kTimeout) << s.ToString();
  EXPECT_NE(s.message().find("canceled by etcd: compacted"), std::string::npos) << s.ToString();
}

}  // namespace
}  // namespace rkv
