// SPDX-License-Identifier: Apache-2.0
#include "server/cluster/progress_watch.h"

namespace rkv::cluster {

void ProgressWatch::Saw(const MigrationProgress* p, Clock::time_point now) {
  if (p == nullptr || p->nonce != nonce_) return;
  if (last_ && *last_ == *p) return;
  last_ = *p;
  last_change_ = now;
}

}  // namespace rkv::cluster
