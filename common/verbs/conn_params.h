// SPDX-License-Identifier: Apache-2.0
// ConnParams: the connection parameter record two RDMA peers exchange, and its wire encoding.
//
// One record per side. The same 128-byte encoding travels over every exchange method (TCP,
// file, etcd; docs/wire-format.md); in rdma_cm mode the server's memory parameters travel in
// the accept private data instead (wire::ServerHello) and the rest is read back from the QP.
// Wire format: fixed-width fields, little-endian, GID in network byte order as ibverbs keeps it.
// Thread safety: plain values; Encode/Decode are pure.
#ifndef RKV_COMMON_VERBS_CONN_PARAMS_H_
#define RKV_COMMON_VERBS_CONN_PARAMS_H_

#include <cstddef>
#include <cstdint>
#include <string>

#include "rkv/connection_params.h"
#include "rkv/status.h"

namespace rkv {

const char* TransportName(Transport t);

inline constexpr uint32_t kConnParamsMagic = 0x504b5652;  // "RVKP" little-endian
inline constexpr uint16_t kConnParamsVersion = 1;
inline constexpr size_t kConnParamsSize = 128;

// Writes exactly kConnParamsSize bytes.
void EncodeConnParams(const ConnParams& p, uint8_t* out);
// Checks magic, version, length and field ranges; the message says what is wrong.
[[nodiscard]] Status DecodeConnParams(const uint8_t* data, size_t len, ConnParams* out);

// ibv_mtu enum value <-> bytes (0 if invalid).
uint32_t MtuEnumToBytes(uint8_t mtu);
uint8_t MtuBytesToEnum(uint32_t bytes);
std::string GidToString(const uint8_t gid[16]);
// "name value" lines, one per parameter, for logs and `kvctl info`.
std::string FormatConnParams(const ConnParams& p);
// One line: this QP's parameters and the peer's as the QP addresses it (connection logs).
std::string FormatParamsLine(const ConnParams& local, const ConnParams& peer_seen);
// A "parameter local peer" table, one row per parameter (connection logs, kvctl info/check).
// The memory rows (remote_addr, rkey, region_size) show what the two ConnParams hold: for an
// open client connection, local = what this client's READs use (the OPEN reply) and peer = what
// the server says it granted this connection (PARAMS); the address is 0 (zero-based rkeys).
// When both sides hold no memory parameters (no connection open: kvctl check) those rows say
// "- (granted at OPEN)" instead of zeros.
std::string FormatParamTable(const ConnParams& local, const ConnParams& peer);
// The note printed under such a table of an open connection: where the memory rows come from.
inline constexpr const char* kMemoryRowsNote =
    "memory rows: local = what this client's READs use (granted at OPEN), peer = what the "
    "server granted this connection; remote_addr 0: the rkey is zero-based";

}  // namespace rkv

#endif  // RKV_COMMON_VERBS_CONN_PARAMS_H_
