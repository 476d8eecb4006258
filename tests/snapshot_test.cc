// SPDX-License-Identifier: Apache-2.0
// Snapshots (server/durability/snapshot_writer.h, snapshot_reader.h), the data directory's names
// (data_dir.h) and the POSIX Env's file operations, on real files in a temporary directory:
// round trips; a snapshot cut at every byte of its last record and of its END, or with one byte
// flipped, is corrupt at the right offset (never complete); a full disk, a failing sync or rename
// leave nothing behind (tests/fault_env.h); FIFOs and symlinks are refused without blocking.
#include <errno.h>
#include <fcntl.h>
#include <gtest/gtest.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <future>
#include <memory>
#include <string>
#include <vector>

#include "server/durability/data_dir.h"
#include "server/durability/env.h"
#include "server/durability/log_reader.h"
#include "server/durability/log_record.h"
#include "server/durability/snapshot_reader.h"
#include "server/durability/snapshot_writer.h"
#include "tests/fault_env.h"

namespace rkv::wal {
namespace {

class TempDir {
 public:
  TempDir() {
    const char* base = getenv("TMPDIR");
    std::string tmpl = std::string(base && *base ? base : "/tmp") + "/rkv-snapshot-test.XXXXXX";
    if (mkdtemp(&tmpl[0]) != nullptr) path_ = tmpl;
  }
  ~TempDir() {
    std::error_code ec;
    if (!path_.empty()) std::filesystem::remove_all(path_, ec);
  }
  const std::string& path() const { return path_; }
  std::string operator/(const std::string& name) const { return JoinPath(path_, name); }
  std::vector<std::string> Names() const {
    std::vector<std::string> names;
    EXPECT_TRUE(Env::Posix()->GetChildren(path_, &names).ok());
    std::sort(names.begin(), names.end());
    return names;
  }

 private:
  std::string path_;
};

struct Entry {
  std::string key, value;
  uint64_t seq = 0;
};

std::vector<Entry> MixedEntries(size_t n) {
  std::vector<Entry> out;
  for (size_t i = 0; i < n; ++i) {
    Entry e;
    e.key = "key-" + std::to_string(i);
    if (i % 997 == 3) e.key = std::string(kMaxKeySize - 1, 'k') + char('a' + i % 26);  // max key
    size_t vs = (i * 7919) % 3001;
    if (i % 13 == 0) vs = 0;
    if (i % 611 == 7) vs = kMaxValueSize;
    e.value.resize(vs);
    for (size_t j = 0; j < vs; ++j) e.value[j] = char((i * 31 + j) & 0xff);
    e.seq = i % 3 == 0 ? 0 : 1000 + i;
    out.push_back(std::move(e));
  }
  out.push_back({std::string(kMaxKeySize, 'K'), std::string(kMaxValueSize, 'V'), 7});
  out.push_back({std::string("bin\0key", 7), "", 8});
  return out;
}

Status WriteSnapshot(Env* env, const std::string& dir, uint64_t seq,
                     const std::vector<Entry>& entries, std::string* path = nullptr) {
  std::unique_ptr<SnapshotWriter> w;
  Status s = SnapshotWriter::Create(env, dir, seq, &w);
  if (!s.ok()) return s;
  if (path) *path = w->path();
  for (const Entry& e : entries) {
    s = w->Add(e.key, e.value, e.seq);
    if (!s.ok()) return s;
  }
  return w->Finish();
}

// Reads every entry; returns the final result.
SnapshotReader::Result ReadAll(SnapshotReader* r, std::vector<Entry>* out) {
  std::string_view k, v;
  for (;;) {
    SnapshotReader::Result res = r->Next(&k, &v);
    if (res != SnapshotReader::Result::kEntry) return res;
    out->push_back({std::string(k), std::string(v), r->sequence()});
  }
}

// out holds the first out.size() entries of in, each whole (key, value, sequence).
::testing::AssertionResult PrefixOf(const std::vector<Entry>& out, const std::vector<Entry>& in) {
  if (out.size() > in.size())
    return ::testing::AssertionFailure() << out.size() << " entries, more than " << in.size();
  for (size_t i = 0; i < out.size(); ++i)
    if (out[i].key != in[i].key || out[i].value != in[i].value || out[i].seq != in[i].seq)
      return ::testing::AssertionFailure() << "entry " << i << " differs";
  return ::testing::AssertionSuccess();
}

std::string ReadBytes(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(f), std::istreambuf_iterator<char>());
}

void WriteBytes(const std::string& path, std::string_view bytes) {
  std::ofstream f(path, std::ios::binary | std::ios::trunc);
  f.write(bytes.data(), std::streamsize(bytes.size()));
}

// Offsets at which each record of a snapshot of `entries` starts, then the END's, then the size.
std::vector<size_t> RecordStarts(const std::vector<Entry>& entries) {
  std::vector<size_t> starts;
  size_t at = kFileHeaderSize;
  for (const Entry& e : entries) {
    starts.push_back(at);
    at += EncodedSize(e.key.size(), e.value.size());
  }
  starts.push_back(at);
  starts.push_back(at + EncodedSize(0, kSnapshotEndValueSize));
  return starts;
}

TEST(Snapshot, RoundTripOfZeroOneAndManyEntries) {
  TempDir dir;
  ASSERT_FALSE(dir.path().empty());
  const std::vector<Entry> many = MixedEntries(5000);
  for (const std::vector<Entry>& in :
       {std::vector<Entry>{}, std::vector<Entry>{{"k", "v", 3}}, many}) {
    const uint64_t seq = 0x1234 + in.size();
    std::unique_ptr<SnapshotWriter> w;
    ASSERT_TRUE(SnapshotWriter::Create(Env::Posix(), dir.path(), seq, &w).ok());
    EXPECT_EQ(w->path(), dir / SnapshotFileName(seq));
    EXPECT_EQ(w->temp_path(), w->path() + ".tmp");
    for (const Entry& e : in) ASSERT_TRUE(w->Add(e.key, e.value, e.seq).ok());
    EXPECT_EQ(w->entries(), in.size());
    ASSERT_TRUE(w->Finish().ok());
    EXPECT_TRUE(w->finished());
    EXPECT_FALSE(w->Add("x", "y").ok());  // finished
    // The final file exists, the temporary is gone, and the size is what was counted.
    struct stat st;
    ASSERT_EQ(stat(w->path().c_str(), &st), 0);
    EXPECT_EQ(uint64_t(st.st_size), w->bytes_written());
    EXPECT_EQ(uint64_t(st.st_size), RecordStarts(in).back());
    EXPECT_NE(stat(w->temp_path().c_str(), &st), 0);
    const std::string path = w->path();
    w.reset();
    EXPECT_EQ(stat(path.c_str(), &st), 0);  // the destructor leaves a finished snapshot alone

    std::unique_ptr<SnapshotReader> r;
    ASSERT_TRUE(SnapshotReader::Open(Env::Posix(), path, &r).ok());
    EXPECT_EQ(r->covered_sequence(), seq);
    std::vector<Entry> out;
    ASSERT_EQ(ReadAll(r.get(), &out), SnapshotReader::Result::kEnd) << r->error();
    ASSERT_EQ(out.size(), in.size());
    for (size_t i = 0; i < in.size(); ++i) {
      ASSERT_EQ(out[i].key, in[i].key) << i;
      ASSERT_EQ(out[i].value, in[i].value) << i;
      ASSERT_EQ(out[i].seq, in[i].seq) << i;
    }
    EXPECT_EQ(r->offset(), RecordStarts(in)[in.size()]);  // the END record
    std::string_view k, v;
    EXPECT_EQ(r->Next(&k, &v), SnapshotReader::Result::kEnd);  // stays at the end
  }
  EXPECT_EQ(dir.Names(),
            (std::vector<std::string>{SnapshotFileName(0x1234), SnapshotFileName(0x1235),
                                      SnapshotFileName(0x1234 + many.size())}));
}

TEST(Snapshot, WriterDestroyedWithoutFinishLeavesNothing) {
  TempDir dir;
  const std::vector<Entry> in = MixedEntries(2000);  // several flushes
  {
    std::unique_ptr<SnapshotWriter> w;
    ASSERT_TRUE(SnapshotWriter::Create(Env::Posix(), dir.path(), 9, &w).ok());
    for (const Entry& e : in) ASSERT_TRUE(w->Add(e.key, e.value).ok());
    EXPECT_GT(w->bytes_written(), 2 * SnapshotWriter::kFlushBytes);
    EXPECT_EQ(dir.Names(), std::vector<std::string>{TempFileName(SnapshotFileName(9))});
  }
  EXPECT_TRUE(dir.Names().empty());
}

TEST(Snapshot, StaleTemporaryIsReplacedAndASnapshotOfTheSameSequenceToo) {
  TempDir dir;
  WriteBytes(dir / TempFileName(SnapshotFileName(5)), "junk from a crash");
  ASSERT_TRUE(WriteSnapshot(Env::Posix(), dir.path(), 5, {{"a", "1"}}).ok());
  ASSERT_TRUE(WriteSnapshot(Env::Posix(), dir.path(), 5, {{"b", "2"}, {"c", "3"}}).ok());
  EXPECT_EQ(dir.Names(), std::vector<std::string>{SnapshotFileName(5)});
  std::unique_ptr<SnapshotReader> r;
  ASSERT_TRUE(SnapshotReader::Open(Env::Posix(), dir / SnapshotFileName(5), &r).ok());
  std::vector<Entry> out;
  ASSERT_EQ(ReadAll(r.get(), &out), SnapshotReader::Result::kEnd) << r->error();
  ASSERT_EQ(out.size(), 2u);
  EXPECT_TRUE(PrefixOf(out, {{"b", "2", 0}, {"c", "3", 0}}));
}

TEST(Snapshot, InvalidEntryKillsTheWriter) {
  TempDir dir;
  std::unique_ptr<SnapshotWriter> w;
  ASSERT_TRUE(SnapshotWriter::Create(Env::Posix(), dir.path(), 1, &w).ok());
  Status s = w->Add("", "v");
  EXPECT_EQ(s.code(), Code::kInvalidArgument);
  EXPECT_FALSE(w->Add("k", "v").ok());
  EXPECT_FALSE(w->Finish().ok());
  EXPECT_TRUE(dir.Names().empty());
  ASSERT_TRUE(SnapshotWriter::Create(Env::Posix(), dir.path(), 2, &w).ok());
  EXPECT_FALSE(w->Add(std::string(kMaxKeySize + 1, 'k'), "").ok());
  ASSERT_TRUE(SnapshotWriter::Create(Env::Posix(), dir.path(), 3, &w).ok());
  EXPECT_FALSE(w->Add("k", std::string(kMaxValueSize + 1, 'v')).ok());
  w.reset();
  EXPECT_TRUE(dir.Names().empty());
}

// A cut anywhere in the last entry record or in the END record is never a complete snapshot;
// the defect is at the start of the record the cut falls in.
TEST(Snapshot, TruncationAtEveryByteOfTheLastRecordAndTheEndIsCorrupt) {
  TempDir dir;
  std::vector<Entry> in = {
      {"a", "1"}, {"bb", std::string(100, 'b')}, {"last", std::string(700, 'x')}};
  std::string path;
  ASSERT_TRUE(WriteSnapshot(Env::Posix(), dir.path(), 77, in, &path).ok());
  const std::string full = ReadBytes(path);
  const std::vector<size_t> starts = RecordStarts(in);
  ASSERT_EQ(full.size(), starts.back());
  const size_t last = starts[in.size() - 1], end_record = starts[in.size()];
  const std::string cut_path = dir / "cut.rkv";
  for (size_t cut = last; cut < full.size(); ++cut) {
    WriteBytes(cut_path, std::string_view(full).substr(0, cut));
    std::unique_ptr<SnapshotReader> r;
    ASSERT_TRUE(SnapshotReader::Open(Env::Posix(), cut_path, &r).ok());
    std::vector<Entry> out;
    ASSERT_EQ(ReadAll(r.get(), &out), SnapshotReader::Result::kCorrupt) << cut;
    const size_t bad = cut < end_record ? last : end_record;
    ASSERT_EQ(r->offset(), bad) << cut << ": " << r->error();
    ASSERT_EQ(out.size(), cut < end_record ? in.size() - 1 : in.size()) << cut;
    ASSERT_TRUE(PrefixOf(out, in)) << cut;
    ASSERT_NE(r->error().find(cut_path), std::string::npos) << r->error();
    ASSERT_NE(r->error().find("offset " + std::to_string(bad)), std::string::npos) << r->error();
  }
  // A cut inside the header fails at Open.
  for (size_t cut : {size_t{0}, size_t{8}, kFileHeaderSize - 1}) {
    WriteBytes(cut_path, std::string_view(full).substr(0, cut));
    std::unique_ptr<SnapshotReader> r;
    Status s = SnapshotReader::Open(Env::Posix(), cut_path, &r);
    EXPECT_FALSE(s.ok()) << cut;
    EXPECT_NE(s.message().find(cut_path + " at offset 0"), std::string::npos) << s.message();
  }
}

TEST(Snapshot, FlippedByteIsCorruptAtItsRecord) {
  TempDir dir;
  const std::vector<Entry> in = MixedEntries(40);
  std::string path;
  ASSERT_TRUE(WriteSnapshot(Env::Posix(), dir.path(), 500, in, &path).ok());
  const std::string full = ReadBytes(path);
  const std::vector<size_t> starts = RecordStarts(in);
  const std::string bad_path = dir / "bad.rkv";
  // In the header: Open refuses, naming offset 0.
  for (size_t at : {0, 7, 8, 12, 16, 23, 24, 31}) {
    std::string bad = full;
    bad[at] ^= 0x04;
    WriteBytes(bad_path, bad);
    std::unique_ptr<SnapshotReader> r;
    Status s = SnapshotReader::Open(Env::Posix(), bad_path, &r);
    EXPECT_EQ(s.code(), Code::kIoError) << at;
    EXPECT_NE(s.message().find(bad_path + " at offset 0"), std::string::npos) << s.message();
  }
  // In a middle record, the first one and the END record.
  for (size_t victim : {size_t{0}, size_t{17}, in.size()}) {
    const size_t record_bytes = starts[victim + 1] - starts[victim];
    for (size_t at : {size_t{0}, size_t{3}, size_t{4}, size_t{12}, size_t{13}, size_t{16},
                      size_t{24}, size_t{28}, record_bytes - 1}) {
      std::string bad = full;
      bad[starts[victim] + at] ^= 0x20;
      WriteBytes(bad_path, bad);
      std::unique_ptr<SnapshotReader> r;
      ASSERT_TRUE(SnapshotReader::Open(Env::Posix(), bad_path, &r).ok());
      std::vector<Entry> out;
      ASSERT_EQ(ReadAll(r.get(), &out), SnapshotReader::Result::kCorrupt)
          << "record " << victim << " byte " << at;
      EXPECT_EQ(out.size(), victim);
      EXPECT_TRUE(PrefixOf(out, in)) << "record " << victim << " byte " << at;
      EXPECT_EQ(r->offset(), starts[victim]) << r->error();
      EXPECT_NE(r->error().find(bad_path + " at offset " + std::to_string(starts[victim])),
                std::string::npos)
          << r->error();
    }
  }
}

// Snapshots built by hand: each one is well formed record by record but not a complete snapshot.
TEST(Snapshot, WrongEndOrRecordTypeIsCorrupt) {
  TempDir dir;
  std::string head;
  EncodeSnapshotHeader(10, &head);
  std::string a;
  EncodeRecord({RecordType::kPut, 0, "a", "12"}, &a);
  const size_t after_a = kFileHeaderSize + a.size();
  struct Case {
    const char* what;
    std::string bytes;
    size_t offset;
  };
  std::vector<Case> cases;
  auto end = [](uint64_t seq, uint64_t n, uint64_t bytes) {
    std::string e;
    EncodeSnapshotEnd(seq, n, bytes, &e);
    return e;
  };
  std::string del;
  EncodeRecord({RecordType::kDelete, 0, "a", ""}, &del);
  cases.push_back({"no END", head + a, after_a});
  cases.push_back({"wrong count", head + a + end(10, 2, 3), after_a});
  cases.push_back({"wrong bytes", head + a + end(10, 1, 4), after_a});
  cases.push_back({"wrong sequence", head + a + end(11, 1, 3), after_a});
  cases.push_back({"a DELETE", head + a + del + end(10, 2, 4), after_a});
  cases.push_back({"two ENDs", head + a + end(10, 1, 3) + end(10, 1, 3),
                   after_a + EncodedSize(0, kSnapshotEndValueSize)});
  cases.push_back({"a zero byte after END", head + a + end(10, 1, 3) + std::string(1, '\0'),
                   after_a + EncodedSize(0, kSnapshotEndValueSize)});
  cases.push_back({"a zero-filled tail", head + a + std::string(4096, '\0'), after_a});
  for (const Case& c : cases) {
    WriteBytes(dir / "hand.rkv", c.bytes);
    std::unique_ptr<SnapshotReader> r;
    ASSERT_TRUE(SnapshotReader::Open(Env::Posix(), dir / "hand.rkv", &r).ok());
    std::vector<Entry> out;
    EXPECT_EQ(ReadAll(r.get(), &out), SnapshotReader::Result::kCorrupt) << c.what;
    EXPECT_EQ(r->offset(), c.offset) << c.what << ": " << r->error();
    printf("%s: %s\n", c.what, r->error().c_str());
  }
  // The control: the same with a correct END is complete.
  WriteBytes(dir / "hand.rkv", head + a + end(10, 1, 3));
  std::unique_ptr<SnapshotReader> r;
  ASSERT_TRUE(SnapshotReader::Open(Env::Posix(), dir / "hand.rkv", &r).ok());
  std::vector<Entry> out;
  EXPECT_EQ(ReadAll(r.get(), &out), SnapshotReader::Result::kEnd) << r->error();
  // A snapshot renamed to another sequence's name is refused.
  WriteBytes(dir / SnapshotFileName(11), head + a + end(10, 1, 3));
  Status s = SnapshotReader::Open(Env::Posix(), dir / SnapshotFileName(11), &r);
  EXPECT_FALSE(s.ok());
  EXPECT_NE(s.message().find("covers sequence 10"), std::string::npos) << s.message();
  // A write-ahead log is not a snapshot.
  std::string log;
  EncodeFileHeader(10, &log);
  WriteBytes(dir / "wal.rkv", log + a);
  s = SnapshotReader::Open(Env::Posix(), dir / "wal.rkv", &r);
  EXPECT_NE(s.message().find("magic"), std::string::npos) << s.message();
}

void ExpectNothingLeft(const TempDir& dir, const Status& s, const std::string& call) {
  EXPECT_EQ(s.code(), Code::kIoError);
  EXPECT_NE(s.message().find(call), std::string::npos) << s.message();
  EXPECT_NE(s.message().find(SnapshotFileName(42)), std::string::npos) << s.message();
  EXPECT_TRUE(dir.Names().empty()) << dir.Names()[0];
}

TEST(Snapshot, FullDiskOnAppendLeavesNothing) {
  TempDir dir;
  FaultEnv env(Env::Posix());
  env.SetSpace(300 * 1024);  // the first 1 MiB flush hits the full disk
  std::unique_ptr<SnapshotWriter> w;
  ASSERT_TRUE(SnapshotWriter::Create(&env, dir.path(), 42, &w).ok());
  Status s;
  const std::vector<Entry> in = MixedEntries(2000);
  size_t added = 0;
  for (const Entry& e : in) {
    s = w->Add(e.key, e.value);
    if (!s.ok()) break;
    ++added;
  }
  ExpectNothingLeft(dir, s, "No space left on device");
  EXPECT_LT(added, in.size());
  EXPECT_EQ(w->Add("k", "v").message(), s.message());  // dead
  EXPECT_EQ(w->Finish().message(), s.message());
  w.reset();
  EXPECT_TRUE(dir.Names().empty());

  // A small snapshot whose only write, at Finish, does not fit.
  env.SetSpace(40);
  ASSERT_TRUE(SnapshotWriter::Create(&env, dir.path(), 42, &w).ok());
  ASSERT_TRUE(w->Add("key", "value").ok());
  ExpectNothingLeft(dir, w->Finish(), "write(");
}

TEST(Snapshot, FailedSyncOrRenameLeavesNothing) {
  TempDir dir;
  FaultEnv env(Env::Posix());
  const std::vector<Entry> in = MixedEntries(100);
  env.FailSync(EIO);
  ExpectNothingLeft(dir, WriteSnapshot(&env, dir.path(), 42, in), "fdatasync(");
  env.FailSync(0);
  env.FailRename(EIO);
  Status s = WriteSnapshot(&env, dir.path(), 42, in);
  ExpectNothingLeft(dir, s, "rename(");
  EXPECT_NE(s.message().find("Input/output error"), std::string::npos) << s.message();
  env.FailRename(0);
  env.FailNewWritableFile(ENOSPC);
  ExpectNothingLeft(dir, WriteSnapshot(&env, dir.path(), 42, in), "open(");
  env.FailNewWritableFile(0);
  // Only the directory sync fails: the complete snapshot stays, but Finish says it may not be
  // durable.
  env.FailSyncDir(EIO);
  s = WriteSnapshot(&env, dir.path(), 42, in);
  EXPECT_FALSE(s.ok());
  EXPECT_NE(s.message().find("fsync(" + dir.path()), std::string::npos) << s.message();
  EXPECT_EQ(dir.Names(), std::vector<std::string>{SnapshotFileName(42)});
  env.FailSyncDir(0);
  EXPECT_TRUE(WriteSnapshot(&env, dir.path(), 43, in).ok());
  EXPECT_GE(env.sync_dirs(), 2);
}

TEST(DataDir, NamesAndStrictParsing) {
  EXPECT_EQ(LogFileName(1), "wal-0000000000000001.log");
  EXPECT_EQ(SnapshotFileName(0xabcdef0123456789ull), "snap-abcdef0123456789.rkv");
  EXPECT_EQ(LogFileName(UINT64_MAX), "wal-ffffffffffffffff.log");
  EXPECT_EQ(JoinPath("/d/", "f"), "/d/f");
  EXPECT_EQ(JoinPath("/d", "f"), "/d/f");
  uint64_t n = 0;
  for (uint64_t v : {uint64_t{0}, uint64_t{1}, uint64_t{0x10}, UINT64_MAX}) {
    ASSERT_TRUE(ParseLogFileName(LogFileName(v), &n));
    EXPECT_EQ(n, v);
    ASSERT_TRUE(ParseSnapshotFileName(SnapshotFileName(v), &n));
    EXPECT_EQ(n, v);
    EXPECT_FALSE(ParseLogFileName(SnapshotFileName(v), &n));
    EXPECT_FALSE(ParseSnapshotFileName(LogFileName(v), &n));
  }
  for (const char* bad :
       {"wal-000000000000001.log", "wal-00000000000000001.log", "wal-000000000000000A.log",
        "wal-000000000000000g.log", "wal-0000000000000001.log.bak", "wal-0000000000000001.lo",
        "wal-0000000000000001log", "Wal-0000000000000001.log", "xwal-0000000000000001.log",
        "wal--000000000000001.log", "wal-+000000000000001.log", "wal- 000000000000001.log",
        "wal-0000000000000001.log.tmp", "wal-.log", ""}) {
    EXPECT_FALSE(ParseLogFileName(bad, &n)) << bad;
  }
  EXPECT_FALSE(ParseSnapshotFileName("snap-00000000000000FF.rkv", &n));
  EXPECT_FALSE(ParseSnapshotFileName("snap-00000000000000ff.rkv.tmp", &n));
  EXPECT_FALSE(ParseSnapshotFileName("snap-0x000000000000ff.rkv", &n));
}

TEST(DataDir, ListingSortsByNumberAndReportsTheRest) {
  TempDir dir;
  const std::vector<std::string> files = {LogFileName(0x100),
                                          LogFileName(2),
                                          LogFileName(0x30),
                                          SnapshotFileName(0x2f),
                                          SnapshotFileName(1),
                                          TempFileName(SnapshotFileName(0x40)),
                                          TempFileName(LogFileName(3)),
                                          "wal-000000000000001.log",
                                          "snap-00000000000000FF.rkv",
                                          "notes.tmp",
                                          ".tmp",
                                          "wal-0000000000000001.log~",
                                          "README"};
  for (const std::string& f : files) WriteBytes(dir / f, "x");
  ASSERT_EQ(mkdir((dir / "sub").c_str(), 0700), 0);
  DataDirListing l;
  ASSERT_TRUE(ListDataDir(Env::Posix(), dir.path(), &l).ok());
  ASSERT_EQ(l.logs.size(), 3u);
  EXPECT_EQ(l.logs[0].number, 2u);
  EXPECT_EQ(l.logs[1].number, 0x30u);
  EXPECT_EQ(l.logs[2].number, 0x100u);
  EXPECT_EQ(l.logs[2].name, LogFileName(0x100));
  ASSERT_EQ(l.snapshots.size(), 2u);
  EXPECT_EQ(l.snapshots[0].number, 1u);
  EXPECT_EQ(l.snapshots[1].number, 0x2fu);
  EXPECT_EQ(l.temporaries, (std::vector<std::string>{TempFileName(SnapshotFileName(0x40)),
                                                     TempFileName(LogFileName(3))}));
  EXPECT_EQ(l.unknown, (std::vector<std::string>{
                           ".tmp", "README", "notes.tmp", "snap-00000000000000FF.rkv", "sub",
                           "wal-0000000000000001.log~", "wal-000000000000001.log"}));
  Status s = ListDataDir(Env::Posix(), dir / "missing", &l);
  EXPECT_EQ(s.code(), Code::kIoError);
  EXPECT_NE(s.message().find("opendir(" + (dir / "missing") + "): No such file"), std::string::npos)
      << s.message();
}

// Runs `f` on another thread; fails (instead of hanging) if it is still inside after 60 s: it
// blocked (a FIFO opened without O_NONBLOCK blocks for good). No time is asserted: 60 s is
// only where a blocked call is told from a slow one. `unblock` is then called to release it.
template <typename F, typename U>
Status WithinSeconds(F f, U unblock) {
  auto fut = std::async(std::launch::async, f);
  if (fut.wait_for(std::chrono::seconds(60)) != std::future_status::ready) {
    ADD_FAILURE() << "the call blocked";
    unblock();
  }
  return fut.get();
}

TEST(PosixEnv, FifoIsRefusedWithoutBlocking) {
  TempDir dir;
  const std::string fifo = dir / "fifo";
  ASSERT_EQ(mkfifo(fifo.c_str(), 0600), 0);
  Env* env = Env::Posix();
  auto unblock = [&] {  // a writer and a reader release any blocked open of the FIFO
    int fd = open(fifo.c_str(), O_RDWR | O_NONBLOCK);
    if (fd >= 0) close(fd);
  };
  Status s = WithinSeconds(
      [&] {
        std::unique_ptr<SequentialFile> f;
        return env->NewSequentialFile(fifo, &f);
      },
      unblock);
  EXPECT_EQ(s.code(), Code::kIoError);
  EXPECT_NE(s.message().find("open(" + fifo + "): a FIFO"), std::string::npos) << s.message();
  s = WithinSeconds(
      [&] {
        std::string out;
        return env->ReadFile(fifo, 100, &out);
      },
      unblock);
  EXPECT_NE(s.message().find("a FIFO"), std::string::npos) << s.message();
  // Opening a FIFO for writing without a reader fails at once (ENXIO); it must not wait.
  s = WithinSeconds(
      [&] {
        std::unique_ptr<WritableFile> f;
        uint64_t size;
        return env->NewAppendableFile(fifo, &f, &size);
      },
      unblock);
  EXPECT_FALSE(s.ok());
  EXPECT_NE(s.message().find("open(" + fifo + ")"), std::string::npos) << s.message();
  // ... and with a reader it is refused after the open.
  const int reader = open(fifo.c_str(), O_RDONLY | O_NONBLOCK);
  ASSERT_GE(reader, 0);
  s = WithinSeconds(
      [&] {
        std::unique_ptr<WritableFile> f;
        uint64_t size;
        return env->NewAppendableFile(fifo, &f, &size);
      },
      unblock);
  EXPECT_NE(s.message().find("a FIFO"), std::string::npos) << s.message();
  s = WithinSeconds([&] { return env->TruncateFile(fifo, 0); }, unblock);
  EXPECT_NE(s.message().find("a FIFO"), std::string::npos) << s.message();
  close(reader);
  // Not a regular file either.
  std::unique_ptr<SequentialFile> f;
  s = env->NewSequentialFile(dir.path(), &f);
  EXPECT_NE(s.message().find("a directory"), std::string::npos) << s.message();
  s = env->NewSequentialFile("/dev/null", &f);
  EXPECT_NE(s.message().find("a character device"), std::string::npos) << s.message();
}

TEST(PosixEnv, NewWritableFileRefusesExistingNamesAndSymlinks) {
  TempDir dir;
  Env* env = Env::Posix();
  std::unique_ptr<WritableFile> f;
  ASSERT_TRUE(env->NewWritableFile(dir / "new", &f).ok());
  ASSERT_TRUE(f->Append("abc").ok());
  ASSERT_TRUE(f->Sync().ok());
  f.reset();
  struct stat st;
  ASSERT_EQ(stat((dir / "new").c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0600u);
  Status s = env->NewWritableFile(dir / "new", &f);
  EXPECT_EQ(s.code(), Code::kIoError);
  EXPECT_NE(s.message().find("open(" + (dir / "new") + "): File exists"), std::string::npos)
      << s.message();
  EXPECT_EQ(ReadBytes(dir / "new"), "abc");
  // A symlink to an existing file and a dangling one: refused, the target untouched / not made.
  ASSERT_EQ(symlink((dir / "new").c_str(), (dir / "link").c_str()), 0);
  ASSERT_EQ(symlink((dir / "target").c_str(), (dir / "dangling").c_str()), 0);
  EXPECT_FALSE(env->NewWritableFile(dir / "link", &f).ok());
  EXPECT_FALSE(env->NewWritableFile(dir / "dangling", &f).ok());
  EXPECT_NE(stat((dir / "target").c_str(), &st), 0);
  EXPECT_EQ(ReadBytes(dir / "new"), "abc");
  // Reading through a symlink is refused too.
  std::unique_ptr<SequentialFile> r;
  s = env->NewSequentialFile(dir / "link", &r);
  EXPECT_NE(s.message().find("open(" + (dir / "link") + ")"), std::string::npos) << s.message();
  uint64_t size;
  EXPECT_FALSE(env->NewAppendableFile(dir / "link", &f, &size).ok());
  EXPECT_FALSE(env->TruncateFile(dir / "link", 0).ok());
  EXPECT_EQ(ReadBytes(dir / "new"), "abc");
}

TEST(PosixEnv, SequentialReadsDirectoriesRenameRemoveTruncate) {
  TempDir dir;
  Env* env = Env::Posix();
  WriteBytes(dir / "f", "0123456789");
  std::unique_ptr<SequentialFile> r;
  ASSERT_TRUE(env->NewSequentialFile(dir / "f", &r).ok());
  EXPECT_EQ(r->Size(), 10u);
  std::string out;
  ASSERT_TRUE(r->Read(4, &out).ok());
  EXPECT_EQ(out, "0123");
  ASSERT_TRUE(r->Read(100, &out).ok());
  EXPECT_EQ(out, "456789");  // short at the end
  ASSERT_TRUE(r->Read(100, &out).ok());
  EXPECT_EQ(out, "");

  ASSERT_TRUE(env->TruncateFile(dir / "f", 3).ok());
  EXPECT_EQ(ReadBytes(dir / "f"), "012");
  ASSERT_TRUE(env->RenameFile(dir / "f", dir / "g").ok());
  ASSERT_TRUE(env->SyncDir(dir.path()).ok());
  Status s = env->RenameFile(dir / "f", dir / "h");
  EXPECT_NE(s.message().find("rename(" + (dir / "f") + " -> " + (dir / "h") + ")"),
            std::string::npos)
      << s.message();
  ASSERT_TRUE(env->RemoveFile(dir / "g").ok());
  s = env->RemoveFile(dir / "g");
  EXPECT_EQ(s.code(), Code::kNotFound);
  EXPECT_NE(s.message().find("unlink(" + (dir / "g") + "): No such file"), std::string::npos);
  EXPECT_FALSE(env->SyncDir(dir / "missing").ok());

  // A truncated appendable file is appended to at its new end.
  std::unique_ptr<WritableFile> w;
  ASSERT_TRUE(env->NewWritableFile(dir / "w", &w).ok());
  ASSERT_TRUE(w->Append("abcdef").ok());
  ASSERT_TRUE(w->Truncate(2).ok());
  ASSERT_TRUE(w->Append("Z").ok());
  w.reset();
  EXPECT_EQ(ReadBytes(dir / "w"), "abZ");

  ASSERT_TRUE(env->CreateDirIfMissing(dir / "sub").ok());
  ASSERT_TRUE(env->CreateDirIfMissing(dir / "sub").ok());
  struct stat st;
  ASSERT_EQ(stat((dir / "sub").c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0700u);
  s = env->CreateDirIfMissing(dir / "w");
  EXPECT_EQ(s.code(), Code::kIoError);
  EXPECT_NE(s.message().find("not a directory"), std::string::npos) << s.message();
  std::vector<std::string> names;
  ASSERT_TRUE(env->GetChildren(dir.path(), &names).ok());
  std::sort(names.begin(), names.end());
  EXPECT_EQ(names, (std::vector<std::string>{"sub", "w"}));
}

TEST(Wal, SnapshotEndRecordInALogIsCorruption) {
  std::string log;
  EncodeRecord({RecordType::kPut, 1, "a", "1"}, &log);
  const size_t end_at = log.size();
  EncodeSnapshotEnd(1, 1, 2, &log);
  for (bool more_after : {false, true}) {
    std::string bytes = log;
    if (more_after) EncodeRecord({RecordType::kPut, 2, "b", "2"}, &bytes);
    LogReader reader(bytes, kFileHeaderSize);
    LogRecord r;
    ASSERT_EQ(reader.Next(&r), LogReader::Result::kRecord);
    EXPECT_EQ(reader.Next(&r), LogReader::Result::kCorrupt) << reader.error();
    EXPECT_EQ(reader.offset(), kFileHeaderSize + end_at);
    EXPECT_NE(reader.error().find("snapshot END"), std::string::npos) << reader.error();
  }
}

}  // namespace
}  // namespace rkv::wal
