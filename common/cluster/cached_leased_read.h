// SPDX-License-Identifier: Apache-2.0
// CachedLeasedRead: one kind of report that live servers put under their membership leases
// (NAME/suspects/, NAME/ringloss/, NAME/draining/), read through ReadLeasedRecords
// (common/cluster/leased_records.h) at most once per `every`, and turned into the list the
// coordinator's placement takes (`take`: the items of one record). Between reads, and after a
// read that failed, the last answer is given (a failed range read must not hold a failover up;
// the error is still returned, for the log). Invalidate makes the next Read go to etcd (a
// change the caller made or was told of).
// Thread safety: none (the coordinator's loop thread). Ownership: borrows the EtcdClient for
// each call.
#ifndef RKV_COMMON_CLUSTER_CACHED_LEASED_READ_H_
#define RKV_COMMON_CLUSTER_CACHED_LEASED_READ_H_

#include <chrono>
#include <cstdint>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "common/cluster/leased_records.h"
#include "common/etcd/etcd_client.h"
#include "rkv/status.h"

namespace rkv::cluster {

template <class Record, class Out>
class CachedLeasedRead {
 public:
  using Clock = std::chrono::steady_clock;
  using Take = void (*)(const Record&, std::vector<Out>*);

  // dir: under the cluster's prefix, e.g. "suspects/"; owner: the record's server field.
  CachedLeasedRead(std::string dir, uint32_t Record::*owner, std::chrono::milliseconds every,
                   Take take)
      : dir_(std::move(dir)), owner_(owner), every_(every), take_(take) {}

  // *out: the reports of live servers under their current leases. *fresh (may be null): the
  // filtered read when this call went to etcd and succeeded (its skipped records, to log);
  // else left as it is, and *read (may be null) says which.
  [[nodiscard]] Status Read(EtcdClient* etcd, const std::string& cluster_prefix,
                            const std::map<uint32_t, int64_t>& leases, std::vector<Out>* out,
                            LeasedRecords<Record>* fresh = nullptr, bool* read = nullptr) {
    if (read != nullptr) *read = false;
    const Clock::time_point now = Clock::now();
    if (now < next_) {
      *out = last_;
      return Status::Ok();
    }
    LeasedRecords<Record> got;
    Status s = ReadLeasedRecords(etcd, cluster_prefix, dir_, leases, owner_, &got);
    if (!s.ok()) {
      *out = last_;
      return s;
    }
    out->clear();
    for (const Record& r : got.kept) take_(r, out);
    last_ = *out;
    next_ = now + every_;
    if (fresh != nullptr) *fresh = std::move(got);
    if (read != nullptr) *read = true;
    return Status::Ok();
  }
  void Invalidate() { next_ = {}; }
  const std::string& dir() const { return dir_; }

 private:
  const std::string dir_;
  uint32_t Record::*const owner_;
  const std::chrono::milliseconds every_;
  const Take take_;
  Clock::time_point next_{};
  std::vector<Out> last_;
};

}  // namespace rkv::cluster

#endif  // RKV_COMMON_CLUSTER_CACHED_LEASED_READ_H_
