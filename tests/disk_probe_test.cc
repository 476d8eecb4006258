// SPDX-License-Identifier: Apache-2.0
// ProbeDisk (server/durability/disk_probe.h): a directory that takes a write and a sync passes
// and keeps no probe file; a leftover probe file is replaced; a full disk, a failing sync or a
// failing create fails the probe with the errno text and leaves no probe file.
#include "server/durability/disk_probe.h"

#include <gtest/gtest.h>

#include <cerrno>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "tests/fault_env.h"
#include "tests/temp_dir.h"

namespace rkv::wal {
namespace {

bool HasProbe(Env* env, const std::string& dir) {
  std::vector<std::string> names;
  EXPECT_TRUE(env->GetChildren(dir, &names).ok());
  for (const std::string& n : names)
    if (n == kDiskProbeName) return true;
  return false;
}

TEST(DiskProbe, AWritableDirectoryPassesAndKeepsNoFile) {
  TempDir d;
  FaultEnv env(Env::Posix());
  Status s = ProbeDisk(&env, d.path, 200 << 10);
  ASSERT_TRUE(s.ok()) << s.ToString();
  EXPECT_GE(env.appends(), 4);  // 64 KiB writes
  EXPECT_GE(env.syncs(), 1);
  EXPECT_FALSE(HasProbe(&env, d.path));
}

TEST(DiskProbe, ALeftoverProbeFileIsReplaced) {
  TempDir d;
  std::unique_ptr<WritableFile> f;
  ASSERT_TRUE(Env::Posix()->NewWritableFile(d.path + "/" + kDiskProbeName, &f).ok());
  ASSERT_TRUE(f->Append("left by a crash").ok());
  f.reset();
  Status s = ProbeDisk(Env::Posix(), d.path, 1000);
  ASSERT_TRUE(s.ok()) << s.ToString();
  EXPECT_FALSE(HasProbe(Env::Posix(), d.path));
}

TEST(DiskProbe, AFullDiskAFailingSyncOrCreateFailsItAndKeepsNoFile) {
  TempDir d;
  FaultEnv env(Env::Posix());
  env.SetSpace(100 << 10);
  Status s = ProbeDisk(&env, d.path, 1 << 20);
  EXPECT_EQ(s.code(), Code::kIoError) << s.ToString();
  EXPECT_NE(s.message().find("No space left"), std::string::npos) << s.message();
  EXPECT_FALSE(HasProbe(&env, d.path));
  env.SetSpace(SIZE_MAX);
  env.FailSync(EIO);
  s = ProbeDisk(&env, d.path, 1000);
  EXPECT_EQ(s.code(), Code::kIoError) << s.ToString();
  EXPECT_FALSE(HasProbe(&env, d.path));
  env.FailSync(0);
  env.FailNewWritableFile(EROFS);
  s = ProbeDisk(&env, d.path, 1000);
  EXPECT_EQ(s.code(), Code::kIoError) << s.ToString();
  env.FailNewWritableFile(0);
  EXPECT_TRUE(ProbeDisk(&env, d.path, 1000).ok());
}

}  // namespace
}  // namespace rkv::wal
