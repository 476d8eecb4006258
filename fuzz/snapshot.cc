// SPDX-License-Identifier: Apache-2.0
// Harness: SnapshotReader (server/durability/snapshot_reader.h), which recovery runs on the
// newest snapshot file of the data directory, over the input as the file's bytes (an in-memory
// Env whose only file is the input).
// Invariants: Open accepts only a header that DecodeSnapshotHeader accepts, and then the covered
// sequence is the header's; every entry is a PUT with key 1..kMaxKeySize and value
// <= kMaxValueSize that EncodeRecord reproduces byte for byte at offset(); offsets grow;
// entries() counts the entries; kEnd only when an END record ends the input exactly; kEnd and
// kCorrupt repeat on the next call; a corruption has a message naming the file.
#include <algorithm>
#include <string>

#include "fuzz/fuzz_util.h"
#include "server/durability/env.h"
#include "server/durability/log_record.h"
#include "server/durability/snapshot_reader.h"

namespace {
using namespace rkv;
using namespace rkv::wal;

constexpr char kPath[] = "/fuzz/input.rkv";  // not a snapshot name: no name check

class MemFile : public SequentialFile {
 public:
  explicit MemFile(std::string_view bytes) : bytes_(bytes) {}
  Status Read(size_t n, std::string* out) override {
    const size_t k = std::min(n, bytes_.size() - pos_);
    out->assign(bytes_.data() + pos_, k);
    pos_ += k;
    return Status::Ok();
  }
  uint64_t Size() const override { return bytes_.size(); }

 private:
  std::string_view bytes_;
  size_t pos_ = 0;
};

// Holds one file, kPath, for reading; everything else fails.
class MemEnv : public Env {
 public:
  explicit MemEnv(std::string_view bytes) : bytes_(bytes) {}
  Status NewSequentialFile(const std::string& path, std::unique_ptr<SequentialFile>* out) override {
    if (path != kPath) return No("open", path);
    out->reset(new MemFile(bytes_));
    return Status::Ok();
  }
  Status ReadFile(const std::string& path, uint64_t max_bytes, std::string* out) override {
    if (path != kPath || bytes_.size() > max_bytes) return No("read", path);
    out->assign(bytes_);
    return Status::Ok();
  }
  Status NewAppendableFile(const std::string& p, std::unique_ptr<WritableFile>*,
                           uint64_t*) override {
    return No("open", p);
  }
  Status NewWritableFile(const std::string& p, std::unique_ptr<WritableFile>*) override {
    return No("open", p);
  }
  Status GetChildren(const std::string& p, std::vector<std::string>*) override {
    return No("opendir", p);
  }
  Status RenameFile(const std::string& p, const std::string&) override { return No("rename", p); }
  Status RemoveFile(const std::string& p) override { return No("unlink", p); }
  Status SyncDir(const std::string& p) override { return No("fsync", p); }
  Status CreateDirIfMissing(const std::string& p) override { return No("mkdir", p); }
  Status TruncateFile(const std::string& p, uint64_t) override { return No("truncate", p); }

 private:
  static Status No(const char* call, const std::string& path) {
    return Status(Code::kIoError, std::string(call) + "(" + path + "): read-only fuzz env");
  }
  std::string_view bytes_;
};

void Seeds(const fuzz::SeedWriter& w) {
  std::string s;
  EncodeSnapshotHeader(0, &s);
  EncodeSnapshotEnd(0, 0, 0, &s);
  w.Write("empty", s);
  s.clear();
  EncodeSnapshotHeader(42, &s);
  uint64_t bytes = 0;
  const std::string big(4000, 'v');
  const std::pair<std::string_view, std::string_view> kv[] = {
      {"a", "1"}, {"key-2", big}, {std::string_view("bin\0key", 7), ""}, {"k", "value"}};
  for (const auto& [k, v] : kv) {
    EncodeRecord({RecordType::kPut, 7, k, v}, &s);
    bytes += k.size() + v.size();
  }
  EncodeSnapshotEnd(42, std::size(kv), bytes, &s);
  w.Write("four-entries", s);
  std::string max;
  EncodeSnapshotHeader(3, &max);
  EncodeRecord(
      {RecordType::kPut, 3, std::string(kMaxKeySize, 'k'), std::string(kMaxValueSize, 'x')}, &max);
  EncodeSnapshotEnd(3, 1, kMaxKeySize + kMaxValueSize, &max);
  w.Write("max-entry", max);
  w.Write("truncated", s.substr(0, s.size() - 5));
}
}  // namespace

RKV_FUZZ_SEEDS(Seeds)

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view bytes = fuzz::AsText(data, size);
  MemEnv env(bytes);
  std::unique_ptr<SnapshotReader> r;
  Status s = SnapshotReader::Open(&env, kPath, &r);
  uint64_t covered = 0;
  std::string why;
  const bool header_ok = DecodeSnapshotHeader(bytes, &covered, &why);
  FUZZ_CHECK(s.ok() == header_ok);
  if (!s.ok()) {
    FUZZ_CHECK(s.message().find(kPath) != std::string::npos);
    return 0;
  }
  FUZZ_CHECK(r->covered_sequence() == covered && r->entries() == 0);
  uint64_t prev = 0, entries = 0;
  for (;;) {
    FUZZ_CHECK(entries <= size / (kRecordHeaderSize + kBodyFixedSize));
    std::string_view key, value;
    SnapshotReader::Result res = r->Next(&key, &value);
    if (res == SnapshotReader::Result::kEntry) {
      ++entries;
      FUZZ_CHECK(r->entries() == entries);
      FUZZ_CHECK(!key.empty() && key.size() <= kMaxKeySize && value.size() <= kMaxValueSize);
      const uint64_t at = r->offset();
      FUZZ_CHECK(at >= kFileHeaderSize && at > prev);
      const size_t len = EncodedSize(key.size(), value.size());
      FUZZ_CHECK(at + len <= size);
      std::string again;
      EncodeRecord({RecordType::kPut, r->sequence(), key, value}, &again);
      FUZZ_CHECK(bytes.substr(at, len) == again);
      prev = at;
      continue;
    }
    std::string_view k2, v2;
    if (res == SnapshotReader::Result::kEnd) {
      FUZZ_CHECK(r->offset() + EncodedSize(0, kSnapshotEndValueSize) == size);
      FUZZ_CHECK(r->entries() == entries);
      FUZZ_CHECK(r->Next(&k2, &v2) == SnapshotReader::Result::kEnd);
    } else {
      FUZZ_CHECK(!r->error().empty() && r->error().find(kPath) != std::string::npos);
      FUZZ_CHECK(r->offset() <= size);
      FUZZ_CHECK(r->Next(&k2, &v2) == SnapshotReader::Result::kCorrupt);
    }
    return 0;
  }
}
