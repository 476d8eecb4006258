// SPDX-License-Identifier: Apache-2.0
// lincheck: checks a history file (tests/lincheck/history.h has the format) for per-key
// linearizability and prints the checker's summary.
//   lincheck [--max_failures=N] FILE
// Exit status: 0 linearizable, 1 violations or inconclusive keys, 2 unreadable file or usage.
#include <cstdlib>
#include <cstring>
#include <iostream>
#include <string>

#include "tests/lincheck/checker.h"
#include "tests/lincheck/history.h"

int main(int argc, char** argv) {
  size_t max_failures = 5;
  std::string path;
  for (int i = 1; i < argc; ++i) {
    if (std::strncmp(argv[i], "--max_failures=", 15) == 0) {
      max_failures = std::strtoul(argv[i] + 15, nullptr, 10);
    } else if (argv[i][0] != '-' && path.empty()) {
      path = argv[i];
    } else {
      path.clear();
      break;
    }
  }
  if (path.empty()) {
    std::cerr << "usage: lincheck [--max_failures=N] HISTORY_FILE\n";
    return 2;
  }
  rkv::lincheck::History history;
  std::string error;
  if (!history.Load(path, &error)) {
    std::cerr << "lincheck: " << error << "\n";
    return 2;
  }
  rkv::lincheck::CheckReport report = rkv::lincheck::Checker().Check(history);
  std::cout << report.Summary(max_failures) << "\n";
  return report.ok() ? 0 : 1;
}
