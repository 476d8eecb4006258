// SPDX-License-Identifier: Apache-2.0
#include "common/auth.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstddef>
#include <cstdio>
#include <cstring>

#include "common/secret_file.h"

namespace rkv::auth {
namespace {
constexpr char kClientLabel[] = "rkv-open-client-v1";
// v2: the proof covers the OPEN reply body too (v1 covered the transcript only).
constexpr char kServerLabel[] = "rkv-open-server-v2";
constexpr size_t kMaxTokenFile = 4096;
constexpr size_t kProofBodySize = offsetof(wire::OpenReply, server_mac);
static_assert(kProofBodySize + wire::kMacSize == sizeof(wire::OpenReply),
              "server_mac must be the last field of the OPEN reply");

void PutLe32(uint8_t* p, uint32_t v) {
  for (int i = 0; i < 4; ++i) p[i] = uint8_t(v >> (8 * i));
}

// Whether host resolves (getaddrinfo, AI_PASSIVE) to a wildcard address; an error if it does
// not resolve.
Status ResolvesToWildcard(const std::string& host, bool* wildcard) {
  *wildcard = false;
  std::string h = host;
  if (h.size() >= 2 && h.front() == '[' && h.back() == ']') h = h.substr(1, h.size() - 2);
  if (h.empty() || h == "*") {
    *wildcard = true;
    return Status::Ok();
  }
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  hints.ai_flags = AI_PASSIVE;
  addrinfo* res = nullptr;
  int gai = getaddrinfo(h.c_str(), nullptr, &hints, &res);
  if (gai != 0)
    return Status(Code::kInvalidArgument,
                  "cannot resolve listen host '" + host + "': getaddrinfo: " +
                      (gai == EAI_SYSTEM ? std::string(std::strerror(errno)) : gai_strerror(gai)));
  for (const addrinfo* p = res; p != nullptr && !*wildcard; p = p->ai_next) {
    if (p->ai_family == AF_INET && p->ai_addrlen >= sizeof(sockaddr_in)) {
      const auto* a = reinterpret_cast<const sockaddr_in*>(p->ai_addr);
      *wildcard = a->sin_addr.s_addr == htonl(INADDR_ANY);
    } else if (p->ai_family == AF_INET6 && p->ai_addrlen >= sizeof(sockaddr_in6)) {
      const in6_addr& a = reinterpret_cast<const sockaddr_in6*>(p->ai_addr)->sin6_addr;
      // ::ffff:0.0.0.0 binds an IPv6 socket to every IPv4 address.
      static const uint8_t kMappedAny[16] = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff, 0, 0, 0, 0};
      *wildcard = IN6_IS_ADDR_UNSPECIFIED(&a) || std::memcmp(&a, kMappedAny, 16) == 0;
    }
  }
  freeaddrinfo(res);
  return Status::Ok();
}
}  // namespace

Status ComputeMac(std::string_view token, Prover who, const Transcript& t, uint8_t* mac,
                  std::string_view body) {
  const char* label = who == Prover::kClient ? kClientLabel : kServerLabel;
  const size_t label_len = std::strlen(label);
  uint8_t head[32 + 2 * wire::kNonceSize + 8];
  size_t n = 0;
  std::memcpy(head, label, label_len);
  n += label_len;
  std::memcpy(head + n, t.server_nonce, wire::kNonceSize);
  n += wire::kNonceSize;
  std::memcpy(head + n, t.client_nonce, wire::kNonceSize);
  n += wire::kNonceSize;
  PutLe32(head + n, t.server_qpn);
  PutLe32(head + n + 4, t.client_qpn);
  n += 8;
  std::string msg(reinterpret_cast<const char*>(head), n);
  msg.append(body);
  unsigned int len = 0;
  const bool ok =
      HMAC(EVP_sha256(), token.data(), int(token.size()),
           reinterpret_cast<const uint8_t*>(msg.data()), msg.size(), mac, &len) != nullptr &&
      len == wire::kMacSize;
  OPENSSL_cleanse(head, sizeof head);
  if (!ok) return Status(Code::kIoError, "HMAC(SHA-256) failed");
  return Status::Ok();
}

bool VerifyMac(std::string_view token, Prover who, const Transcript& t, const uint8_t* mac,
               std::string_view body) {
  uint8_t want[wire::kMacSize];
  if (!ComputeMac(token, who, t, want, body).ok()) return false;
  bool ok = CRYPTO_memcmp(want, mac, wire::kMacSize) == 0;
  OPENSSL_cleanse(want, sizeof want);
  return ok;
}

std::string_view OpenReplyBody(const wire::OpenReply& reply) {
  return std::string_view(reinterpret_cast<const char*>(&reply), kProofBodySize);
}

Status ComputeOpenProof(std::string_view token, const Transcript& t, wire::OpenReply* reply) {
  uint8_t mac[wire::kMacSize];
  Status s = ComputeMac(token, Prover::kServer, t, mac, OpenReplyBody(*reply));
  if (s.ok()) std::memcpy(reply->server_mac, mac, sizeof mac);
  return s;
}

bool VerifyOpenProof(std::string_view token, const Transcript& t, std::string_view payload) {
  if (payload.size() != sizeof(wire::OpenReply)) return false;
  return VerifyMac(token, Prover::kServer, t,
                   reinterpret_cast<const uint8_t*>(payload.data()) + kProofBodySize,
                   payload.substr(0, kProofBodySize));
}

void StripTrailingWhitespace(std::string* token) {
  size_t n = token->size();
  auto space = [](char c) {
    return c == ' ' || c == '\t' || c == '\r' || c == '\n' || c == '\v' || c == '\f';
  };
  while (n > 0 && space((*token)[n - 1])) --n;
  if (n < token->size()) OPENSSL_cleanse(&(*token)[n], token->size() - n);
  token->resize(n);
}

Status LoadTokenFile(const std::string& path, std::string* token) {
  std::string data;
  Status s = ReadSecretFile(path, "auth token file " + path, kMaxTokenFile, &data);
  if (!s.ok()) return s;
  StripTrailingWhitespace(&data);
  if (data.size() < kMinTokenSize) {
    size_t n = data.size();
    if (n > 0) OPENSSL_cleanse(&data[0], n);
    return Status(Code::kInvalidArgument,
                  "auth token in " + path + " is " + std::to_string(n) +
                      " bytes (trailing whitespace stripped); need at least " +
                      std::to_string(kMinTokenSize) +
                      ": make one with openssl rand -hex 32 > FILE && chmod 600 FILE");
  }
  *token = std::move(data);
  return Status::Ok();
}

bool IsWildcardHost(const std::string& host) {
  bool wildcard = false;
  return !ResolvesToWildcard(host, &wildcard).ok() || wildcard;
}

Status CheckListen(const std::string& host, bool auth, bool allow_unauthenticated) {
  if (auth || allow_unauthenticated) return Status::Ok();
  bool wildcard = false;
  Status s = ResolvesToWildcard(host, &wildcard);
  if (!s.ok())
    return Status(s.code(), s.message() +
                                " (without authentication the listen address must be known not "
                                "to be a wildcard)");
  if (!wildcard) return Status::Ok();
  return Status(Code::kInvalidArgument,
                "refusing to listen on the wildcard address '" + host +
                    "' without authentication: any host that reaches the port could read and "
                    "write every key. Pass --auth_token_file=FILE, listen on a concrete address, "
                    "or pass --allow_unauthenticated");
}

}  // namespace rkv::auth
