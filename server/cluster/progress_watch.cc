// SPDX-License-Identifier: Apache-2.0
#include "server/cluster/progress_watch.h"

namespace rkv::cluster {

void ProgressWatch::Saw(bool read_ok, const MigrationProgress* p, Clock::time_point now) {
  if (!read_ok) {
    blind_ = true;
    return;
  }
  if (blind_) {  // etcd is back: the source gets a whole limit to be heard from again
    blind_ = false;
    last_change_ = now;
  }
  if (p == nullptr || p->nonce != nonce_) return;
  if (last_ && *last_ == *p) return;
  last_ = *p;
  last_change_ = now;
}

}  // namespace rkv::cluster
