#include "common/auth.h"

#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdio>
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
const std::string kToken = "correct horse battery staple";

TEST(Auth, RightTokenVerifies) {
  Transcript t = Sample();
  uint8_t mac[wire::kMacSize];
  ASSERT_TRUE(ComputeMac(kToken, Prover::kClient, t, mac).ok());
  EXPECT_TRUE(VerifyMac(kToken, Prover::kClient, t, mac));
}

TEST(Auth, WrongTokenFails) {
  Transcript t = Sample();
  uint8_t mac[wire::kMacSize];
  ASSERT_TRUE(ComputeMac("another token of 16+ bytes", Prover::kClient, t, mac).ok());
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

TEST_F(TokenFile, PrivateFileLoadsWithoutTrailingNewline) {
  Write("0123456789abcdef\n", 0600);
  std::string token;
  ASSERT_TRUE(LoadTokenFile(path_, &token).ok());
  EXPECT_EQ(token, "0123456789abcdef");
  Write("0123456789abcdefXY", 0400);
  ASSERT_TRUE(LoadTokenFile(path_, &token).ok());
  EXPECT_EQ(token, "0123456789abcdefXY");
}

TEST_F(TokenFile, AccessibleByOthersRefused) {
  std::string token;
  for (mode_t mode : {0644, 0640, 0604, 0620, 0602}) {
    Write("0123456789abcdef", mode);
    Status s = LoadTokenFile(path_, &token);
    EXPECT_EQ(s.code(), Code::kInvalidArgument) << std::oct << mode;
    EXPECT_NE(s.message().find("chmod 600"), std::string::npos) << s.message();
  }
}

TEST_F(TokenFile, ShortTokenRefused) {
  std::string token;
  Write("0123456789abcde\n", 0600);  // 15 bytes after the newline is stripped
  Status s = LoadTokenFile(path_, &token);
  EXPECT_EQ(s.code(), Code::kInvalidArgument);
  EXPECT_NE(s.message().find("at least 16"), std::string::npos) << s.message();
  EXPECT_FALSE(LoadTokenFile(path_ + ".missing", &token).ok());
}

TEST(Auth, ProtectedModeRefusesWildcardWithoutAuth) {
  for (const char* host : {"", "0.0.0.0", "::", "[::]"}) {
    EXPECT_EQ(CheckListen(host, false, false).code(), Code::kInvalidArgument) << host;
    EXPECT_TRUE(CheckListen(host, true, false).ok()) << host;
    EXPECT_TRUE(CheckListen(host, false, true).ok()) << host;
  }
  EXPECT_TRUE(CheckListen("10.0.0.1", false, false).ok());
  EXPECT_TRUE(CheckListen("rdma0.example", false, false).ok());
  EXPECT_NE(CheckListen("0.0.0.0", false, false).message().find("--allow_unauthenticated"),
            std::string::npos);
}
}  // namespace
}  // namespace rkv::auth
