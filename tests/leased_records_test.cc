// SPDX-License-Identifier: Apache-2.0
// FilterLeased (common/cluster/leased_records.h): a record counts only when it decodes at its
// own key and sits under the live membership lease of the server it belongs to; a record put
// without a lease, under another lease, for a server not live, at a key outside the prefix or
// with corrupted bytes is left out and said why.
#include "common/cluster/leased_records.h"

#include <gtest/gtest.h>

#include <map>
#include <string>
#include <vector>

#include "common/cluster/drain_record.h"
#include "common/cluster/suspect_record.h"

namespace rkv::cluster {
namespace {

const std::string kPrefix = "/rkv/cluster/t/";

EtcdKv Drain(uint32_t server, int64_t lease) {
  DrainRecord r;
  r.server = server;
  r.map_epoch = 9;
  EtcdKv kv;
  kv.key = kPrefix + r.KeySuffix();
  EXPECT_TRUE(r.Encode(&kv.value).ok());
  kv.lease = lease;
  return kv;
}

TEST(LeasedRecords, KeepsOnlyRecordsUnderTheirServersLiveLease) {
  const std::map<uint32_t, int64_t> leases = {{1, 100}, {2, 200}};
  std::vector<EtcdKv> kvs = {Drain(1, 100),  // kept
                             Drain(2, 999),  // another lease (a former registration)
                             Drain(3, 300),  // server 3 is not live
                             Drain(2, 0)};   // no lease: would never go
  EtcdKv corrupt = Drain(1, 100);
  corrupt.value[20] ^= 1;
  kvs.push_back(corrupt);
  EtcdKv elsewhere = Drain(1, 100);
  elsewhere.key = "/rkv/cluster/other/draining/1";  // outside the prefix
  kvs.push_back(elsewhere);
  EtcdKv moved = Drain(1, 100);
  moved.key = kPrefix + "draining/2";  // names another id than its bytes
  kvs.push_back(moved);
  const LeasedRecords<DrainRecord> got =
      FilterLeased<DrainRecord>(kvs, kPrefix, leases, &DrainRecord::server);
  ASSERT_EQ(got.kept.size(), 1u);
  EXPECT_EQ(got.kept[0].server, 1u);
  EXPECT_EQ(got.unleased, 3u);
  ASSERT_EQ(got.malformed.size(), 3u);
  EXPECT_EQ(got.malformed[0].rfind(corrupt.key, 0), 0u) << got.malformed[0];
  EXPECT_FALSE(got.more);
}

TEST(LeasedRecords, ASuspicionBelongsToItsReporter) {
  SuspectRecord r;
  r.reporter = 2;
  r.backup = 1;
  r.map_epoch = 4;
  EtcdKv kv;
  kv.key = kPrefix + r.KeySuffix();
  ASSERT_TRUE(r.Encode(&kv.value).ok());
  kv.lease = 200;
  // Under the reporter's lease: kept, whatever the suspected backup's lease is.
  LeasedRecords<SuspectRecord> got =
      FilterLeased<SuspectRecord>({kv}, kPrefix, {{1, 100}, {2, 200}}, &SuspectRecord::reporter);
  ASSERT_EQ(got.kept.size(), 1u);
  EXPECT_EQ(got.kept[0].backup, 1u);
  // Under the suspected backup's lease instead: not the reporter's report.
  kv.lease = 100;
  got = FilterLeased<SuspectRecord>({kv}, kPrefix, {{1, 100}, {2, 200}}, &SuspectRecord::reporter);
  EXPECT_TRUE(got.kept.empty());
  EXPECT_EQ(got.unleased, 1u);
}

}  // namespace
}  // namespace rkv::cluster
