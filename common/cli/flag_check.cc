// SPDX-License-Identifier: Apache-2.0
#include "common/cli/flag_check.h"

#include <fcntl.h>
#include <gflags/gflags.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <set>
#include <sstream>
#include <vector>

#include "common/read_limited.h"

namespace rkv::cli {
namespace {

constexpr size_t kMaxFlagfileBytes = 1 << 20;
constexpr int kMaxFlagfileDepth = 8;

class Checker {
 public:
  // Checks one argument list; `where` prefixes messages ("" for the command line, "F:N: " in a
  // flagfile). `i` may advance past a separate value.
  std::string CheckArgs(const std::vector<std::string>& args, const std::string& where, int depth) {
    for (size_t i = 0; i < args.size(); ++i) {
      const std::string& arg = args[i];
      if (arg == "--") break;
      if (arg.size() < 2 || arg[0] != '-') continue;
      const size_t dashes = arg[1] == '-' ? 2 : 1;
      const size_t eq = arg.find('=');
      const std::string name =
          arg.substr(dashes, eq == std::string::npos ? std::string::npos : eq - dashes);
      const bool has_value = eq != std::string::npos;
      std::string value = has_value ? arg.substr(eq + 1) : "";
      gflags::CommandLineFlagInfo info;
      if (!gflags::GetCommandLineFlagInfo(name.c_str(), &info)) {
        if (!has_value && name.compare(0, 2, "no") == 0 &&
            gflags::GetCommandLineFlagInfo(name.c_str() + 2, &info) && info.type == "bool")
          continue;
        if (undefok_.count(name) ||
            (name.compare(0, 2, "no") == 0 && undefok_.count(name.substr(2))))
          continue;
        return where + "unknown flag '" + arg + "' (--help lists the flags)";
      }
      if (!has_value) {
        if (info.type == "bool") continue;
        if (i + 1 >= args.size()) return where + "flag '" + arg + "' needs a value";
        value = args[++i];
      }
      if (name == "flagfile") {
        std::string e = CheckFlagfiles(value, where, depth);
        if (!e.empty()) return e;
        continue;
      }
      if (name == "fromenv" || name == "tryfromenv") continue;
      if (name == "undefok") {
        std::stringstream in(value);
        for (std::string n; std::getline(in, n, ',');) undefok_.insert(n);
        continue;
      }
      if (gflags::SetCommandLineOption(name.c_str(), value.c_str()).empty())
        return where + "bad value '" + value + "' for flag --" + name + " (" + info.type + ")";
    }
    return "";
  }

 private:
  // --flagfile takes a comma-separated list of files.
  std::string CheckFlagfiles(const std::string& list, const std::string& where, int depth) {
    if (depth >= kMaxFlagfileDepth)
      return where + "--flagfile nested more than " + std::to_string(kMaxFlagfileDepth) +
             " levels deep";
    std::stringstream in(list);
    for (std::string path; std::getline(in, path, ',');) {
      if (path.empty()) continue;
      std::string e = CheckFlagfile(path, where, depth + 1);
      if (!e.empty()) return e;
    }
    return "";
  }

  std::string CheckFlagfile(const std::string& path, const std::string& where, int depth) {
    const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK);
    if (fd < 0) return where + "--flagfile " + path + ": open: " + std::strerror(errno);
    std::string text;
    Status s = ReadLimited(fd, kMaxFlagfileBytes, path, &text);
    ::close(fd);
    if (!s.ok()) return where + "--flagfile " + path + ": " + s.message();
    if (text.size() > kMaxFlagfileBytes)
      return where + "--flagfile " + path + " is larger than 1 MiB";
    std::stringstream lines(text);
    int n = 0;
    for (std::string line; std::getline(lines, line);) {
      ++n;
      const size_t b = line.find_first_not_of(" \t\r");
      if (b == std::string::npos || line[b] == '#') continue;
      const size_t e = line.find_last_not_of(" \t\r");
      line = line.substr(b, e - b + 1);
      const std::string at = path + ":" + std::to_string(n) + ": ";
      // gflags reads a line without dashes as a program-name filter that silently switches
      // the following lines off.
      if (line[0] != '-')
        return at + "'" + line + "' is not a flag (flags start with --; '#' starts a comment)";
      std::string err = CheckArgs({line}, at, depth);
      if (!err.empty()) return err;
    }
    return "";
  }

  std::set<std::string> undefok_;
};

}  // namespace

std::string PrecheckFlags(int argc, char** argv) {
  std::vector<std::string> args(argv + 1, argv + argc);
  Checker c;
  return c.CheckArgs(args, "", 0);
}

void EnsureStandardFds() {
  for (int fd = 0; fd <= 2; ++fd) {
    if (::fcntl(fd, F_GETFD) != -1 || errno != EBADF) continue;
    const int null_fd = ::open("/dev/null", fd == 0 ? O_RDONLY : O_WRONLY);
    // open returns the lowest free descriptor: `fd` itself, since the lower ones are open.
    if (null_fd >= 0 && null_fd != fd) {
      ::dup2(null_fd, fd);
      ::close(null_fd);
    }
  }
}

}  // namespace rkv::cli
