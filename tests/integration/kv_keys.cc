// SPDX-License-Identifier: Apache-2.0
// kv_keys: many PUTs or GETs in one process, for scripts that would otherwise start one kvctl
// per key (each start a connect, and through a cluster address an etcd read: seconds on the
// emulated sandbox; tests/integration/cluster.sh):
//   kv_keys --server=ADDR put|get PREFIX COUNT [--value_prefix=V] [--auth_token_file=F]
// put: PREFIX-k = V-k for k in 0..COUNT-1; prints `kv_keys: put N ok, N failed[; first: S]`
// and exits 0 when every PUT was acknowledged.
// get: reads each PREFIX-k and sorts it: right (V-k), wrong (another value), not found,
// unavailable (UNAVAILABLE), other (any other error); prints
// `kv_keys: get right N wrong N notfound N unavailable N other N[; first other: S]` and exits
// 0 when every key read right. 1 otherwise; 2 on a setup failure.
#include <gflags/gflags.h>

#include <cstdio>
#include <cstdlib>
#include <memory>
#include <string>

#include "common/auth.h"
#include "rkv/client.h"

DEFINE_string(server, "", "ADDR:PORT or etcd://HOST:PORT/NAME");
DEFINE_string(value_prefix, "value", "values are VALUE_PREFIX-k");
DEFINE_string(auth_token_file, "", "the token file, if the servers require one");
DEFINE_int32(timeout_ms, 3000, "connect and RPC timeout");

int main(int argc, char** argv) {
  gflags::SetUsageMessage("kv_keys --server=ADDR put|get PREFIX COUNT");
  gflags::ParseCommandLineFlags(&argc, &argv, true);
  const int count = argc == 4 ? std::atoi(argv[3]) : -1;
  const std::string op = argc == 4 ? argv[1] : "";
  if ((op != "put" && op != "get") || count <= 0) {
    std::fprintf(stderr, "kv_keys: usage: kv_keys --server=ADDR put|get PREFIX COUNT\n");
    return 2;
  }
  const std::string prefix = argv[2];
  rkv::Options o;
  o.connect_timeout_ms = o.rpc_timeout_ms = FLAGS_timeout_ms;
  rkv::Status s;
  if (!FLAGS_auth_token_file.empty() &&
      !(s = rkv::auth::LoadTokenFile(FLAGS_auth_token_file, &o.auth_token)).ok()) {
    std::fprintf(stderr, "kv_keys: %s\n", s.ToString().c_str());
    return 2;
  }
  std::unique_ptr<rkv::Client> c;
  if (!(s = rkv::Client::Connect(FLAGS_server, o, &c)).ok()) {
    std::fprintf(stderr, "kv_keys: connect: %s\n", s.ToString().c_str());
    return 2;
  }
  int right = 0, wrong = 0, notfound = 0, unavailable = 0, other = 0;
  std::string first, v;
  for (int k = 0; k < count; ++k) {
    const std::string key = prefix + "-" + std::to_string(k);
    const std::string want = FLAGS_value_prefix + "-" + std::to_string(k);
    s = op == "put" ? c->Put(key, want) : c->Get(key, &v);
    if (s.ok() && (op == "put" || v == want)) {
      ++right;
    } else if (s.ok()) {
      ++wrong;
    } else if (s.IsNotFound()) {
      ++notfound;
    } else if (s.code() == rkv::Code::kUnavailable && op == "get") {
      ++unavailable;
    } else {
      ++other;
      if (first.empty()) first = key + ": " + s.ToString();
    }
  }
  if (op == "put")
    std::printf("kv_keys: put %d ok, %d failed%s%s\n", right, other,
                first.empty() ? "" : "; first: ", first.c_str());
  else
    std::printf("kv_keys: get right %d wrong %d notfound %d unavailable %d other %d%s%s\n", right,
                wrong, notfound, unavailable, other,
                first.empty() ? "" : "; first other: ", first.c_str());
  return right == count ? 0 : 1;
}
