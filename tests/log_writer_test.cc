// SPDX-License-Identifier: Apache-2.0
// LogWriter: group commit, the fsync modes, and what a full disk or a failing sync does: the
// batch's Commits fail (never acknowledged), the file is cut back so that it reads as exactly
// the acknowledged records, and the writer recovers when writes succeed again. The file is an
// in-memory WritableFile with injectable faults (a full disk writes part of the batch first;
// tests/fault_env.h).
#include "server/durability/log_writer.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "server/durability/log_reader.h"
#include "tests/fault_env.h"

namespace rkv::wal {
namespace {

std::vector<std::string> Keys(const std::string& data) {
  std::vector<std::string> keys;
  LogReader r(data, 0);
  LogRecord rec;
  LogReader::Result res;
  while ((res = r.Next(&rec)) == LogReader::Result::kRecord) keys.emplace_back(rec.key);
  EXPECT_EQ(res, LogReader::Result::kEnd) << r.error();
  return keys;
}

TEST(LogWriter, ConcurrentCommitsShareSyncs) {
  FaultState st;
  st.sync_delay_us = 500;
  LogWriter w(std::make_unique<FaultFile>(&st), 0, FsyncMode::kAlways);
  constexpr int kThreads = 8, kEach = 100;
  std::vector<std::thread> threads;
  std::atomic<int> failures{0};
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      for (int i = 0; i < kEach; ++i) {
        std::string k = "k" + std::to_string(t) + "-" + std::to_string(i);
        uint64_t ticket;
        w.Add({RecordType::kPut, uint64_t(i), k, "value"}, &ticket);
        if (!w.Commit(ticket).ok()) ++failures;
      }
    });
  }
  for (auto& th : threads) th.join();
  EXPECT_EQ(failures.load(), 0);
  EXPECT_EQ(Keys(st.data).size(), size_t(kThreads * kEach));
  EXPECT_EQ(w.synced(), st.data.size());
  // Group commit: fewer syncs than records (8 writers share them).
  EXPECT_LT(st.syncs, kThreads * kEach);
  printf("group commit: %d records, %d writes, %d syncs\n", kThreads * kEach, st.appends, st.syncs);
}

TEST(LogWriter, EverySecAndNoDoNotSyncOnCommit) {
  for (FsyncMode mode : {FsyncMode::kEverySec, FsyncMode::kNo}) {
    FaultState st;
    LogWriter w(std::make_unique<FaultFile>(&st), 0, mode);
    uint64_t t;
    w.Add({RecordType::kPut, 1, "a", "1"}, &t);
    ASSERT_TRUE(w.Commit(t).ok());
    EXPECT_EQ(st.syncs, 0);
    EXPECT_EQ(w.synced(), 0u);
    EXPECT_EQ(w.written(), st.data.size());
    ASSERT_TRUE(w.SyncWritten().ok());  // what the once-a-second timer does for kEverySec
    EXPECT_EQ(w.synced(), st.data.size());
  }
}

// Quick (may a worker commit itself?): not while a batch is being written, not after a slow
// write, again once a write is fast (DurableLog::WriteInline; docs/design.md, "No hand-over").
TEST(LogWriter, QuickOnlyWhileTheDiskKeepsUp) {
  FaultState st;
  LogWriter w(std::make_unique<FaultFile>(&st), 0, FsyncMode::kNo);
  const auto quick = std::chrono::microseconds(1000);
  EXPECT_TRUE(w.Quick(quick));
  uint64_t t;
  // A write into memory is fast; on a loaded machine one may be preempted past 1 ms, so a few
  // more are allowed to get a fast one.
  auto commit_until_quick = [&](const std::string& key) {
    for (int i = 0; i < 50; ++i) {
      w.Add({RecordType::kPut, 1, key, "1"}, &t);
      if (!w.Commit(t).ok()) return false;
      if (w.Quick(quick)) return true;
    }
    return false;
  };
  EXPECT_TRUE(commit_until_quick("a")) << "a write into memory is fast";
  st.append_delay_us = 200000;  // the disk stalls for 200 ms
  std::thread slow([&] {
    uint64_t t2;
    w.Add({RecordType::kPut, 2, "b", "2"}, &t2);
    EXPECT_TRUE(w.Commit(t2).ok());
  });
  bool seen_writing = false;
  for (int i = 0; i < 1000 && !seen_writing; ++i) {
    seen_writing = !w.Quick(quick);
    std::this_thread::sleep_for(std::chrono::microseconds(100));
  }
  EXPECT_TRUE(seen_writing) << "a write in progress is not quick";
  slow.join();
  EXPECT_FALSE(w.Quick(quick)) << "the last write took 200 ms";
  st.append_delay_us = 0;
  EXPECT_TRUE(commit_until_quick("c")) << "fast again";
  std::vector<std::string> keys = Keys(st.data);
  EXPECT_NE(std::find(keys.begin(), keys.end(), "b"), keys.end()) << "the slow write is there";
}

// A periodic (everysec) or rotation sync in progress is not quick either: a write(2) may wait
// behind the file's fdatasync. And a rotation's new file keeps the old one's slowness.
TEST(LogWriter, NotQuickWhileASyncRunsAndSlownessSurvivesARotation) {
  FaultState st;
  LogWriter w(std::make_unique<FaultFile>(&st), 0, FsyncMode::kEverySec);
  const auto quick = std::chrono::microseconds(1000);
  uint64_t t;
  w.Add({RecordType::kPut, 1, "a", "1"}, &t);
  ASSERT_TRUE(w.Commit(t).ok());
  st.sync_delay_us = 200000;
  std::thread sync([&] { EXPECT_TRUE(w.SyncWritten().ok()); });
  bool seen_syncing = false;
  for (int i = 0; i < 1000 && !seen_syncing; ++i) {
    seen_syncing = !w.Quick(quick);
    std::this_thread::sleep_for(std::chrono::microseconds(100));
  }
  sync.join();
  EXPECT_TRUE(seen_syncing) << "a sync in progress is not quick";

  FaultState st2;
  st2.append_delay_us = 20000;
  LogWriter slow(std::make_unique<FaultFile>(&st2), 0, FsyncMode::kNo);
  slow.Add({RecordType::kPut, 2, "b", "2"}, &t);
  ASSERT_TRUE(slow.Commit(t).ok());
  ASSERT_FALSE(slow.Quick(quick));
  FaultState st3;
  LogWriter next(std::make_unique<FaultFile>(&st3), 0, FsyncMode::kNo);
  EXPECT_TRUE(next.Quick(quick));
  next.InheritHistory(slow);
  EXPECT_FALSE(next.Quick(quick)) << "a new file does not make a slow disk fast";
}

TEST(LogWriter, FullDiskFailsTheBatchCutsTheFileAndRecovers) {
  FaultState st;
  LogWriter w(std::make_unique<FaultFile>(&st), 0, FsyncMode::kAlways);
  uint64_t t;
  w.Add({RecordType::kPut, 1, "ok-1", "v"}, &t);
  ASSERT_TRUE(w.Commit(t).ok());
  const size_t good = st.data.size();
  st.space = good + 10;  // the next record only partly fits
  w.Add({RecordType::kPut, 2, "lost", std::string(100, 'x')}, &t);
  Status s = w.Commit(t);
  EXPECT_EQ(s.code(), Code::kIoError);
  EXPECT_NE(s.message().find("No space left"), std::string::npos) << s.ToString();
  EXPECT_EQ(st.data.size(), good);  // the partial record was cut off
  EXPECT_EQ(Keys(st.data), std::vector<std::string>{"ok-1"});
  // Space returns: the next write succeeds and the log reads cleanly.
  st.space = SIZE_MAX;
  w.Add({RecordType::kPut, 3, "ok-2", "v"}, &t);
  ASSERT_TRUE(w.Commit(t).ok());
  EXPECT_EQ(Keys(st.data), (std::vector<std::string>{"ok-1", "ok-2"}));
}

// A writer whose batch failed may wake late, after many more batches failed: it must still be
// told its failure (the writer used to keep only the last 64 failed batches, and then said OK).
TEST(LogWriter, ALateWaiterOfAFailedBatchIsToldNotAcknowledged) {
  FaultState st;
  LogWriter w(std::make_unique<FaultFile>(&st), 0, FsyncMode::kAlways);
  st.fail_sync = true;
  uint64_t late, first;
  w.Add({RecordType::kPut, 1, "a", "v"}, &first);
  w.Add({RecordType::kPut, 2, "b", "v"}, &late);  // same batch; its waiter is "descheduled"
  EXPECT_EQ(w.Commit(first).code(), Code::kIoError);
  for (int i = 0; i < 200; ++i) {  // many more failed batches, each read by its writer
    uint64_t t;
    w.Add({RecordType::kPut, uint64_t(3 + i), "c", "v"}, &t);
    EXPECT_EQ(w.Commit(t).code(), Code::kIoError);
  }
  st.fail_sync = false;
  EXPECT_EQ(w.Commit(late).code(), Code::kIoError);
  uint64_t t;
  w.Add({RecordType::kPut, 1000, "ok", "v"}, &t);
  EXPECT_TRUE(w.Commit(t).ok());
  EXPECT_EQ(Keys(st.data), std::vector<std::string>{"ok"});
}

// Past kMaxFailed unread failed batches, the oldest are forgotten: their waiters hear
// "outcome unknown", never OK.
TEST(LogWriter, ForgottenFailuresAreNeverReportedAsSuccess) {
  FaultState st;
  LogWriter w(std::make_unique<FaultFile>(&st), 0, FsyncMode::kAlways);
  st.fail_sync = true;
  std::vector<uint64_t> unread;
  for (size_t i = 0; i < LogWriter::kMaxFailed + 5; ++i) {
    uint64_t lead, other;
    w.Add({RecordType::kPut, 2 * i, "a", "v"}, &lead);
    w.Add({RecordType::kPut, 2 * i + 1, "b", "v"}, &other);
    EXPECT_EQ(w.Commit(lead).code(), Code::kIoError);
    unread.push_back(other);
  }
  for (size_t i = 0; i < unread.size(); ++i) {
    Status s = w.Commit(unread[i]);
    EXPECT_FALSE(s.ok()) << i;
    EXPECT_EQ(s.code(), i < 5 ? Code::kTimeout : Code::kIoError) << i;
  }
}

TEST(LogWriter, FailingSyncIsNeverAcknowledged) {
  FaultState st;
  LogWriter w(std::make_unique<FaultFile>(&st), 0, FsyncMode::kAlways);
  st.fail_sync = true;
  uint64_t t;
  w.Add({RecordType::kDelete, 1, "k", ""}, &t);
  Status s = w.Commit(t);
  EXPECT_EQ(s.code(), Code::kIoError);
  EXPECT_NE(s.message().find("fdatasync"), std::string::npos);
  EXPECT_TRUE(Keys(st.data).empty());  // cut: not in the log either
  st.fail_sync = false;
  w.Add({RecordType::kPut, 2, "k2", "v"}, &t);
  EXPECT_TRUE(w.Commit(t).ok());
}

TEST(LogWriter, UnrepairableTailMakesTheWriterFailFast) {
  FaultState st;
  LogWriter w(std::make_unique<FaultFile>(&st), 0, FsyncMode::kAlways);
  st.space = 5;
  st.fail_truncate = true;
  uint64_t t;
  w.Add({RecordType::kPut, 1, "a", "1"}, &t);
  EXPECT_FALSE(w.Commit(t).ok());
  st.space = SIZE_MAX;
  w.Add({RecordType::kPut, 2, "b", "2"}, &t);
  Status s = w.Commit(t);
  EXPECT_EQ(s.code(), Code::kIoError);
  EXPECT_NE(s.message().find("unusable"), std::string::npos) << s.ToString();
}

}  // namespace
}  // namespace rkv::wal
