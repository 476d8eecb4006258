// SPDX-License-Identifier: Apache-2.0
// Harness: the text parsers of common/parse.h (ParseSize for --memory and size flags,
// ParseHostPort for addresses), the data directory's file names (server/durability/data_dir.h:
// a planted or renamed file must never parse as another number) and ParseExchange.
// Invariants: ParseSize accepts only text that starts with decimal digits, and its result is
// those digits' value times a power of 1024 (K, M, G, T) without overflow; ParseHostPort splits
// at the last ':' with a port 1..65535 written in at most 5 digits, so host ":" port gives the
// text back (up to leading zeros of the port); a parsed log or snapshot name is exactly the name
// LogFileName / SnapshotFileName gives for its number (the names are canonical); a parsed
// exchange name is one of the names ExchangeName gives (or "cm"). Inputs are cut at the first
// NUL: these texts come from argv and file names.
#include "common/parse.h"

#include <algorithm>
#include <string>

#include "common/verbs/conn_params.h"
#include "fuzz/fuzz_util.h"
#include "server/durability/data_dir.h"

namespace {
using namespace rkv;

void CheckSize(const std::string& text) {
  uint64_t bytes = 0;
  Status s = ParseSize(text, &bytes);
  if (!s.ok()) {
    FUZZ_CHECK(s.code() == Code::kInvalidArgument);
    return;
  }
  size_t digits = 0;
  while (digits < text.size() && text[digits] >= '0' && text[digits] <= '9') ++digits;
  FUZZ_CHECK(digits > 0);
  unsigned __int128 v = 0;
  for (size_t i = 0; i < digits; ++i) {
    v = v * 10 + unsigned(text[i] - '0');
    if (v > ~uint64_t{0}) break;
  }
  FUZZ_CHECK(v <= ~uint64_t{0});  // an overflowing number is refused
  bool found = false;
  for (int shift : {0, 10, 20, 30, 40})
    if ((v << shift) == bytes) found = true;
  FUZZ_CHECK(found);
  FUZZ_CHECK(text.size() - digits <= 3);  // at most a suffix like "KiB"
}

void CheckHostPort(const std::string& text) {
  std::string host;
  uint16_t port = 0;
  Status s = ParseHostPort(text, &host, &port);
  if (!s.ok()) {
    FUZZ_CHECK(s.code() == Code::kInvalidArgument);
    return;
  }
  const size_t colon = text.rfind(':');
  FUZZ_CHECK(colon != std::string::npos && colon > 0);
  FUZZ_CHECK(host == text.substr(0, colon));
  FUZZ_CHECK(port != 0);
  std::string p = text.substr(colon + 1);
  FUZZ_CHECK(!p.empty() && p.size() <= 5);
  while (p.size() > 1 && p[0] == '0') p.erase(0, 1);
  FUZZ_CHECK(p == std::to_string(port));
}

void CheckDataDirNames(const std::string& text) {
  uint64_t n = 0;
  if (wal::ParseLogFileName(text, &n)) FUZZ_CHECK(wal::LogFileName(n) == text);
  if (wal::ParseSnapshotFileName(text, &n)) FUZZ_CHECK(wal::SnapshotFileName(n) == text);
}

void CheckExchangeName(const std::string& text) {
  Exchange x;
  if (ParseExchange(text, &x)) FUZZ_CHECK(text == ExchangeName(x) || text == "cm");
}

void Seeds(const fuzz::SeedWriter& w) {
  const char* seeds[] = {"4096",
                         "64K",
                         "256M",
                         "1G",
                         "1GiB",
                         "2TB",
                         "10.0.0.1:7470",
                         "host.example:1",
                         "[fe80::1]:65535",
                         "wal-0000000000000001.log",
                         "snap-00000000000000ff.rkv",
                         "wal-0000000000000001.log.tmp",
                         "rdma_cm"};
  int i = 0;
  for (const char* s : seeds) w.Write(std::to_string(i++), std::string_view(s));
}
}  // namespace

RKV_FUZZ_SEEDS(Seeds)

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  // The text as a command line or a directory listing gives it: no NUL byte.
  std::string text(fuzz::AsText(data, size));
  text.resize(std::min(text.size(), text.find('\0')));
  CheckSize(text);
  CheckHostPort(text);
  CheckDataDirNames(text);
  CheckExchangeName(text);
  return 0;
}
