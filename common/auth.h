// Authentication of rkv connections (docs/security.md, "Authentication").
//
// Challenge-response with a shared secret token, never sent: the server's hello carries a fresh
// 16-byte nonce per connection; the client's OPEN request carries its own nonce and
//   client mac = HMAC-SHA256(token, "rkv-open-client-v1" || server_nonce || client_nonce ||
//                            le32 server_qpn || le32 client_qpn)
// and the server's OPEN reply proves the token back with the same over "rkv-open-server-v1".
// Binding both nonces and both QP numbers makes an OPEN valid for one connection only: a
// recorded OPEN replayed against a new connection meets a new server nonce and other QPs.
// Macs are compared in constant time (CRYPTO_memcmp).
// Thread safety: pure functions. No ownership.
#ifndef RKV_COMMON_AUTH_H_
#define RKV_COMMON_AUTH_H_

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "common/wire.h"
#include "rkv/status.h"

namespace rkv::auth {

inline constexpr size_t kMinTokenSize = 16;

enum class Prover { kClient, kServer };

// What a mac covers.
struct Transcript {
  uint8_t server_nonce[wire::kNonceSize];
  uint8_t client_nonce[wire::kNonceSize];
  uint32_t server_qpn;
  uint32_t client_qpn;
};

// Writes the wire::kMacSize-byte mac of `who` over t. kIoError if OpenSSL fails.
[[nodiscard]] Status ComputeMac(std::string_view token, Prover who, const Transcript& t,
                                uint8_t* mac);
// True if mac (wire::kMacSize bytes) is `who`'s mac over t under token (constant time).
bool VerifyMac(std::string_view token, Prover who, const Transcript& t, const uint8_t* mac);

// Reads a token file: refused if group or others may read or write it (mode & 077), if it is
// not a regular file, or if the token (one trailing newline stripped) is shorter than
// kMinTokenSize bytes. Errors name the file, the call and the errno text.
[[nodiscard]] Status LoadTokenFile(const std::string& path, std::string* token);

// True if host is a wildcard listen address: "", "0.0.0.0", "::", "[::]", "*".
bool IsWildcardHost(const std::string& host);
// Protected mode: without authentication a server may listen on a wildcard address only when
// the operator said so (--allow_unauthenticated). kInvalidArgument explaining what to pass.
[[nodiscard]] Status CheckListen(const std::string& host, bool auth, bool allow_unauthenticated);

}  // namespace rkv::auth

#endif  // RKV_COMMON_AUTH_H_
