#include "common/cli/flag_check.h"

#include <gflags/gflags.h>

#include <cstring>

namespace rkv::cli {

std::string PrecheckFlags(int argc, char** argv) {
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    if (arg == "--") break;
    if (arg.size() < 2 || arg[0] != '-') continue;
    const size_t dashes = arg[1] == '-' ? 2 : 1;
    const size_t eq = arg.find('=');
    const std::string name =
        arg.substr(dashes, eq == std::string::npos ? std::string::npos : eq - dashes);
    gflags::CommandLineFlagInfo info;
    if (!gflags::GetCommandLineFlagInfo(name.c_str(), &info)) {
      if (eq == std::string::npos && name.compare(0, 2, "no") == 0 &&
          gflags::GetCommandLineFlagInfo(name.c_str() + 2, &info) && info.type == "bool")
        continue;
      return "unknown flag '" + arg + "' (--help lists the flags)";
    }
    if (eq == std::string::npos) {
      // "--name value" (the value in the next argument) or a bare bool: gflags decides; a
      // missing value is caught there too, only with its own exit code.
      if (info.type != "bool" && i + 1 >= argc) return "flag '" + arg + "' needs a value";
      if (info.type != "bool") ++i;
      continue;
    }
    const std::string value = arg.substr(eq + 1);
    if (gflags::SetCommandLineOption(name.c_str(), value.c_str()).empty())
      return "bad value '" + value + "' for flag --" + name + " (" + info.type + ")";
  }
  return "";
}

}  // namespace rkv::cli
