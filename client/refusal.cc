// SPDX-License-Identifier: Apache-2.0
#include "client/refusal.h"

#include "common/wire.h"

namespace rkv {

bool PassingRefusal(std::string_view message) {
  constexpr std::string_view kPendingCap = "--max_pending_per_source";
  constexpr std::string_view kConnCap = "--max_conns_per_source";
  if (message.find(kPendingCap) != std::string_view::npos) return true;
  return message.find(kConnCap) != std::string_view::npos &&
         message.find(wire::kBusyStillClosing) != std::string_view::npos;
}

}  // namespace rkv
