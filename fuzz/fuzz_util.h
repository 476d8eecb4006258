// SPDX-License-Identifier: Apache-2.0
// Shared pieces of the libFuzzer harnesses (docs/fuzzing.md).
//
// FUZZ_CHECK(cond): an invariant of the decoder under test; a failure prints the condition and
// aborts, which libFuzzer reports as a crash and saves the input.
// RKV_FUZZ_SEEDS(fn): each harness names a function that writes its seed inputs. Running the
// harness with RKV_FUZZ_WRITE_SEEDS=DIR writes them to DIR (fuzz/make_corpus does this for every
// harness) and exits before any fuzzing.
// Thread safety: harnesses are single-threaded.
#ifndef RKV_FUZZ_FUZZ_UTIL_H_
#define RKV_FUZZ_FUZZ_UTIL_H_

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <string_view>

#define FUZZ_CHECK(cond)                                                                \
  do {                                                                                  \
    if (!(cond)) {                                                                      \
      std::fprintf(stderr, "%s:%d: invariant failed: %s\n", __FILE__, __LINE__, #cond); \
      std::abort();                                                                     \
    }                                                                                   \
  } while (0)

namespace rkv::fuzz {

// Writes one seed file DIR/seed-<name>.
class SeedWriter {
 public:
  explicit SeedWriter(std::string dir) : dir_(std::move(dir)) {}
  void Write(const std::string& name, std::string_view bytes) const {
    const std::string path = dir_ + "/seed-" + name;
    std::FILE* f = std::fopen(path.c_str(), "wb");
    if (f == nullptr || std::fwrite(bytes.data(), 1, bytes.size(), f) != bytes.size()) {
      std::perror(path.c_str());
      std::exit(1);
    }
    std::fclose(f);
  }
  void Write(const std::string& name, const void* data, size_t size) const {
    Write(name, std::string_view(static_cast<const char*>(data), size));
  }

 private:
  std::string dir_;
};

inline std::string_view AsText(const uint8_t* data, size_t size) {
  return std::string_view(reinterpret_cast<const char*>(data), size);
}

}  // namespace rkv::fuzz

#define RKV_FUZZ_SEEDS(fn)                                       \
  extern "C" int LLVMFuzzerInitialize(int*, char***) {           \
    if (const char* dir = std::getenv("RKV_FUZZ_WRITE_SEEDS")) { \
      fn(rkv::fuzz::SeedWriter(dir));                            \
      std::exit(0);                                              \
    }                                                            \
    return 0;                                                    \
  }

#endif  // RKV_FUZZ_FUZZ_UTIL_H_
