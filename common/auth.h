// SPDX-License-Identifier: Apache-2.0
// Authentication of rkv connections (docs/security.md, "Authentication").
//
// Challenge-response with a shared secret token, never sent: the server's hello carries a fresh
// 16-byte nonce per connection; the client's OPEN request carries its own nonce and
//   client mac = HMAC-SHA256(token, "rkv-open-client-v1" || server_nonce || client_nonce ||
//                            le32 server_qpn || le32 client_qpn)
// and the server's OPEN reply proves the token back with
//   server proof = HMAC-SHA256(token, "rkv-open-server-v2" || server_nonce || client_nonce ||
//                              le32 server_qpn || le32 client_qpn || reply body)
// where the reply body is every byte of the OPEN reply before server_mac (instance id, region,
// rkey, geometry, limits, credits): a relay cannot alter what the client will use. Binding both
// nonces and both QP numbers makes an OPEN valid for one connection only: a recorded OPEN
// replayed against a new connection meets a new server nonce and other QPs.
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

// Bytes of token left after trailing whitespace is stripped (openssl rand -hex 32: 64).
inline constexpr size_t kMinTokenSize = 32;

enum class Prover { kClient, kServer };

// What a mac covers.
struct Transcript {
  uint8_t server_nonce[wire::kNonceSize];
  uint8_t client_nonce[wire::kNonceSize];
  uint32_t server_qpn;
  uint32_t client_qpn;
};

// Writes the wire::kMacSize-byte mac of `who` over label || t || body. kIoError if OpenSSL
// fails. The client's mac has an empty body; the server's proof is over the OPEN reply body
// (use ComputeOpenProof / VerifyOpenProof).
[[nodiscard]] Status ComputeMac(std::string_view token, Prover who, const Transcript& t,
                                uint8_t* mac, std::string_view body = {});
// True if mac (wire::kMacSize bytes) is `who`'s mac over t and body under token (constant time).
bool VerifyMac(std::string_view token, Prover who, const Transcript& t, const uint8_t* mac,
               std::string_view body = {});

// The bytes of an OPEN reply the server's proof covers: all of it but server_mac.
std::string_view OpenReplyBody(const wire::OpenReply& reply);
// Fills reply->server_mac with the server's proof over t and the rest of *reply; call it last,
// once every other field is final.
[[nodiscard]] Status ComputeOpenProof(std::string_view token, const Transcript& t,
                                      wire::OpenReply* reply);
// True if payload is an OPEN reply (exactly sizeof(wire::OpenReply) bytes, as received) whose
// server_mac is the server's proof over t and the payload's other bytes. Call it before using
// (or decoding) any field of the reply.
bool VerifyOpenProof(std::string_view token, const Transcript& t, std::string_view payload);

// Strips every trailing whitespace byte (' ', '\t', '\r', '\n', '\v', '\f') of a token, so that
// a file written by an editor, `echo`, or on Windows gives the same token everywhere.
void StripTrailingWhitespace(std::string* token);

// Reads a token file (server and clients alike). Opened with O_NOFOLLOW and checked on the
// opened descriptor (fstat): refused if it is not a regular file, not owned by the effective
// user, if group or others may read or write it (mode & 077), if its parent directory is
// writable by group or others without the sticky bit, or if the token (trailing whitespace
// stripped, StripTrailingWhitespace) is shorter than kMinTokenSize bytes. Errors name the file,
// the call and the errno text.
[[nodiscard]] Status LoadTokenFile(const std::string& path, std::string* token);

// True if host is, or may be, a wildcard listen address: "", "*", or a name or numeric address
// (IPv6 optionally in brackets) any getaddrinfo(AI_PASSIVE) result of which is INADDR_ANY,
// in6addr_any or ::ffff:0.0.0.0 ("0", "0x0", "000.000.000.000", "0:0:0:0:0:0:0:0", a host
// name mapped to 0.0.0.0, ...). A host that does not resolve counts as a wildcard.
bool IsWildcardHost(const std::string& host);
// Protected mode: without authentication a server may listen on a wildcard address (decided
// on the resolved address, as IsWildcardHost) only when the operator said so
// (--allow_unauthenticated). kInvalidArgument explaining what to pass; a host that does not
// resolve is refused in protected mode too (the listener could not bind it anyway).
[[nodiscard]] Status CheckListen(const std::string& host, bool auth, bool allow_unauthenticated);

}  // namespace rkv::auth

#endif  // RKV_COMMON_AUTH_H_
