// SPDX-License-Identifier: Apache-2.0
// EtcdClient: the etcd v3 operations rkv uses (keys, prefix ranges, transactions guarded by
// revisions, leases, watches), over EtcdTransport (endpoints with failover, TLS, auth).
//
// Every answer is decoded by common/etcd/etcd_json.h (untrusted input: fields and types
// checked). Keys and values are bytes. Deadlines: every call has one (kCallTimeoutMs unless it
// takes one). A transaction that ran at a member whose answer was lost may have been applied:
// guard writes with compares (a revision read before) so that a second run fails the compare
// instead of applying twice, and re-read after an error.
// Thread safety: every method may be called from several threads at once. No exception leaves
// a method. Ownership: owns its transport.
#ifndef RKV_COMMON_ETCD_ETCD_CLIENT_H_
#define RKV_COMMON_ETCD_ETCD_CLIENT_H_

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "common/etcd/etcd_json.h"
#include "common/etcd/etcd_transport.h"
#include "rkv/status.h"

namespace rkv {

class EtcdClient {
 public:
  static constexpr int kCallTimeoutMs = 5000;
  // The most keys one prefix read returns (well inside kMaxEtcdResponseBytes for small values).
  static constexpr int64_t kMaxRangeKeys = 4096;

  // What a transaction compares, as etcd's Compare message: the key's target `op` number (or
  // its value, for kValue).
  struct Compare {
    enum Target { kVersion, kCreateRevision, kModRevision, kValue };
    enum Result { kEqual, kGreater, kLess, kNotEqual };
    std::string key;
    Target target = kModRevision;
    Result result = kEqual;
    int64_t number = 0;  // kVersion, kCreateRevision, kModRevision (0: the key does not exist)
    std::string value;   // kValue
  };
  // One operation of a transaction's branch.
  struct Op {
    enum Type { kPut, kDelete };
    Type type = kPut;
    std::string key, value;
    int64_t lease = 0;  // kPut: attach to this lease (0: none)
    static Op Put(std::string k, std::string v, int64_t lease = 0) {
      return {kPut, std::move(k), std::move(v), lease};
    }
    static Op Delete(std::string k) { return {kDelete, std::move(k), {}, 0}; }
  };
  // Events of one watch message and its revision; return true to stop watching.
  using OnEvents = std::function<bool(const std::vector<EtcdEvent>& events, int64_t revision)>;

  [[nodiscard]] static Status Open(const EtcdSettings& settings, std::unique_ptr<EtcdClient>* out);

  // The key: *found, and *kv when found; *revision: the store's revision of the read.
  [[nodiscard]] Status Get(const std::string& key, bool* found, EtcdKv* kv, int64_t* revision);
  // Every key starting with `prefix` (at most kMaxRangeKeys, in key order); keys_only leaves
  // values empty. *more: there were more.
  [[nodiscard]] Status GetPrefix(const std::string& prefix, std::vector<EtcdKv>* kvs,
                                 int64_t* revision, bool keys_only = false, bool* more = nullptr);
  [[nodiscard]] Status Put(const std::string& key, const std::string& value, int64_t lease = 0);
  [[nodiscard]] Status Delete(const std::string& key);
  // If every compare holds, runs `then`, else `otherwise`; *succeeded says which.
  [[nodiscard]] Status Txn(const std::vector<Compare>& compares, const std::vector<Op>& then,
                           const std::vector<Op>& otherwise, bool* succeeded,
                           int64_t* revision = nullptr);

  [[nodiscard]] Status GrantLease(int64_t ttl_s, int64_t* id);
  // Refreshes the lease; *ttl_left 0: it has expired (its keys are gone).
  [[nodiscard]] Status KeepAlive(int64_t id, int64_t* ttl_left);
  [[nodiscard]] Status RevokeLease(int64_t id);

  // Watches `key` (with prefix: every key under it) from revision `from` (> 0), handing each
  // message's events to on_events until it returns true (OK), etcd cancels the watch (an
  // error: e.g. `from` was compacted; re-read and watch again), or timeout_ms passes (kTimeout).
  // interrupt (may be empty; must not throw): looked at every ~20 ms; true ends the call
  // (kTimeout "interrupted"), so a long watch still returns promptly (a stop, a verdict).
  [[nodiscard]] Status Watch(const std::string& key, bool prefix, int64_t from, int timeout_ms,
                             const OnEvents& on_events,
                             const std::function<bool()>& interrupt = nullptr);

  EtcdTransport& transport() { return *transport_; }
  // The first key after every key that starts with `prefix` (a range end); "\0" if none.
  static std::string PrefixEnd(const std::string& prefix);

 private:
  explicit EtcdClient(std::unique_ptr<EtcdTransport> t) : transport_(std::move(t)) {}
  std::unique_ptr<EtcdTransport> transport_;
};

}  // namespace rkv

#endif  // RKV_COMMON_ETCD_ETCD_CLIENT_H_
