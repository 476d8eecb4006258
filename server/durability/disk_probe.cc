// SPDX-License-Identifier: Apache-2.0
#include "server/durability/disk_probe.h"

#include <algorithm>
#include <memory>

namespace rkv::wal {

Status ProbeDisk(Env* env, const std::string& dir, uint64_t bytes) {
  const std::string path = dir + "/" + kDiskProbeName;
  Status s = env->RemoveFile(path);
  if (!s.ok() && s.code() != Code::kNotFound) return s;
  std::unique_ptr<WritableFile> f;
  s = env->NewWritableFile(path, &f);
  if (!s.ok()) return s;
  static constexpr size_t kChunk = 64 << 10;
  const std::string zeros(kChunk, '\0');
  for (uint64_t left = bytes; left > 0 && s.ok();) {
    const size_t n = static_cast<size_t>(std::min<uint64_t>(left, kChunk));
    s = f->Append(std::string_view(zeros.data(), n));
    left -= n;
  }
  if (s.ok()) s = f->Sync();
  f.reset();
  Status r = env->RemoveFile(path);
  if (!s.ok()) return s;
  return r;
}

}  // namespace rkv::wal
