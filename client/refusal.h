// SPDX-License-Identifier: Apache-2.0
// Which of the server's connection refusals pass by themselves (so rkv::Client::Connect
// retries them within connect_timeout_ms) and which last (returned to the caller at once).
// Passing: BUSY for the source's setup share (--max_pending_per_source: the earlier connects
// open within milliseconds) and BUSY for the source's connection cap while some of those
// connections are still being torn down (the refusal says so, wire::kBusyStillClosing).
// Lasting: every other refusal (the cap held by live connections, the attempt rate, the
// server-wide caps, authentication).
// Thread safety: a pure function. The text is the server's (untrusted): only searched.
#ifndef RKV_CLIENT_REFUSAL_H_
#define RKV_CLIENT_REFUSAL_H_

#include <string_view>

namespace rkv {

// `message`: the Status message of a Code::kBusy connect failure.
bool PassingRefusal(std::string_view message);

}  // namespace rkv

#endif  // RKV_CLIENT_REFUSAL_H_
