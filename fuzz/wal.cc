// SPDX-License-Identifier: Apache-2.0
// Harness: the write-ahead log format (server/durability/log_record.h, log_reader.h) as recovery
// reads a log file from the data directory: DecodeFileHeader on the first 32 bytes (and
// DecodeSnapshotHeader, the same layout), then LogReader over the rest.
// Invariants: an accepted header re-encodes to the input's first 32 bytes; every record the reader
// returns is a PUT or DELETE whose key and value lie inside the input and which EncodeRecord
// reproduces byte for byte at the reader's previous offset (the format is canonical); offsets
// only grow; the walk ends with kEnd exactly at the end of the bytes, a torn tail whose dropped
// bytes reach the end and are either fewer than a maximal record or all zero, or a corruption
// with a message.
#include <algorithm>
#include <string>

#include "fuzz/fuzz_util.h"
#include "server/durability/log_reader.h"
#include "server/durability/log_record.h"

namespace {
using namespace rkv;
using namespace rkv::wal;

void CheckHeaders(std::string_view bytes) {
  uint64_t id = 0;
  std::string error;
  if (DecodeFileHeader(bytes, &id, &error)) {
    std::string h;
    EncodeFileHeader(id, &h);
    FUZZ_CHECK(bytes.substr(0, kFileHeaderSize) == h);
  } else {
    FUZZ_CHECK(!error.empty());
  }
  error.clear();
  if (DecodeSnapshotHeader(bytes, &id, &error)) {
    std::string h;
    EncodeSnapshotHeader(id, &h);
    FUZZ_CHECK(bytes.substr(0, kFileHeaderSize) == h);
  } else {
    FUZZ_CHECK(!error.empty());
  }
}

void CheckRecords(std::string_view bytes) {
  const uint64_t base = kFileHeaderSize;
  LogReader reader(bytes, base);
  const char* begin = bytes.data();
  const char* end = begin + bytes.size();
  uint64_t prev = reader.offset();
  FUZZ_CHECK(prev == base);
  for (size_t n = 0;; ++n) {
    FUZZ_CHECK(n <= bytes.size() / (kRecordHeaderSize + kBodyFixedSize));
    LogRecord r;
    switch (reader.Next(&r)) {
      case LogReader::Result::kRecord: {
        FUZZ_CHECK(r.type == RecordType::kPut || r.type == RecordType::kDelete);
        FUZZ_CHECK(!r.key.empty() && r.key.size() <= kMaxKeySize);
        FUZZ_CHECK(r.value.size() <= kMaxValueSize);
        FUZZ_CHECK(r.type == RecordType::kPut || r.value.empty());
        FUZZ_CHECK(r.key.data() >= begin && r.key.data() + r.key.size() <= end);
        FUZZ_CHECK(r.value.data() >= begin && r.value.data() + r.value.size() <= end);
        const uint64_t at = reader.offset();
        FUZZ_CHECK(at == prev + EncodedSize(r.key.size(), r.value.size()));
        std::string again;
        EncodeRecord(r, &again);
        FUZZ_CHECK(bytes.substr(prev - base, at - prev) == again);
        prev = at;
        break;
      }
      case LogReader::Result::kEnd:
        FUZZ_CHECK(reader.offset() == base + bytes.size() && reader.remaining() == 0);
        return;
      case LogReader::Result::kTornTail: {
        FUZZ_CHECK(reader.offset() == prev && !reader.error().empty());
        FUZZ_CHECK(reader.offset() + reader.remaining() == base + bytes.size());
        FUZZ_CHECK(reader.remaining() > 0);
        const std::string_view rest = bytes.substr(prev - base);
        const bool all_zero = std::all_of(rest.begin(), rest.end(), [](char c) { return !c; });
        FUZZ_CHECK(all_zero || rest.size() < kMaxRecordSize);
        return;
      }
      case LogReader::Result::kCorrupt:
        FUZZ_CHECK(reader.offset() == prev && reader.remaining() > 0);
        FUZZ_CHECK(!reader.error().empty());
        return;
    }
  }
}

void Seeds(const fuzz::SeedWriter& w) {
  std::string log;
  EncodeFileHeader(1, &log);
  w.Write("empty-log", log);
  EncodeRecord({RecordType::kPut, 1, "a", "1"}, &log);
  EncodeRecord({RecordType::kPut, 2, "key-2", std::string(300, 'v')}, &log);
  EncodeRecord({RecordType::kDelete, 3, "a", ""}, &log);
  EncodeRecord({RecordType::kPut, 4, std::string("bin\0key", 7), ""}, &log);
  w.Write("log", log);
  std::string torn = log;
  EncodeRecord({RecordType::kPut, 5, "torn", "tail"}, &torn);
  torn.resize(torn.size() - 3);
  w.Write("torn-tail", torn);
  std::string zeros = log + std::string(64, '\0');
  w.Write("zero-tail", zeros);
  std::string max;
  EncodeFileHeader(7, &max);
  EncodeRecord(
      {RecordType::kPut, 9, std::string(kMaxKeySize, 'k'), std::string(kMaxValueSize, 'x')}, &max);
  w.Write("max-record", max);
  std::string snap;
  EncodeSnapshotHeader(4, &snap);
  EncodeRecord({RecordType::kPut, 2, "key-2", "v"}, &snap);
  EncodeSnapshotEnd(4, 1, 6, &snap);
  w.Write("snapshot-in-log", snap);  // an END record: corruption in a log
}
}  // namespace

RKV_FUZZ_SEEDS(Seeds)

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view bytes = fuzz::AsText(data, size);
  CheckHeaders(bytes);
  CheckRecords(bytes.substr(std::min(size, kFileHeaderSize)));
  return 0;
}
