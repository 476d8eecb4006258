// SPDX-License-Identifier: Apache-2.0
// The write-ahead log's format and its reader: round trips, a torn tail cut at every byte offset
// of the last record, zero-filled tails, and corruption in the middle named by offset.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "server/durability/log_reader.h"
#include "server/durability/log_record.h"

namespace rkv::wal {
namespace {

struct Entry {
  RecordType type;
  uint64_t seq;
  std::string key, value;
};

std::vector<Entry> Sample() {
  return {{RecordType::kPut, 1, "a", "1"},
          {RecordType::kPut, 2, "key-2", std::string(5000, 'v')},
          {RecordType::kDelete, 3, "a", ""},
          {RecordType::kPut, 4, std::string("bin\0key", 7), ""},
          {RecordType::kPut, 5, std::string(1024, 'k'), std::string(65536, 'x')}};
}

std::string Encode(const std::vector<Entry>& entries, std::vector<size_t>* starts = nullptr) {
  std::string log;
  for (const Entry& e : entries) {
    if (starts) starts->push_back(log.size());
    EncodeRecord({e.type, e.seq, e.key, e.value}, &log);
  }
  return log;
}

// Reads everything; returns the records and the final result.
LogReader::Result ReadAll(std::vector<Entry>* out, LogReader* reader) {
  LogRecord r;
  for (;;) {
    LogReader::Result res = reader->Next(&r);
    if (res != LogReader::Result::kRecord) return res;
    out->push_back({r.type, r.sequence, std::string(r.key), std::string(r.value)});
  }
}

// out holds the first out.size() records of in, each whole (type, sequence, key, value).
::testing::AssertionResult PrefixOf(const std::vector<Entry>& out, const std::vector<Entry>& in) {
  if (out.size() > in.size())
    return ::testing::AssertionFailure() << out.size() << " records, more than " << in.size();
  for (size_t i = 0; i < out.size(); ++i)
    if (out[i].type != in[i].type || out[i].seq != in[i].seq || out[i].key != in[i].key ||
        out[i].value != in[i].value)
      return ::testing::AssertionFailure() << "record " << i << " differs";
  return ::testing::AssertionSuccess();
}

TEST(Wal, FileHeaderRoundTripAndChecks) {
  std::string h;
  EncodeFileHeader(0x1234, &h);
  ASSERT_EQ(h.size(), kFileHeaderSize);
  uint64_t id = 0;
  std::string err;
  ASSERT_TRUE(DecodeFileHeader(h, &id, &err)) << err;
  EXPECT_EQ(id, 0x1234u);
  EXPECT_FALSE(DecodeFileHeader(h.substr(0, 31), &id, &err));
  std::string bad = h;
  bad[0] = 'X';
  EXPECT_FALSE(DecodeFileHeader(bad, &id, &err));
  EXPECT_NE(err.find("magic"), std::string::npos);
  bad = h;
  bad[17] ^= 1;
  EXPECT_FALSE(DecodeFileHeader(bad, &id, &err));
  EXPECT_NE(err.find("checksum"), std::string::npos);
}

TEST(Wal, RecordsRoundTrip) {
  const std::vector<Entry> in = Sample();
  const std::string log = Encode(in);
  EXPECT_EQ(log.size(), EncodedSize(1, 1) + EncodedSize(5, 5000) + EncodedSize(1, 0) +
                            EncodedSize(7, 0) + EncodedSize(1024, 65536));
  LogReader reader(log, kFileHeaderSize);
  std::vector<Entry> out;
  ASSERT_EQ(ReadAll(&out, &reader), LogReader::Result::kEnd);
  ASSERT_EQ(out.size(), in.size());
  for (size_t i = 0; i < in.size(); ++i) {
    EXPECT_EQ(out[i].type, in[i].type);
    EXPECT_EQ(out[i].seq, in[i].seq);
    EXPECT_EQ(out[i].key, in[i].key);
    EXPECT_EQ(out[i].value, in[i].value);
  }
  EXPECT_EQ(reader.offset(), kFileHeaderSize + log.size());
}

// A crash during the append of the last record leaves any prefix of it: every cut is a torn
// tail at the last record's start (or a clean end when the cut falls on its boundary), and the
// records before it are all returned.
TEST(Wal, TornTailAtEveryByteOffsetOfTheLastRecord) {
  std::vector<Entry> in = Sample();
  in.back().value = std::string(3000, 'x');  // keep the loop short
  std::vector<size_t> starts;
  const std::string log = Encode(in, &starts);
  const size_t last = starts.back();
  for (size_t cut = last; cut <= log.size(); ++cut) {
    const std::string_view bytes(log.data(), cut);
    LogReader reader(bytes, kFileHeaderSize);
    std::vector<Entry> out;
    LogReader::Result res = ReadAll(&out, &reader);
    ASSERT_TRUE(PrefixOf(out, in)) << cut;
    if (cut == last) {
      ASSERT_EQ(res, LogReader::Result::kEnd) << cut;
      ASSERT_EQ(out.size(), in.size() - 1);
    } else if (cut == log.size()) {
      ASSERT_EQ(res, LogReader::Result::kEnd) << cut;
      ASSERT_EQ(out.size(), in.size());
    } else {
      ASSERT_EQ(res, LogReader::Result::kTornTail) << cut << ": " << reader.error();
      ASSERT_EQ(out.size(), in.size() - 1) << cut;
      ASSERT_EQ(reader.offset(), kFileHeaderSize + last);
      ASSERT_EQ(reader.remaining(), cut - last);
      ASSERT_NE(reader.error().find("offset " + std::to_string(kFileHeaderSize + last)),
                std::string::npos)
          << reader.error();
    }
  }
}

TEST(Wal, ZeroFilledTailIsTorn) {
  std::string log = Encode(Sample());
  const size_t valid = log.size();
  log.append(4096, '\0');  // a crash after the file grew, before the data reached it
  LogReader reader(log, 0);
  std::vector<Entry> out;
  EXPECT_EQ(ReadAll(&out, &reader), LogReader::Result::kTornTail);
  EXPECT_EQ(out.size(), Sample().size());
  EXPECT_TRUE(PrefixOf(out, Sample()));
  EXPECT_EQ(reader.offset(), valid);
  EXPECT_EQ(reader.remaining(), 4096u);
}

// A bad byte inside a complete record that more data follows is corruption, not a tear: the
// reader stops at that record's offset and says so.
TEST(Wal, CorruptionInTheMiddleIsRefusedWithItsOffset) {
  const std::vector<Entry> in = Sample();
  std::vector<size_t> starts;
  const std::string log = Encode(in, &starts);
  for (size_t victim = 0; victim + 1 < in.size(); ++victim) {
    const size_t record_bytes = starts[victim + 1] - starts[victim];
    for (size_t at : {size_t{4}, size_t{12}, size_t{16}, record_bytes - 1}) {
      std::string bad = log;
      bad[starts[victim] + at] ^= 0x20;
      LogReader reader(bad, kFileHeaderSize);
      std::vector<Entry> out;
      ASSERT_EQ(ReadAll(&out, &reader), LogReader::Result::kCorrupt)
          << "record " << victim << " byte " << at << ": " << reader.error();
      EXPECT_EQ(out.size(), victim);
      EXPECT_TRUE(PrefixOf(out, in)) << "record " << victim << " byte " << at;
      EXPECT_EQ(reader.offset(), kFileHeaderSize + starts[victim]);
      EXPECT_NE(reader.error().find("offset " + std::to_string(kFileHeaderSize + starts[victim])),
                std::string::npos);
    }
  }
}

TEST(Wal, ImpossibleLengthInTheMiddleIsCorruption) {
  std::vector<size_t> starts;
  std::string log = Encode(Sample(), &starts);
  // The first record's length says 3 bytes (below the fixed body), with lots of data after it.
  log[starts[0]] = 3;
  log[starts[0] + 1] = log[starts[0] + 2] = log[starts[0] + 3] = 0;
  LogReader reader(log, 0);
  std::vector<Entry> out;
  EXPECT_EQ(ReadAll(&out, &reader), LogReader::Result::kCorrupt) << reader.error();
  // A huge length with more than a maximal record after it cannot be a torn append either.
  std::string big;
  for (int i = 0; i < 3; ++i) big += Encode(Sample());
  big[0] = big[1] = big[2] = big[3] = char(0xff);
  LogReader r2(big, 0);
  out.clear();
  EXPECT_EQ(ReadAll(&out, &r2), LogReader::Result::kCorrupt) << r2.error();
}

}  // namespace
}  // namespace rkv::wal
