// PrecheckFlags: checks a tool's command line against its gflags before gflags parses it, so a
// misspelt flag or a bad value gets the tool's own usage exit code. (gflags itself exits with
// status 1, which kvctl documents as NOT_FOUND and kvbench as "operations failed".)
// Thread safety: call once from main before any thread starts; it sets the flags it checks
// (ParseCommandLineFlags sets them again to the same values).
#ifndef RKV_COMMON_CLI_FLAG_CHECK_H_
#define RKV_COMMON_CLI_FLAG_CHECK_H_

#include <string>

namespace rkv::cli {

// Every "-name", "--name", "--name=value", "--noname" argument before a bare "--" must name a
// defined flag ("no" only before a bool), and every "=value" must parse for its flag's type.
// Returns "" if so, else a one-line message naming the argument.
std::string PrecheckFlags(int argc, char** argv);

}  // namespace rkv::cli

#endif  // RKV_COMMON_CLI_FLAG_CHECK_H_
