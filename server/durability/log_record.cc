// SPDX-License-Identifier: Apache-2.0
#include "server/durability/log_record.h"

#include <xxhash.h>

#include <cstring>

namespace rkv::wal {
namespace {
template <typename T>
void Put(std::string* out, T v) {
  char b[sizeof(T)];
  std::memcpy(b, &v, sizeof(T));  // little-endian hosts only (x86-64, aarch64): static_assert'ed
  out->append(b, sizeof(T));
}
template <typename T>
T Get(const char* p) {
  T v;
  std::memcpy(&v, p, sizeof(T));
  return v;
}
static_assert(__BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__, "the log format is little-endian");
static_assert(sizeof kLogMagic + 4 + 4 + 8 + 8 == kFileHeaderSize, "file header layout");
static_assert(sizeof kSnapshotMagic == sizeof kLogMagic, "snapshot header layout");
static_assert(kRecordHeaderSize == 4 + 8, "record header: u32 length, u64 checksum");
static_assert(kBodyFixedSize == 1 + 3 + 8 + 4 + 4, "body: type, reserved, sequence, sizes");
static_assert(kSnapshotEndValueSize == 2 * sizeof(uint64_t), "END value: entries, bytes");

// The shared header layout: magic, u32 version, u32 reserved, u64 id, u64 XXH3 of bytes 0..23.
void EncodeHeader(const char (&magic)[8], uint32_t version, uint64_t seed, uint64_t id,
                  std::string* out) {
  const size_t start = out->size();
  out->append(magic, sizeof magic);
  Put<uint32_t>(out, version);
  Put<uint32_t>(out, 0);
  Put<uint64_t>(out, id);
  Put<uint64_t>(out, XXH3_64bits_withSeed(out->data() + start, 24, seed));
}

bool DecodeHeader(std::string_view b, const char (&magic)[8], uint32_t version, uint64_t seed,
                  const char* what, uint64_t* id, std::string* error) {
  if (b.size() < kFileHeaderSize) {
    *error = "file header is " + std::to_string(b.size()) + " bytes, expected " +
             std::to_string(kFileHeaderSize);
    return false;
  }
  if (std::memcmp(b.data(), magic, sizeof magic) != 0) {
    *error = std::string("not an rkv ") + what + " (bad magic)";
    return false;
  }
  if (Get<uint64_t>(b.data() + 24) != XXH3_64bits_withSeed(b.data(), 24, seed)) {
    *error = "file header checksum mismatch";
    return false;
  }
  const uint32_t v = Get<uint32_t>(b.data() + 8);
  if (v != version) {
    *error = std::string(what) + " format version " + std::to_string(v) + ", this kvserver reads " +
             std::to_string(version);
    return false;
  }
  if (Get<uint32_t>(b.data() + 12) != 0) {
    *error = "file header reserved field is not 0";
    return false;
  }
  *id = Get<uint64_t>(b.data() + 16);
  return true;
}
}  // namespace

void EncodeFileHeader(uint64_t log_id, std::string* out) {
  EncodeHeader(kLogMagic, kLogFormatVersion, kLogSeed, log_id, out);
}

bool DecodeFileHeader(std::string_view b, uint64_t* log_id, std::string* error) {
  return DecodeHeader(b, kLogMagic, kLogFormatVersion, kLogSeed, "write-ahead log", log_id, error);
}

void EncodeSnapshotHeader(uint64_t covered_sequence, std::string* out) {
  EncodeHeader(kSnapshotMagic, kSnapshotFormatVersion, kSnapshotSeed, covered_sequence, out);
}

bool DecodeSnapshotHeader(std::string_view b, uint64_t* covered_sequence, std::string* error) {
  return DecodeHeader(b, kSnapshotMagic, kSnapshotFormatVersion, kSnapshotSeed, "snapshot",
                      covered_sequence, error);
}

void EncodeRecord(const LogRecord& r, std::string* out) {
  const uint32_t body = uint32_t(kBodyFixedSize + r.key.size() + r.value.size());
  Put<uint32_t>(out, body);
  const size_t sum_at = out->size();
  Put<uint64_t>(out, 0);  // checksum, filled below
  const size_t body_at = out->size();
  Put<uint8_t>(out, static_cast<uint8_t>(r.type));
  out->append(3, '\0');
  Put<uint64_t>(out, r.sequence);
  Put<uint32_t>(out, uint32_t(r.key.size()));
  Put<uint32_t>(out, uint32_t(r.value.size()));
  out->append(r.key.data(), r.key.size());
  out->append(r.value.data(), r.value.size());
  const uint64_t sum = XXH3_64bits_withSeed(out->data() + body_at, body, kLogSeed);
  std::memcpy(&(*out)[sum_at], &sum, 8);
}

void EncodeSnapshotEnd(uint64_t covered_sequence, uint64_t entries, uint64_t bytes,
                       std::string* out) {
  std::string value;
  Put<uint64_t>(&value, entries);
  Put<uint64_t>(&value, bytes);
  EncodeRecord({RecordType::kSnapshotEnd, covered_sequence, std::string_view(), value}, out);
}

void DecodeSnapshotEndValue(std::string_view value, uint64_t* entries, uint64_t* bytes) {
  *entries = Get<uint64_t>(value.data());
  *bytes = Get<uint64_t>(value.data() + 8);
}

uint32_t RecordBodySize(const char* p) { return Get<uint32_t>(p); }

RecordCheck CheckRecord(std::string_view bytes, LogRecord* record) {
  const char* p = bytes.data();
  const uint32_t body = RecordBodySize(p);
  const char* b = p + kRecordHeaderSize;
  if (Get<uint64_t>(p + 4) != XXH3_64bits_withSeed(b, body, kLogSeed))
    return RecordCheck::kBadChecksum;
  const uint8_t type = static_cast<uint8_t>(b[0]);
  const uint32_t ks = Get<uint32_t>(b + 12), vs = Get<uint32_t>(b + 16);
  if (b[1] || b[2] || b[3] || kBodyFixedSize + uint64_t(ks) + vs != body)
    return RecordCheck::kBadFields;
  switch (type) {
    case uint8_t(RecordType::kPut):
      if (ks == 0 || ks > kMaxKeySize || vs > kMaxValueSize) return RecordCheck::kBadFields;
      break;
    case uint8_t(RecordType::kDelete):
      if (ks == 0 || ks > kMaxKeySize || vs != 0) return RecordCheck::kBadFields;
      break;
    case uint8_t(RecordType::kSnapshotEnd):
      if (ks != 0 || vs != kSnapshotEndValueSize) return RecordCheck::kBadFields;
      break;
    default:
      return RecordCheck::kBadFields;
  }
  record->type = static_cast<RecordType>(type);
  record->sequence = Get<uint64_t>(b + 4);
  record->key = std::string_view(b + kBodyFixedSize, ks);
  record->value = std::string_view(b + kBodyFixedSize + ks, vs);
  return RecordCheck::kOk;
}

}  // namespace rkv::wal
