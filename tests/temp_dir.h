// SPDX-License-Identifier: Apache-2.0
// TempDir: a fresh directory under /tmp for one test (mkdtemp), removed with everything in it
// when the object goes. Test helper only; `path` is empty if mkdtemp failed.
#ifndef RKV_TESTS_TEMP_DIR_H_
#define RKV_TESTS_TEMP_DIR_H_

#include <stdlib.h>

#include <filesystem>
#include <string>
#include <system_error>

namespace rkv {

struct TempDir {
  TempDir() {
    char tmpl[] = "/tmp/rkv-test.XXXXXX";
    if (mkdtemp(tmpl) != nullptr) path = tmpl;
  }
  ~TempDir() {
    std::error_code ec;
    if (!path.empty()) std::filesystem::remove_all(path, ec);
  }
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;
  std::string path;
};

}  // namespace rkv

#endif  // RKV_TESTS_TEMP_DIR_H_
