// SPDX-License-Identifier: Apache-2.0
// CheckPeerGid: manual mode on RoCE (issue 12, exchange hardening): the GID a client puts in its
// parameter record is where the server's QP will send every response, so it must be the address
// the client's control channel (the tcp exchange) comes from. Otherwise a client could aim the
// server's READ responses at a third host. An IPv4 peer must give its IPv4-mapped GID
// (::ffff:a.b.c.d, RoCE v2), an IPv6 peer its own address; any other GID (a link-local RoCE v1
// GID, say) cannot be checked and is refused. InfiniBand records (LID routing) and channels
// without an address (file, etcd: access to them is the check) pass.
// Thread safety: a pure function.
#ifndef RKV_SERVER_PEER_GID_H_
#define RKV_SERVER_PEER_GID_H_

#include <sys/socket.h>

#include "rkv/connection_params.h"
#include "rkv/status.h"

namespace rkv {

// `from`: the control channel's peer address, or null if it has none.
[[nodiscard]] Status CheckPeerGid(const ConnParams& peer, const sockaddr_storage* from);

}  // namespace rkv

#endif  // RKV_SERVER_PEER_GID_H_
