// SPDX-License-Identifier: Apache-2.0
// repl_fill: fills a replicated cluster whose servers have different --memory until writes
// fail, and checks how they fail (tests/integration/replicas.sh, "a full replica"):
//   repl_fill --cluster=etcd://H:P/NAME [--value_size=N] [--keys=N] [--pause_file=F]
// PUTs keys fill-0, fill-1, ... (values of value_size bytes, each naming its key) until `keys`
// or until 40 PUTs in a row failed; with --pause_file, creates F then and waits (up to 15
// minutes) until F is gone (the caller rebalances the full cluster meanwhile); then DELETEs
// every key whose PUT's outcome was unknown (TIMEOUT) and every fifth (--delete_every)
// acknowledged key, PUTs a small value to a new key of each slot (--then_write_ms: and rewrites
// them that long, or until --stop_file exists), and reads every key back.
// The rules (server/cluster/replicator.h): a write no replica could take fails TABLE_FULL (as
// a single server's would), never UNAVAILABLE (a slot blocked by an earlier write) or
// CONNECTION_LOST; a write the backups applied but the primary's table could not take is
// TIMEOUT (kept) and a DELETE of its key then succeeds (it supersedes the kept write); an
// acknowledged value reads back; a deleted key reads NOT_FOUND.
// Prints a summary line `repl_fill: ...`; exit 0 when every rule held, 1 otherwise, 2 on a
// setup failure.
#include <gflags/gflags.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <map>
#include <string>
#include <thread>
#include <vector>

#include "rkv/client.h"

DEFINE_string(cluster, "", "etcd://HOST:PORT/NAME of a replicated cluster");
DEFINE_int32(value_size, 30000, "bytes per value");
DEFINE_int32(keys, 4000, "PUTs at most");
DEFINE_string(pause_file, "", "after the PUTs, create this file and wait until it is gone");
DEFINE_int32(delete_every, 5, "then DELETE every Nth acknowledged key (1: every one)");
DEFINE_int32(then_write_ms, 0, "after the small PUTs, keep rewriting them for this long");
DEFINE_string(stop_file, "", "with --then_write_ms: stop rewriting early once this file exists");

namespace {
std::string ValueOf(const std::string& key, size_t n) {
  std::string v = key + ":";
  while (v.size() < n) v += char('a' + v.size() % 26);
  v.resize(n);
  return v;
}
}  // namespace

int main(int argc, char** argv) {
  gflags::ParseCommandLineFlags(&argc, &argv, true);
  using rkv::Code;
  rkv::Options o;
  o.rpc_timeout_ms = 20000;  // longer than a replicated write's 10 s
  std::unique_ptr<rkv::Client> c;
  rkv::Status s = rkv::Client::Connect(FLAGS_cluster, o, &c);
  if (!s.ok()) {
    std::fprintf(stderr, "repl_fill: connect: %s\n", s.ToString().c_str());
    return 2;
  }
  std::map<std::string, std::string> want;  // key -> value ("" : must be absent)
  std::map<std::string, int> codes;
  std::vector<std::string> unknown;
  int bad = 0, in_a_row = 0;
  auto wrong = [&](const std::string& what, const rkv::Status& st) {
    if (++bad <= 10) std::printf("repl_fill: WRONG: %s: %s\n", what.c_str(), st.ToString().c_str());
  };
  int i = 0;
  for (; i < FLAGS_keys && in_a_row < 40; ++i) {
    const std::string key = "fill-" + std::to_string(i);
    const std::string value = ValueOf(key, size_t(FLAGS_value_size));
    s = c->Put(key, value);
    ++codes[rkv::CodeName(s.code())];
    if (s.ok()) {
      want[key] = value;
      in_a_row = 0;
      continue;
    }
    ++in_a_row;
    if (s.code() == Code::kTimeout) {
      unknown.push_back(key);
    } else if (s.code() != Code::kTableFull) {
      wrong("PUT " + key, s);
    }
  }
  if (!FLAGS_pause_file.empty()) {
    FILE* f = std::fopen(FLAGS_pause_file.c_str(), "w");
    if (f == nullptr) {
      std::fprintf(stderr, "repl_fill: cannot create %s\n", FLAGS_pause_file.c_str());
      return 2;
    }
    std::fprintf(f, "filled\n");
    std::fclose(f);
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::minutes(15);
    while (access(FLAGS_pause_file.c_str(), F_OK) == 0) {
      if (std::chrono::steady_clock::now() > deadline) {
        std::fprintf(stderr, "repl_fill: %s still there after 15 minutes\n",
                     FLAGS_pause_file.c_str());
        return 2;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
    }
  }
  int deleted = 0;
  for (const std::string& key : unknown) {
    s = c->Delete(key);
    if (!s.ok() && !s.IsNotFound()) {
      wrong("DELETE of " + key + " (its PUT's outcome was unknown)", s);
      continue;
    }
    want[key] = "";
    ++deleted;
  }
  int n = 0;
  for (auto& [key, value] : want) {
    if (value.empty() || n++ % std::max(FLAGS_delete_every, 1) != 0) continue;
    s = c->Delete(key);
    if (!s.ok()) {
      wrong("DELETE of " + key, s);
      continue;
    }
    value = "";
    ++deleted;
  }
  // With room again, small writes succeed.
  int small_ok = 0;
  for (int k = 0; k < 50; ++k) {
    const std::string key = "small-" + std::to_string(k);
    s = c->Put(key, "v" + key);
    if (s.ok()) {
      want[key] = "v" + key;
      ++small_ok;
    } else {
      wrong("PUT " + key + " after deletes", s);
    }
  }
  // Then more small writes, one after the other on the same connections (a log ring refused
  // while the cluster was full is asked for again: tests/integration/replicas.sh, ringroom).
  int rewrites = 0;
  const auto write_until =
      std::chrono::steady_clock::now() + std::chrono::milliseconds(FLAGS_then_write_ms);
  while (FLAGS_then_write_ms > 0 && std::chrono::steady_clock::now() < write_until &&
         (FLAGS_stop_file.empty() || access(FLAGS_stop_file.c_str(), F_OK) != 0)) {
    const std::string key = "small-" + std::to_string(rewrites % 50);
    const std::string value = "r" + std::to_string(rewrites) + key;
    s = c->Put(key, value);
    ++rewrites;
    if (s.ok()) {
      want[key] = value;
    } else {
      wrong("PUT " + key + " (a rewrite)", s);
      want.erase(key);  // its value is not known now: not read back
    }
  }
  int checked = 0;
  for (const auto& [key, value] : want) {
    std::string got;
    s = c->Get(key, &got);
    ++checked;
    if (value.empty() ? !s.IsNotFound() : (!s.ok() || got != value))
      wrong("GET " + key + (value.empty() ? " (deleted)" : ""),
            s.ok() ? rkv::Status(Code::kProtocolError, "another value") : s);
  }
  std::string summary;
  for (const auto& [code, count] : codes) summary += " " + code + " " + std::to_string(count);
  std::printf(
      "repl_fill: %d PUTs:%s; %zu of unknown outcome deleted, %d deletes in all; %d small PUTs "
      "after, %d rewrites; %d keys read back; %d wrong\n",
      i, summary.c_str(), unknown.size(), deleted, small_ok, rewrites, checked, bad);
  return bad == 0 && codes["TABLE_FULL"] + codes["TIMEOUT"] > 0 ? 0 : 1;
}
