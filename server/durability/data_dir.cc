// SPDX-License-Identifier: Apache-2.0
#include "server/durability/data_dir.h"

#include <algorithm>

namespace rkv::wal {
namespace {

constexpr size_t kDigits = 16;

std::string Hex16(uint64_t v) {
  static constexpr char kHex[] = "0123456789abcdef";
  std::string s(kDigits, '0');
  for (size_t i = kDigits; i-- > 0; v >>= 4) s[i] = kHex[v & 0xf];
  return s;
}

bool ParseNumbered(std::string_view name, std::string_view prefix, std::string_view suffix,
                   uint64_t* number) {
  if (name.size() != prefix.size() + kDigits + suffix.size()) return false;
  if (name.substr(0, prefix.size()) != prefix) return false;
  if (name.substr(prefix.size() + kDigits) != suffix) return false;
  uint64_t v = 0;
  for (char c : name.substr(prefix.size(), kDigits)) {
    uint64_t d;
    if (c >= '0' && c <= '9') {
      d = uint64_t(c - '0');
    } else if (c >= 'a' && c <= 'f') {
      d = uint64_t(c - 'a' + 10);
    } else {
      return false;  // uppercase included: one name per number
    }
    v = v << 4 | d;
  }
  *number = v;
  return true;
}

bool ByNumber(const DataDirListing::File& a, const DataDirListing::File& b) {
  return a.number < b.number;
}

}  // namespace

std::string LogFileName(uint64_t generation) {
  return std::string(kLogPrefix) + Hex16(generation) + std::string(kLogSuffix);
}

std::string SnapshotFileName(uint64_t covered_sequence) {
  return std::string(kSnapshotPrefix) + Hex16(covered_sequence) + std::string(kSnapshotSuffix);
}

std::string TempFileName(std::string_view name) {
  return std::string(name) + std::string(kTempSuffix);
}

std::string JoinPath(std::string_view dir, std::string_view name) {
  std::string path(dir);
  if (!path.empty() && path.back() != '/') path += '/';
  path.append(name.data(), name.size());
  return path;
}

bool ParseLogFileName(std::string_view name, uint64_t* generation) {
  return ParseNumbered(name, kLogPrefix, kLogSuffix, generation);
}

bool ParseSnapshotFileName(std::string_view name, uint64_t* covered_sequence) {
  return ParseNumbered(name, kSnapshotPrefix, kSnapshotSuffix, covered_sequence);
}

Status ListDataDir(Env* env, const std::string& dir, DataDirListing* out) {
  *out = DataDirListing();
  std::vector<std::string> names;
  Status s = env->GetChildren(dir, &names);
  if (!s.ok()) return s;
  for (std::string& name : names) {
    uint64_t n;
    if (ParseLogFileName(name, &n)) {
      out->logs.push_back({n, std::move(name)});
    } else if (ParseSnapshotFileName(name, &n)) {
      out->snapshots.push_back({n, std::move(name)});
    } else {
      const std::string_view v(name);
      const bool temp = v.size() > kTempSuffix.size() &&
                        v.substr(v.size() - kTempSuffix.size()) == kTempSuffix &&
                        (ParseLogFileName(v.substr(0, v.size() - kTempSuffix.size()), &n) ||
                         ParseSnapshotFileName(v.substr(0, v.size() - kTempSuffix.size()), &n));
      (temp ? out->temporaries : out->unknown).push_back(std::move(name));
    }
  }
  std::sort(out->logs.begin(), out->logs.end(), ByNumber);
  std::sort(out->snapshots.begin(), out->snapshots.end(), ByNumber);
  std::sort(out->temporaries.begin(), out->temporaries.end());
  std::sort(out->unknown.begin(), out->unknown.end());
  return Status::Ok();
}

}  // namespace rkv::wal
