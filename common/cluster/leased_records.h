// SPDX-License-Identifier: Apache-2.0
// ReadLeasedRecords: the records of one kind that a live server put under its own membership
// lease (NAME/suspects/..., NAME/draining/...: common/cluster/suspect_record.h,
// drain_record.h). A record counts only when it decodes (Record::Decode checks every field and
// that the key names it) and it is attached to the current lease of the server it belongs to
// (Record::*owner: the reporter of a suspicion, the server being drained). A record put by
// hand, by a former process of that id or without a lease never counts: it would never go.
// The coordinator's placement and `kvctl cluster status` read them through this one filter, so
// both count the same records.
// Thread safety: free functions; the EtcdClient's own rules apply.
#ifndef RKV_COMMON_CLUSTER_LEASED_RECORDS_H_
#define RKV_COMMON_CLUSTER_LEASED_RECORDS_H_

#include <cstdint>
#include <map>
#include <string>
#include <string_view>
#include <vector>

#include "common/etcd/etcd_client.h"
#include "rkv/status.h"

namespace rkv::cluster {

template <class Record>
struct LeasedRecords {
  std::vector<Record> kept;            // decoded, under their server's live lease
  std::vector<std::string> malformed;  // "KEY: why" of each record that did not decode
  size_t unleased = 0;                 // decoded, but not under their server's live lease
  bool more = false;                   // etcd held more than one range read returns
};

// Filters `kvs` (read under `cluster_prefix`; every key starts with it). `leases`: each live
// server's id -> its membership lease.
template <class Record>
LeasedRecords<Record> FilterLeased(const std::vector<EtcdKv>& kvs, std::string_view cluster_prefix,
                                   const std::map<uint32_t, int64_t>& leases,
                                   uint32_t Record::*owner) {
  LeasedRecords<Record> out;
  for (const EtcdKv& kv : kvs) {
    Record r;
    const std::string_view key(kv.key);
    const std::string_view suffix = key.substr(0, cluster_prefix.size()) == cluster_prefix
                                        ? key.substr(cluster_prefix.size())
                                        : std::string_view();
    if (Status s = Record::Decode(suffix, kv.value, &r); !s.ok()) {
      out.malformed.push_back(kv.key + ": " + s.ToString());
      continue;
    }
    const auto it = leases.find(r.*owner);
    if (it == leases.end() || kv.lease == 0 || kv.lease != it->second) {
      ++out.unleased;
      continue;
    }
    out.kept.push_back(r);
  }
  return out;
}

// Reads cluster_prefix + dir (one range read) and filters it as FilterLeased does.
template <class Record>
[[nodiscard]] Status ReadLeasedRecords(EtcdClient* etcd, const std::string& cluster_prefix,
                                       const std::string& dir,
                                       const std::map<uint32_t, int64_t>& leases,
                                       uint32_t Record::*owner, LeasedRecords<Record>* out) {
  std::vector<EtcdKv> kvs;
  bool more = false;
  Status s = etcd->GetPrefix(cluster_prefix + dir, &kvs, nullptr, false, &more);
  if (!s.ok()) return s;
  *out = FilterLeased<Record>(kvs, cluster_prefix, leases, owner);
  out->more = more;
  return Status::Ok();
}

}  // namespace rkv::cluster

#endif  // RKV_COMMON_CLUSTER_LEASED_RECORDS_H_
