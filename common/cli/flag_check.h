// SPDX-License-Identifier: Apache-2.0
// PrecheckFlags: checks a program's command line against its gflags before gflags parses it, so
// that a misspelt flag or a bad value gets the program's own usage exit code (gflags exits with
// status 1, which kvctl documents as NOT_FOUND and kvbench as "operations failed"), and so that a
// flagfile is held to the same rules as the command line (gflags silently ignores unknown flags
// in a flagfile, and a line without leading dashes there silently disables the lines after it:
// a typo in /etc/rkv/kvserver.flags must not start a server without --auth_token_file).
// Thread safety: call once from main before any thread starts; it sets the flags it checks
// (ParseCommandLineFlags sets them again to the same values).
#ifndef RKV_COMMON_CLI_FLAG_CHECK_H_
#define RKV_COMMON_CLI_FLAG_CHECK_H_

#include <string>

namespace rkv::cli {

// Checks argv[1..argc) up to a bare "--":
//  - every "-name", "--name", "--name=value", "--noname" names a defined flag ("no" only before
//    a bool), or one listed in --undefok; "--name value" takes the next argument as the value;
//  - every value parses for its flag's type;
//  - every --flagfile=F (also inside flagfiles, 8 levels deep at most) is a readable file of at
//    most 1 MiB whose lines are blank, "#" comments, or flags checked by the same rules.
// --fromenv / --tryfromenv are left to gflags. Returns "" if all is well, else one line naming
// the argument (and the flagfile and line number).
std::string PrecheckFlags(int argc, char** argv);

// Makes sure file descriptors 0, 1 and 2 are open (on /dev/null if they were closed), so that a
// file the program opens later (a device, a log) never becomes its stdout: a closed stdout
// must not turn `kvctl get` into a write of a stored value to /dev/infiniband/rdma_cm.
void EnsureStandardFds();

}  // namespace rkv::cli

#endif  // RKV_COMMON_CLI_FLAG_CHECK_H_
