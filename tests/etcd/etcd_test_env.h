// SPDX-License-Identifier: Apache-2.0
// What tests/etcd/etcd_client.sh tells the etcd tests: the members' client URLs
// (RKV_ETCD_ENDPOINTS, comma-separated) and their pids (RKV_ETCD_PIDS, space-separated, same
// order). Test helper only.
#ifndef RKV_TESTS_ETCD_ETCD_TEST_ENV_H_
#define RKV_TESTS_ETCD_ETCD_TEST_ENV_H_

#include <gtest/gtest.h>
#include <sys/types.h>

#include <cstdlib>
#include <memory>
#include <sstream>
#include <string>
#include <vector>

#include "common/cluster/cluster_address.h"
#include "common/etcd/etcd_client.h"
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

// A client of the test cluster in *etcd, and in *cluster its endpoints and a cluster name of
// the running test's own (so each test has its own prefix).
inline ::testing::AssertionResult OpenForTest(std::unique_ptr<EtcdClient>* etcd,
                                              cluster::ClusterAddress* cluster) {
  EtcdSettings s = Settings();
  if (s.endpoints.empty())
    return ::testing::AssertionFailure() << "RKV_ETCD_ENDPOINTS is not set (run etcd_client.sh)";
  if (Status st = EtcdClient::Open(s, etcd); !st.ok())
    return ::testing::AssertionFailure() << "EtcdClient::Open: " << st.ToString();
  cluster->endpoints = s.endpoints;
  cluster->name = ::testing::UnitTest::GetInstance()->current_test_info()->name();
  return ::testing::AssertionSuccess();
}

}  // namespace rkv::etcd_test

#endif  // RKV_TESTS_ETCD_ETCD_TEST_ENV_H_
