// SPDX-License-Identifier: Apache-2.0
// PrecheckFlags (common/cli/flag_check.h): unknown flags and bad values are caught before gflags
// would exit with its own status.
#include "common/cli/flag_check.h"

#include <gflags/gflags.h>
#include <gtest/gtest.h>

#include <cstdio>
#include <fstream>
#include <vector>

DEFINE_int32(fc_test_count, 1, "a number");
DEFINE_bool(fc_test_switch, false, "a bool");
DEFINE_string(fc_test_name, "", "a string");

namespace rkv::cli {
namespace {

std::string Check(std::vector<std::string> args) {
  args.insert(args.begin(), "tool");
  std::vector<char*> argv;
  for (auto& a : args) argv.push_back(a.data());
  return PrecheckFlags(int(argv.size()), argv.data());
}

TEST(FlagCheck, AcceptsWhatGflagsAccepts) {
  EXPECT_EQ(Check({"get", "key", "--fc_test_count=3", "-fc_test_switch", "--nofc_test_switch",
                   "--fc_test_name", "x", "--fc_test_name=", "-", "--", "--nonsense"}),
            "");
  EXPECT_EQ(FLAGS_fc_test_count, 3);
}

TEST(FlagCheck, RefusesUnknownFlagsAndBadValues) {
  EXPECT_NE(Check({"--no_such_flag"}).find("unknown flag '--no_such_flag'"), std::string::npos);
  EXPECT_NE(Check({"--nofc_test_count"}).find("unknown flag"), std::string::npos);
  EXPECT_NE(Check({"--fc_test_count=abc"}).find("bad value 'abc' for flag --fc_test_count"),
            std::string::npos);
  EXPECT_NE(Check({"--fc_test_count=99999999999"}).find("bad value"), std::string::npos);
  EXPECT_NE(Check({"--fc_test_switch=maybe"}).find("bad value"), std::string::npos);
  EXPECT_NE(Check({"--fc_test_count"}).find("needs a value"), std::string::npos);
}

std::string WriteFile(const std::string& name, const std::string& text) {
  const std::string path = ::testing::TempDir() + name;
  std::ofstream(path) << text;
  return path;
}

// gflags alone ignores unknown flags in a flagfile and treats a dashless line as a filter that
// switches the rest off: a typo in kvserver.flags would start a server without auth.
TEST(FlagCheck, FlagfilesFollowTheSameRules) {
  const std::string good =
      WriteFile("fc_good.flags", "# comment\n\n  --fc_test_count=7  \n--nofc_test_switch\n");
  EXPECT_EQ(Check({"--flagfile=" + good}), "");
  EXPECT_EQ(FLAGS_fc_test_count, 7);
  const std::string typo = WriteFile("fc_typo.flags", "--fc_test_count=1\n--fc_test_nam=x\n");
  EXPECT_NE(Check({"--flagfile=" + typo}).find("fc_typo.flags:2: unknown flag '--fc_test_nam=x'"),
            std::string::npos);
  const std::string nodash = WriteFile("fc_nodash.flags", "fc_test_name=x\n--fc_test_count=2\n");
  EXPECT_NE(Check({"--flagfile", nodash}).find("fc_nodash.flags:1: 'fc_test_name=x' is not a flag"),
            std::string::npos);
  const std::string bad = WriteFile("fc_bad.flags", "--fc_test_count=many\n");
  EXPECT_NE(Check({"--flagfile=" + good + "," + bad}).find("bad value 'many'"), std::string::npos);
  const std::string nested = WriteFile("fc_nested.flags", "--flagfile=" + typo + "\n");
  EXPECT_NE(Check({"--flagfile=" + nested}).find("fc_typo.flags:2"), std::string::npos);
  const std::string loop = ::testing::TempDir() + "fc_loop.flags";
  WriteFile("fc_loop.flags", "--flagfile=" + loop + "\n");
  EXPECT_NE(Check({"--flagfile=" + loop}).find("nested more than 8"), std::string::npos);
  EXPECT_NE(Check({"--flagfile=/nonexistent/x.flags"}).find("No such file"), std::string::npos);
  EXPECT_EQ(Check({"--undefok=fc_later", "--fc_later=1", "--nofc_later"}), "");
}

}  // namespace
}  // namespace rkv::cli
