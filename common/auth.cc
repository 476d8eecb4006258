#include "common/auth.h"

#include <fcntl.h>
#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

namespace rkv::auth {
namespace {
constexpr char kClientLabel[] = "rkv-open-client-v1";
constexpr char kServerLabel[] = "rkv-open-server-v1";
constexpr size_t kMaxTokenFile = 4096;

void PutLe32(uint8_t* p, uint32_t v) {
  for (int i = 0; i < 4; ++i) p[i] = uint8_t(v >> (8 * i));
}

std::string Errno(const std::string& what, int err) { return what + ": " + std::strerror(err); }
}  // namespace

Status ComputeMac(std::string_view token, Prover who, const Transcript& t, uint8_t* mac) {
  const char* label = who == Prover::kClient ? kClientLabel : kServerLabel;
  const size_t label_len = std::strlen(label);
  uint8_t msg[32 + 2 * wire::kNonceSize + 8];
  size_t n = 0;
  std::memcpy(msg, label, label_len);
  n += label_len;
  std::memcpy(msg + n, t.server_nonce, wire::kNonceSize);
  n += wire::kNonceSize;
  std::memcpy(msg + n, t.client_nonce, wire::kNonceSize);
  n += wire::kNonceSize;
  PutLe32(msg + n, t.server_qpn);
  PutLe32(msg + n + 4, t.client_qpn);
  n += 8;
  unsigned int len = 0;
  if (HMAC(EVP_sha256(), token.data(), int(token.size()), msg, n, mac, &len) == nullptr ||
      len != wire::kMacSize)
    return Status(Code::kIoError, "HMAC(SHA-256) failed");
  return Status::Ok();
}

bool VerifyMac(std::string_view token, Prover who, const Transcript& t, const uint8_t* mac) {
  uint8_t want[wire::kMacSize];
  if (!ComputeMac(token, who, t, want).ok()) return false;
  bool ok = CRYPTO_memcmp(want, mac, wire::kMacSize) == 0;
  OPENSSL_cleanse(want, sizeof want);
  return ok;
}

Status LoadTokenFile(const std::string& path, std::string* token) {
  int fd = open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK);
  if (fd < 0)
    return Status(Code::kInvalidArgument, Errno("open(auth token file " + path + ")", errno));
  struct stat st;
  if (fstat(fd, &st) != 0) {
    int err = errno;
    close(fd);
    return Status(Code::kInvalidArgument, Errno("fstat(auth token file " + path + ")", err));
  }
  if (!S_ISREG(st.st_mode)) {
    close(fd);
    return Status(Code::kInvalidArgument, "auth token file " + path + " is not a regular file");
  }
  if ((st.st_mode & 077) != 0) {
    close(fd);
    char mode[8];
    snprintf(mode, sizeof mode, "%04o", unsigned(st.st_mode & 07777));
    return Status(Code::kInvalidArgument,
                  "auth token file " + path + " has mode " + mode +
                      ": group or others may access it; make it private (chmod 600)");
  }
  std::string data(kMaxTokenFile + 1, '\0');
  size_t got = 0;
  while (got < data.size()) {
    ssize_t r = read(fd, &data[got], data.size() - got);
    if (r < 0 && errno == EINTR) continue;
    if (r < 0) {
      int err = errno;
      close(fd);
      return Status(Code::kInvalidArgument, Errno("read(auth token file " + path + ")", err));
    }
    if (r == 0) break;
    got += size_t(r);
  }
  close(fd);
  if (got > kMaxTokenFile)
    return Status(Code::kInvalidArgument, "auth token file " + path + " is larger than " +
                                              std::to_string(kMaxTokenFile) + " bytes");
  data.resize(got);
  if (!data.empty() && data.back() == '\n') data.pop_back();
  if (data.size() < kMinTokenSize) {
    OPENSSL_cleanse(&data[0], data.size());
    return Status(Code::kInvalidArgument,
                  "auth token in " + path + " is " + std::to_string(data.size()) +
                      " bytes; need at least " + std::to_string(kMinTokenSize));
  }
  *token = std::move(data);
  return Status::Ok();
}

bool IsWildcardHost(const std::string& host) {
  return host.empty() || host == "0.0.0.0" || host == "::" || host == "[::]" || host == "*";
}

Status CheckListen(const std::string& host, bool auth, bool allow_unauthenticated) {
  if (auth || allow_unauthenticated || !IsWildcardHost(host)) return Status::Ok();
  return Status(Code::kInvalidArgument,
                "refusing to listen on the wildcard address '" + host +
                    "' without authentication: any host that reaches the port could read and "
                    "write every key. Pass --auth_token_file=FILE, listen on a concrete address, "
                    "or pass --allow_unauthenticated");
}

}  // namespace rkv::auth
