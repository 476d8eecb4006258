// SPDX-License-Identifier: Apache-2.0
#include "server/cluster/progress_reporter.h"

#include <glog/logging.h>

namespace rkv::cluster {

void ProgressReporter::Note(MigrationProgress::Phase phase, uint64_t keys, uint64_t bytes) {
  now_.phase = phase;
  now_.keys = keys;
  now_.bytes = bytes;
  const auto now = std::chrono::steady_clock::now();
  const auto wait = std::chrono::milliseconds(failed_ ? kQuietMs : MigrationProgress::kEveryMs);
  if (put_any_ && (phase == put_phase_ || failed_) && now - put_at_ < wait) return;
  put_any_ = true;
  put_phase_ = phase;
  put_at_ = now;
  if (etcd_ == nullptr) return;
  Status s = etcd_->Put(key_, now_.Encode(), lease_ ? lease_() : 0);
  failed_ = !s.ok();
  if (s.ok()) {
    ++puts_;
  } else {
    LOG_EVERY_N(WARNING, 10) << "migration " << now_.nonce
                             << ": reporting progress: " << s.ToString();
  }
}

}  // namespace rkv::cluster
