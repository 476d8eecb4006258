// SPDX-License-Identifier: Apache-2.0
#include "server/durability/env.h"

#include <utility>

namespace rkv::wal {
namespace {

// The fallback ReadOnlyFile: the bytes read into memory.
class StringFile : public ReadOnlyFile {
 public:
  explicit StringFile(std::string bytes) : bytes_(std::move(bytes)) {}
  std::string_view data() const override { return bytes_; }

 private:
  const std::string bytes_;
};

}  // namespace

Status Env::OpenReadOnly(const std::string& path, uint64_t max_bytes,
                         std::unique_ptr<ReadOnlyFile>* out) {
  std::string bytes;
  Status s = ReadFile(path, max_bytes, &bytes);
  if (!s.ok()) return s;
  out->reset(new StringFile(std::move(bytes)));
  return Status::Ok();
}

}  // namespace rkv::wal
