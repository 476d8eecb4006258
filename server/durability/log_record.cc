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
}  // namespace

void EncodeFileHeader(uint64_t log_id, std::string* out) {
  const size_t start = out->size();
  out->append(kLogMagic, sizeof kLogMagic);
  Put<uint32_t>(out, kLogFormatVersion);
  Put<uint32_t>(out, 0);
  Put<uint64_t>(out, log_id);
  Put<uint64_t>(out, XXH3_64bits_withSeed(out->data() + start, 24, kLogSeed));
}

bool DecodeFileHeader(std::string_view b, uint64_t* log_id, std::string* error) {
  if (b.size() < kFileHeaderSize) {
    *error = "file header is " + std::to_string(b.size()) + " bytes, expected " +
             std::to_string(kFileHeaderSize);
    return false;
  }
  if (std::memcmp(b.data(), kLogMagic, sizeof kLogMagic) != 0) {
    *error = "not an rkv write-ahead log (bad magic)";
    return false;
  }
  if (Get<uint64_t>(b.data() + 24) != XXH3_64bits_withSeed(b.data(), 24, kLogSeed)) {
    *error = "file header checksum mismatch";
    return false;
  }
  const uint32_t version = Get<uint32_t>(b.data() + 8);
  if (version != kLogFormatVersion) {
    *error = "log format version " + std::to_string(version) + ", this kvserver reads " +
             std::to_string(kLogFormatVersion);
    return false;
  }
  *log_id = Get<uint64_t>(b.data() + 16);
  return true;
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

}  // namespace rkv::wal
