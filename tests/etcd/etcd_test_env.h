// SPDX-License-Identifier: Apache-2.0
// What tests/etcd/etcd_client.sh tells the etcd tests: the members' client URLs
// (RKV_ETCD_ENDPOINTS, comma-separated) and their pids (RKV_ETCD_PIDS, space-separated, same
// order). Test helper only.
#ifndef RKV_TESTS_ETCD_ETCD_TEST_ENV_H_
#define RKV_TESTS_ETCD_ETCD_TEST_ENV_H_

#include <sys/types.h>

#include <cstdlib>
#include <sstream>
#include <string>
#include <vector>

#include "common/etcd/etcd_transport.h"

namespace rkv::etcd_test {

inline std::vector<std::string> Split(const std::string& s, char sep) {
  std::vector<std::string> out;
  std::stringstream in(s);
  std::string x;
  while (std::getline(in, x, sep))
    if (!x.empty()) out.push_back(x);
  return out;
}

// The cluster's endpoints (none when not run by etcd_client.sh).
inline EtcdSettings Settings() {
  const char* e = std::getenv("RKV_ETCD_ENDPOINTS");
  EtcdSettings s;
  if (e != nullptr) s.endpoints = Split(e, ',');
  return s;
}

inline std::vector<pid_t> MemberPids() {
  const char* p = std::getenv("RKV_ETCD_PIDS");
  std::vector<pid_t> pids;
  for (const std::string& x : Split(p != nullptr ? p : "", ' '))
    pids.push_back(pid_t(std::stol(x)));
  return pids;
}

}  // namespace rkv::etcd_test

#endif  // RKV_TESTS_ETCD_ETCD_TEST_ENV_H_
