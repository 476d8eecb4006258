// SPDX-License-Identifier: Apache-2.0
#include "common/cli/usage.h"

#include <gflags/gflags.h>

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <set>
#include <sstream>

#include "common/table/layout.h"
#include "common/wire.h"

#ifndef RKV_VERSION
#error "RKV_VERSION must be defined by the build (CMake's PROJECT_VERSION)"
#endif

namespace rkv::cli {
namespace {

constexpr size_t kWidth = 79;       // columns of the help text
constexpr size_t kHelpIndent = 26;  // where a flag's help text starts (GNU style: help2man
                                    // reads an option and its text as one entry)

// glog's and gflags' own flags: --helpfull lists them. Matched by the base name of the file that
// defines the flag (the directory differs by build: absolute, or ./src with -ffile-prefix-map).
bool IsLibraryFlag(const gflags::CommandLineFlagInfo& f) {
  static const char* const kLibraryFiles[] = {
      "logging.cc",          "utilities.cc",          "vlog_is_on.cc", "gflags.cc",
      "gflags_reporting.cc", "gflags_completions.cc", "symbolize.cc",  "signalhandler.cc"};
  const size_t slash = f.filename.rfind('/');
  const std::string base = slash == std::string::npos ? f.filename : f.filename.substr(slash + 1);
  for (const char* lib : kLibraryFiles)
    if (base == lib) return true;
  return false;
}

// "--name=VALUE-PLACEHOLDER" for the flag's type, "--[no]name" for a bool.
std::string Spelling(const gflags::CommandLineFlagInfo& f) {
  if (f.type == "bool") return "--" + f.name;
  if (f.type == "string") return "--" + f.name + "=VALUE";
  if (f.type == "double") return "--" + f.name + "=X";
  return "--" + f.name + "=N";
}

// Appends `text` wrapped at kWidth with every line indented by `indent` spaces.
void Wrap(const std::string& text, size_t indent, std::string* out) {
  std::istringstream words(text);
  std::string word, line;
  auto flush = [&] {
    if (line.empty()) return;
    out->append(indent, ' ');
    out->append(line);
    out->push_back('\n');
    line.clear();
  };
  while (words >> word) {
    if (!line.empty() && indent + line.size() + 1 + word.size() > kWidth) flush();
    if (!line.empty()) line.push_back(' ');
    line += word;
  }
  flush();
}

// "  --name=VALUE" and its help text from column kHelpIndent, on the same line when it fits.
void Entry(const std::string& spelling, const std::string& help, std::string* out) {
  std::string text;
  Wrap(help, kHelpIndent, &text);
  out->append("  ").append(spelling);
  if (2 + spelling.size() + 2 <= kHelpIndent) {
    out->append(kHelpIndent - 2 - spelling.size(), ' ');
    out->append(text, kHelpIndent, std::string::npos);
  } else {
    out->push_back('\n');
    out->append(text);
  }
}

void FlagEntry(const gflags::CommandLineFlagInfo& f, std::string* out) {
  std::string help = f.description;
  if (f.type == "string")
    help += f.default_value.empty() ? " (default: empty)" : " (default: " + f.default_value + ")";
  else
    help += " (default: " + f.default_value + ")";
  Entry(Spelling(f), help, out);
}

bool WantsFlag(int argc, char** argv, const char* name) {
  for (int i = 1; i < argc; ++i) {
    if (std::strcmp(argv[i], "--") == 0) return false;
    if (argv[i][0] != '-') continue;
    const char* a = argv[i] + (argv[i][1] == '-' ? 2 : 1);
    if (std::strcmp(a, name) == 0) return true;
  }
  return false;
}

std::set<std::string> GroupedNames(const Usage& u) {
  std::set<std::string> names;
  for (const FlagGroup& g : u.groups)
    for (const char* n : g.flags) names.insert(n);
  return names;
}

}  // namespace

std::string HelpText(const Usage& u) {
  std::vector<gflags::CommandLineFlagInfo> all;
  gflags::GetAllFlags(&all);
  std::string out = "Usage: ";
  std::istringstream syn(u.synopsis);
  std::string line;
  bool first = true;
  while (std::getline(syn, line)) {
    if (!first) out += "  or:  ";
    out += line + "\n";
    first = false;
  }
  out += "\n";
  std::istringstream desc(u.description);
  while (std::getline(desc, line)) out += line + "\n";
  for (const FlagGroup& g : u.groups) {
    out += "\n";
    out += g.title;
    out += ":\n";
    for (const char* name : g.flags) {
      gflags::CommandLineFlagInfo f;
      if (gflags::GetCommandLineFlagInfo(name, &f)) FlagEntry(f, &out);
    }
  }
  const std::vector<std::string> other = UngroupedFlags(u);
  if (!other.empty()) {
    out += "\nOther flags:\n";
    for (const std::string& name : other) {
      gflags::CommandLineFlagInfo f;
      if (gflags::GetCommandLineFlagInfo(name.c_str(), &f)) FlagEntry(f, &out);
    }
  }
  out += "\nCommon flags:\n";
  Entry("--help", "show this help and exit", &out);
  Entry("--helpfull",
        "also list the logging flags of glog (--logtostderr, --v, --log_dir, ...) and gflags' "
        "own (--flagfile, --fromenv, ...)",
        &out);
  Entry("--version", "show the rkv version and the protocol and format versions, and exit", &out);
  if (u.epilogue[0] != '\0') {
    out += "\n";
    std::istringstream epi(u.epilogue);
    while (std::getline(epi, line)) out += line + "\n";
  }
  return out;
}

std::string VersionText(const Usage& u) {
  char buf[256];
  std::snprintf(buf, sizeof buf, "%s (rkv) %s\nwire protocol version %u\ntable format version %u\n",
                u.name, RKV_VERSION, unsigned{wire::kProtocolVersion},
                unsigned{layout::kTableFormatVersion});
  std::string out = buf;
  out += u.more_versions;
  out +=
      "Copyright 2026 rkv developers.\n"
      "Licensed under the Apache License, Version 2.0: "
      "https://www.apache.org/licenses/LICENSE-2.0\n";
  return out;
}

bool HandleHelpOrVersion(int argc, char** argv, const Usage& u, int* exit_code) {
  std::string text;
  if (WantsFlag(argc, argv, "help")) {
    text = HelpText(u);
  } else if (WantsFlag(argc, argv, "version")) {
    text = VersionText(u);
  } else {
    return false;
  }
  *exit_code =
      std::fwrite(text.data(), 1, text.size(), stdout) == text.size() && std::fflush(stdout) == 0
          ? 0
          : 2;
  return true;
}

std::vector<std::string> UngroupedFlags(const Usage& u) {
  std::vector<gflags::CommandLineFlagInfo> all;
  gflags::GetAllFlags(&all);
  const std::set<std::string> grouped = GroupedNames(u);
  std::vector<std::string> out;
  for (const auto& f : all)
    if (!IsLibraryFlag(f) && grouped.count(f.name) == 0) out.push_back(f.name);
  std::sort(out.begin(), out.end());
  return out;
}

std::vector<std::string> UnknownGroupedFlags(const Usage& u) {
  std::vector<std::string> out;
  for (const std::string& name : GroupedNames(u)) {
    gflags::CommandLineFlagInfo f;
    if (!gflags::GetCommandLineFlagInfo(name.c_str(), &f)) out.push_back(name);
  }
  return out;
}

}  // namespace rkv::cli
