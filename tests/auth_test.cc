// SPDX-License-Identifier: Apache-2.0
#include "common/auth.h"

#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstddef>
#include <cstring>
#include <string>

namespace rkv::auth {
namespace {
Transcript Sample() {
  Transcript t{};
  for (size_t i = 0; i < wire::kNonceSize; ++i) {
    t.server_nonce[i] = uint8_t(i);
    t.client_nonce[i] = uint8_t(0xa0 + i);
  }
  t.server_qpn = 0x11;
  t.client_qpn = 0x22;
  return t;
}
const std::string kToken = "correct horse battery staple, 32+ bytes";

TEST(Auth, RightTokenVerifies) {
  Transcript t = Sample();
  uint8_t mac[wire::kMacSize];
  ASSERT_TRUE(ComputeMac(kToken, Prover::kClient, t, mac).ok());
  EXPECT_TRUE(VerifyMac(kToken, Prover::kClient, t, mac));
}

TEST(Auth, WrongTokenFails) {
  Transcript t = Sample();
  uint8_t mac[wire::kMacSize];
  ASSERT_TRUE(ComputeMac("another token of at least 32 bytes", Prover::kClient, t, mac).ok());
  EXPECT_FALSE(VerifyMac(kToken, Prover::kClient, t, mac));
  uint8_t zero[wire::kMacSize] = {};
  EXPECT_FALSE(VerifyMac(kToken, Prover::kClient, t, zero));
}

TEST(Auth, ReplayAgainstNewServerNonceFails) {
  Transcript old_conn = Sample();
  uint8_t mac[wire::kMacSize];
  ASSERT_TRUE(ComputeMac(kToken, Prover::kClient, old_conn, mac).ok());
  Transcript new_conn = old_conn;  // same client nonce and QPs, fresh server nonce
  new_conn.server_nonce[7] ^= 0x40;
  EXPECT_FALSE(VerifyMac(kToken, Prover::kClient, new_conn, mac));
}

TEST(Auth, TamperedFieldsFail) {
  Transcript t = Sample();
  uint8_t mac[wire::kMacSize];
  ASSERT_TRUE(ComputeMac(kToken, Prover::kClient, t, mac).ok());
  Transcript x = t;
  x.client_nonce[0] ^= 1;
  EXPECT_FALSE(VerifyMac(kToken, Prover::kClient, x, mac));
  x = t;
  x.server_qpn ^= 1;
  EXPECT_FALSE(VerifyMac(kToken, Prover::kClient, x, mac));
  x = t;
  x.client_qpn ^= 0x100;
  EXPECT_FALSE(VerifyMac(kToken, Prover::kClient, x, mac));
  uint8_t bad[wire::kMacSize];
  std::memcpy(bad, mac, sizeof bad);
  bad[31] ^= 0x80;
  EXPECT_FALSE(VerifyMac(kToken, Prover::kClient, t, bad));
  // The server's proof is not the client's mac (labels differ): no reflection.
  EXPECT_FALSE(VerifyMac(kToken, Prover::kServer, t, mac));
}

class TokenFile : public ::testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/rkv-auth-test.XXXXXX";
    int fd = mkstemp(tmpl);
    ASSERT_GE(fd, 0);
    close(fd);
    path_ = tmpl;
  }
  void TearDown() override { unlink(path_.c_str()); }
  void Write(const std::string& data, mode_t mode) {
    FILE* f = std::fopen(path_.c_str(), "w");
    ASSERT_NE(f, nullptr);
    std::fwrite(data.data(), 1, data.size(), f);
    std::fclose(f);
    ASSERT_EQ(chmod(path_.c_str(), mode), 0);
  }
  std::string path_;
};

const std::string k32 = "0123456789abcdef0123456789abcdef";  // kMinTokenSize bytes

TEST_F(TokenFile, PrivateFileLoadsWithoutTrailingWhitespace) {
  std::string token;
  for (const char* tail : {"", "\n", "\r\n", " \t\r\n", "\n\n", "  "}) {
    Write(k32 + tail, 0600);
    ASSERT_TRUE(LoadTokenFile(path_, &token).ok()) << LoadTokenFile(path_, &token).ToString();
    EXPECT_EQ(token, k32) << "tail of " << std::strlen(tail) << " bytes";
  }
  Write(k32 + "XY", 0400);
  ASSERT_TRUE(LoadTokenFile(path_, &token).ok());
  EXPECT_EQ(token, k32 + "XY");
  Write(" lead" + k32, 0600);  // only trailing whitespace goes
  ASSERT_TRUE(LoadTokenFile(path_, &token).ok());
  EXPECT_EQ(token, " lead" + k32);
}

TEST(Auth, StripTrailingWhitespace) {
  std::string t = "abc \t\r\n\v\f";
  StripTrailingWhitespace(&t);
  EXPECT_EQ(t, "abc");
  t = " \n";
  StripTrailingWhitespace(&t);
  EXPECT_EQ(t, "");
  t = std::string("a\0", 2);  // NUL is not whitespace
  StripTrailingWhitespace(&t);
  EXPECT_EQ(t.size(), 2u);
}

TEST_F(TokenFile, AccessibleByOthersRefused) {
  std::string token;
  for (mode_t mode : {0644, 0640, 0604, 0620, 0602}) {
    Write(k32, mode);
    Status s = LoadTokenFile(path_, &token);
    EXPECT_EQ(s.code(), Code::kInvalidArgument) << std::oct << mode;
    EXPECT_NE(s.message().find("chmod 600"), std::string::npos) << s.message();
  }
}

TEST_F(TokenFile, ShortTokenRefused) {
  std::string token;
  // 31 bytes once the trailing whitespace is stripped (16 passed before).
  for (const char* tail : {"\n", "\r\n", " \t \n", ""}) {
    Write(k32.substr(1) + tail, 0600);
    Status s = LoadTokenFile(path_, &token);
    EXPECT_EQ(s.code(), Code::kInvalidArgument);
    EXPECT_NE(s.message().find("at least 32"), std::string::npos) << s.message();
    EXPECT_NE(s.message().find("openssl rand -hex 32"), std::string::npos) << s.message();
  }
  Write("0123456789abcdef\n", 0600);
  EXPECT_FALSE(LoadTokenFile(path_, &token).ok());
  EXPECT_FALSE(LoadTokenFile(path_ + ".missing", &token).ok());
}

TEST_F(TokenFile, OtherOwnerRefused) {
  if (geteuid() != 0) GTEST_SKIP() << "needs root to give the file to another user";
  Write(k32, 0600);
  ASSERT_EQ(chown(path_.c_str(), 65534, 65534), 0);
  std::string token;
  Status s = LoadTokenFile(path_, &token);
  EXPECT_EQ(s.code(), Code::kInvalidArgument);
  EXPECT_NE(s.message().find("owned by uid 65534"), std::string::npos) << s.message();
}

TEST_F(TokenFile, SymlinkAndNonRegularRefused) {
  Write(k32, 0600);
  const std::string link = path_ + ".link";
  ASSERT_EQ(symlink(path_.c_str(), link.c_str()), 0);
  std::string token;
  Status s = LoadTokenFile(link, &token);
  unlink(link.c_str());
  EXPECT_EQ(s.code(), Code::kInvalidArgument);
  EXPECT_NE(s.message().find("symbolic link"), std::string::npos) << s.message();
  const std::string fifo = path_ + ".fifo";
  ASSERT_EQ(mkfifo(fifo.c_str(), 0600), 0);
  s = LoadTokenFile(fifo, &token);
  unlink(fifo.c_str());
  EXPECT_NE(s.message().find("not a regular file"), std::string::npos) << s.message();
}

TEST(TokenDir, WritableParentRefusedUnlessSticky) {
  char tmpl[] = "/tmp/rkv-auth-dir.XXXXXX";
  ASSERT_NE(mkdtemp(tmpl), nullptr);
  const std::string dir = tmpl, path = dir + "/token";
  FILE* f = std::fopen(path.c_str(), "w");
  ASSERT_NE(f, nullptr);
  std::fputs((k32 + "\n").c_str(), f);
  std::fclose(f);
  ASSERT_EQ(chmod(path.c_str(), 0600), 0);
  std::string token;
  for (mode_t mode : {0777, 0775, 0757, 0770}) {
    ASSERT_EQ(chmod(dir.c_str(), mode), 0);
    Status s = LoadTokenFile(path, &token);
    EXPECT_EQ(s.code(), Code::kInvalidArgument) << std::oct << mode;
    EXPECT_NE(s.message().find("its directory"), std::string::npos) << s.message();
  }
  for (mode_t mode : {0700, 0755, 01777, 01770}) {
    ASSERT_EQ(chmod(dir.c_str(), mode), 0);
    EXPECT_TRUE(LoadTokenFile(path, &token).ok()) << std::oct << mode;
  }
  // A relative name: the directory is the working directory.
  char cwd[4096];
  ASSERT_NE(getcwd(cwd, sizeof cwd), nullptr);
  ASSERT_EQ(chdir(dir.c_str()), 0);
  ASSERT_EQ(chmod(dir.c_str(), 0777), 0);
  EXPECT_FALSE(LoadTokenFile("token", &token).ok());
  ASSERT_EQ(chmod(dir.c_str(), 0700), 0);
  EXPECT_TRUE(LoadTokenFile("token", &token).ok());
  ASSERT_EQ(chdir(cwd), 0);
  unlink(path.c_str());
  rmdir(dir.c_str());
}

TEST(Auth, ProtectedModeRefusesWildcardWithoutAuth) {
  // Every spelling getaddrinfo turns into INADDR_ANY / in6addr_any (a listener would bind it).
  for (const char* host :
       {"", "*", "0.0.0.0", "::", "[::]", "0", "0.0", "0x0", "0.0.0", "000.000.000.000",
        "0:0:0:0:0:0:0:0", "[0:0:0:0:0:0:0:0]", "::0", "::ffff:0.0.0.0"}) {
    EXPECT_EQ(CheckListen(host, false, false).code(), Code::kInvalidArgument) << host;
    EXPECT_TRUE(IsWildcardHost(host)) << host;
    EXPECT_TRUE(CheckListen(host, true, false).ok()) << host;
    EXPECT_TRUE(CheckListen(host, false, true).ok()) << host;
  }
  for (const char* host : {"10.0.0.1", "127.0.0.1", "::1", "[::1]", "localhost", "0.0.0.1"}) {
    EXPECT_TRUE(CheckListen(host, false, false).ok())
        << host << ": " << CheckListen(host, false, false).ToString();
    EXPECT_FALSE(IsWildcardHost(host)) << host;
  }
  // A name that does not resolve cannot be judged: refused without authentication.
  Status s = CheckListen("rdma0.invalid", false, false);
  EXPECT_EQ(s.code(), Code::kInvalidArgument);
  EXPECT_NE(s.message().find("cannot resolve"), std::string::npos) << s.message();
  EXPECT_TRUE(CheckListen("rdma0.invalid", true, false).ok());
  EXPECT_NE(CheckListen("0x0", false, false).message().find("--allow_unauthenticated"),
            std::string::npos);
}

wire::OpenReply SampleReply() {
  wire::OpenReply r{};
  r.magic = wire::kHelloMagic;
  r.version = wire::kProtocolVersion;
  r.flags = wire::kHelloAuthRequired;
  r.instance_id = 0x1122334455667788ull;
  r.region_size = 64ull << 20;
  r.rkey = 0xabcdef01;
  r.num_buckets = 1024;
  r.hash_seed = 0x0f0e0d0c0b0a0908ull;
  r.bucket_size = 64;
  r.slot_size = 64;
  r.overflow_offset = 1 << 20;
  r.overflow_slots = 4096;
  r.max_key_size = 1024;
  r.max_value_size = 1 << 20;
  r.max_request_size = 2 << 20;
  r.credits = 4;
  return r;
}
std::string Bytes(const wire::OpenReply& r) {
  return std::string(reinterpret_cast<const char*>(&r), sizeof r);
}

TEST(Auth, OpenProofCoversTheWholeReply) {
  Transcript t = Sample();
  wire::OpenReply r = SampleReply();
  ASSERT_TRUE(ComputeOpenProof(kToken, t, &r).ok());
  const std::string good = Bytes(r);
  EXPECT_TRUE(VerifyOpenProof(kToken, t, good));
  EXPECT_EQ(OpenReplyBody(r).size(), offsetof(wire::OpenReply, server_mac));
  // A relay changing any byte of the reply (rkey, geometry, seed, limits, the mac) is caught.
  for (size_t i = 0; i < good.size(); ++i) {
    std::string bad = good;
    bad[i] ^= 0x01;
    EXPECT_FALSE(VerifyOpenProof(kToken, t, bad)) << "byte " << i;
  }
  EXPECT_FALSE(VerifyOpenProof(kToken, t, good.substr(1)));
  EXPECT_FALSE(VerifyOpenProof(kToken, t, good + "x"));
  EXPECT_FALSE(VerifyOpenProof("another token of at least 32 bytes", t, good));
  Transcript x = t;
  x.client_qpn ^= 1;
  EXPECT_FALSE(VerifyOpenProof(kToken, x, good));
  x = t;
  x.server_nonce[0] ^= 1;
  EXPECT_FALSE(VerifyOpenProof(kToken, x, good));
  // Not the transcript-only mac (protocol 6's first proof), nor the client's mac.
  EXPECT_FALSE(VerifyMac(kToken, Prover::kServer, t, r.server_mac));
  EXPECT_FALSE(VerifyMac(kToken, Prover::kClient, t, r.server_mac, OpenReplyBody(r)));
  // Same fields, same proof: deterministic.
  wire::OpenReply again = SampleReply();
  ASSERT_TRUE(ComputeOpenProof(kToken, t, &again).ok());
  EXPECT_EQ(Bytes(again), good);
}
}  // namespace
}  // namespace rkv::auth
