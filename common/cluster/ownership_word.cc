// SPDX-License-Identifier: Apache-2.0
#include "common/cluster/ownership_word.h"

namespace rkv::cluster {

const char* SlotStateName(SlotState s) {
  switch (s) {
    case SlotState::kNotOwned:
      return "NOT_OWNED";
    case SlotState::kOwned:
      return "OWNED";
    case SlotState::kMoving:
      return "MOVING";
    case SlotState::kImporting:
      return "IMPORTING";
    case SlotState::kBackup:
      return "BACKUP";
    case SlotState::kPromoting:
      return "PROMOTING";
  }
  return "INVALID";
}

}  // namespace rkv::cluster
