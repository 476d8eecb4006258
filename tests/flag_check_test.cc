// PrecheckFlags (common/cli/flag_check.h): unknown flags and bad values are caught before gflags
// would exit with its own status.
#include "common/cli/flag_check.h"

#include <gflags/gflags.h>
#include <gtest/gtest.h>

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

}  // namespace
}  // namespace rkv::cli
