// SPDX-License-Identifier: Apache-2.0
// Usage: the --help and --version of rkv's programs (kvserver, kvctl, kvbench), one source for
// the terminal and for the manual pages (help2man renders --help and --version into section 1
// pages at build time: cmake/rkv_man.cmake).
//
// --help prints the program's synopsis, what it does, and its own flags grouped under headings
// ("Listening:", "Durability:", ...), each with its type, default and help text; the logging
// and gflags flags are left to --helpfull (gflags' full list). A flag of ours that no group
// names is still printed, under "Other flags:" (never hidden); tests/man/man_pages_test.sh
// fails when any flag of a program is missing from its --help or its page.
// --version prints "NAME (rkv) VERSION", then the wire protocol, table format and log format
// versions, then the licence.
//
// Thread safety: call from main before any thread starts (reads gflags' registry).
// Ownership: a Usage is a plain value; the pointers it holds are string literals.
#ifndef RKV_COMMON_CLI_USAGE_H_
#define RKV_COMMON_CLI_USAGE_H_

#include <string>
#include <vector>

namespace rkv::cli {

struct FlagGroup {
  const char* title;               // "Listening", printed as "Listening:"
  std::vector<const char*> flags;  // flag names, in the order printed
};

struct Usage {
  const char* name;         // program name, e.g. "kvserver"
  const char* synopsis;     // one or more lines, each a full command line ("kvserver --listen=...")
  const char* description;  // paragraphs, '\n' separated, each at most ~78 columns a line
  std::vector<FlagGroup> groups;
  const char* epilogue;       // closing paragraphs (exit status, see also); may be ""
  std::string more_versions;  // more "NAME format N" lines for --version (kvserver: its log)
};

// If argv[1..argc) holds --help/-help (before any bare "--"), prints HelpText to stdout and sets
// *exit_code to 0; if it holds --version/-version, prints VersionText; returns true in both cases
// (the program then exits with *exit_code). Otherwise returns false and changes nothing.
[[nodiscard]] bool HandleHelpOrVersion(int argc, char** argv, const Usage& usage, int* exit_code);

// The --help text described above.
std::string HelpText(const Usage& usage);

// The --version text: "NAME (rkv) X.Y.Z\n", the wire protocol and table format versions, the
// usage's more_versions, the licence.
std::string VersionText(const Usage& usage);

// Flags registered in this program that are ours (not glog's or gflags' own) and that no group
// of `usage` names; and names in `usage`'s groups that are not registered flags. Both empty when
// the groups are right (tests/cli/usage checks it for each program through --help).
std::vector<std::string> UngroupedFlags(const Usage& usage);
std::vector<std::string> UnknownGroupedFlags(const Usage& usage);

}  // namespace rkv::cli

#endif  // RKV_COMMON_CLI_USAGE_H_
