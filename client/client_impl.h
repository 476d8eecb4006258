// SPDX-License-Identifier: Apache-2.0
// ClientImpl: the state behind rkv::Client (see rkv/client.h for the public contract).
// Thread safety: none (one thread at a time, as Client). Owns its Connection.
#ifndef RKV_CLIENT_CLIENT_IMPL_H_
#define RKV_CLIENT_CLIENT_IMPL_H_

#include <algorithm>
#include <functional>
#include <memory>
#include <random>
#include <string>

#include "client/connection.h"
#include "client/location_cache.h"
#include "common/table/cached_lookup.h"
#include "common/table/lookup.h"
#include "rkv/client.h"

namespace rkv {

struct MultiGetBatch;  // client/multi_get_batch.h
struct WriteBatch;     // client/write_batch.h

class ClientImpl {
 public:
  ClientImpl(std::string host, uint16_t port, Options options);
  // kInvalidArgument naming the first reconnect_* option that breaks its rule (rkv/client.h).
  static Status ValidateOptions(const Options& options);
  Status Open() { return Open(options_); }
  Status Get(std::string_view key, std::string* value);  // get_path.cc
  Status MultiGet(const std::vector<std::string_view>& keys, std::vector<std::string>* values,
                  std::vector<Status>* statuses);  // multi_get.cc
  // One MultiGet batch of n <= Connection::kMaxBatch keys in two halves (multi_get.cc), so that
  // a cluster MultiGet has a batch in flight on every server at once: StartBatch posts the first
  // round (it sets the status of a key it refuses), FinishBatch waits for it and decides every
  // other key. Nothing else may use the connection in between. A failed call leaves the status
  // of each key not yet decided as it was (the caller's placeholder) and returns the failure.
  Status StartBatch(const std::string_view* keys, size_t n, MultiGetBatch* b, Status* statuses);
  Status FinishBatch(const std::string_view* keys, MultiGetBatch* b, std::string* values,
                     Status* statuses);
  Status Put(std::string_view key, std::string_view value);
  Status Delete(std::string_view key);
  Status Execute(BatchOp* ops, size_t n);  // batch.cc
  // Execute's writes in three steps (batch.cc; client/write_batch.h), so that a cluster's
  // Execute has every server's writes in flight at once: PostWrites posts as many as the
  // server's credits allow; TakeWrite waits for one reply and decides its operation; after a
  // failure of either (the connection broke), FailWrites says for each undecided write whether
  // it was sent. The operations must be valid (Execute's checks).
  // Execute's check of one operation (key, value size, type, a GET's result); the connection
  // must be open.
  Status CheckOp(const BatchOp& op) const;
  Status PostWrites(WriteBatch* w);
  Status TakeWrite(WriteBatch* w);
  void FailWrites(WriteBatch* w, const Status& s);
  Status Stats(std::string* text);
  Status RequestSnapshot(std::string* message);
  Status Reconnect();

  // Automatic reconnection (the policy is in client.cc, Client's methods; see rkv/client.h).
  // True when auto_reconnect is on and the connection is unusable (never opened after a failed
  // reconnect, or broken by a failed completion, post, timeout or reply). Inline: it is the only
  // cost a failed GET (NOT_FOUND included) pays when nothing was lost.
  bool ShouldReconnect() const {
    return options_.auto_reconnect && (!conn_ || conn_->state() != Connection::State::kConnected);
  }
  // Reconnects with bounded backoff (Options::reconnect_*). OK once connected (*restarted: the
  // instance id changed); otherwise kConnectionLost naming `cause` and the last connect error.
  Status ReconnectWithBackoff(const Status& cause, bool* restarted);
  // For a PUT or DELETE (`op`) that failed with `cause` on a lost connection: reconnects, never
  // resends, and returns kServerRestarted or kConnectionLost saying whether the write's outcome
  // is unknown (`sent`: it went out on the lost connection) or it was not sent.
  Status LostWrite(const char* op, bool sent, const Status& cause);
  const ClientCounters& counters() const { return counters_; }
  const ServerInfo& info() const { return info_; }

  // Cluster (client/cluster_router.h): the GETs that follow read `slot`'s ownership word after
  // their entry, in the same doorbell, and fail with MOVED unless it says this server owns the
  // slot at an epoch no newer than `map_epoch` (common/cluster/ownership_word.h). The server
  // must have an ownership table (OPEN's owner_slots); slot < owner_slots.
  void ExpectOwner(uint32_t slot, uint64_t map_epoch) { ExpectOwners(&slot, 1, map_epoch); }
  // The same for a MultiGet's keys: up to Connection::kMaxBatch distinct slots, each word read
  // in every round trip.
  void ExpectOwners(const uint32_t* slots, int n, uint64_t map_epoch) {
    owner_check_ = n > 0;
    owner_count_ = std::min(n, int(Connection::kMaxBatch));
    for (int i = 0; i < owner_count_; ++i) owner_slots_[i] = slots[i];
    owner_epoch_ = map_epoch;
  }
  uint32_t owner_slots() const { return conn_ ? conn_->hello().owner_slots : 0; }
  bool broken() const { return !conn_ || conn_->state() != Connection::State::kConnected; }
  // Whether the connection is lost, including a DISCONNECTED the server's side sent that no
  // call has met yet (Connection::PeerGone).
  bool PeerGone() { return !conn_ || conn_->PeerGone(); }
  // Connection::SetAbandon for this client's waits (kept across reconnects); null clears it.
  // The cluster router sets it around operations on a replicated slot (FailoverWatch), the
  // replicator around a REPLICATE.
  void SetAbandon(const std::function<bool()>* abandon) {
    abandon_ = abandon;
    if (conn_) conn_->SetAbandon(abandon);
  }
  // One request of any op and its reply (kvserver's migration uses it for MIGRATE_*).
  Status Call(wire::Op op, std::string_view key, std::string_view value, std::string* payload) {
    return RpcStatus(op, key, value, payload);
  }
  // Pipelined calls (the replicator sends a write to every backup before it waits for any; the
  // migrator keeps up to the server's credits of copies in flight): PostCall sends a request
  // without waiting (*rid names it); *posted is false, and nothing is done, when the window is
  // full (take a reply first). TakeCall waits for the next reply (*rid: its request) and
  // answers as Call would (a refusal is the server's answer: the connection stays usable). A
  // transport failure (lost connection, timeout, bad reply) breaks the connection: the requests
  // still outstanding then have an unknown outcome. Call refuses while any is outstanding.
  Status PostCall(wire::Op op, std::string_view key, std::string_view value, uint64_t* rid,
                  bool* posted);
  Status TakeCall(uint64_t* rid, std::string* payload);
  // Non-blocking companions for a server worker's replication links (Connection::PollReply,
  // completion_fd, RearmEvents): TakeCall does not wait once CallReady() said true.
  bool CallReady() { return conn_ && conn_->PollReply(); }
  bool CallIdle() const { return conn_ && conn_->PipelineIdle(); }
  int completion_fd() const { return conn_ ? conn_->completion_fd() : -1; }
  Status RearmCompletions() {
    return conn_ ? conn_->RearmEvents() : Status(Code::kConnectionLost, "not connected");
  }
  // A replication link's log ring chains (Connection::PostRingChain; null conn_: not posted).
  Connection* connection() { return conn_.get(); }

 private:
  enum class Step { kDone, kRetry };
  // The GET attempt loop for a validated, already counted key.
  Status ReadKey(std::string_view key, std::string* value);
  Status Open(const Options& options);
  // Replaces the connection by one opened with `options`; counts the reconnect.
  Status Reopen(const Options& options, bool* restarted);
  // The backoff loop; a failure is kConnectionLost: `context`, then why reconnecting failed.
  Status ReconnectWithin(const std::string& context, bool* restarted);
  std::string Where() const { return host_ + ":" + std::to_string(port_); }
  Status Usable() const;
  layout::KeyHash KeyHashOf(std::string_view key) const {
    const wire::OpenReply& h = conn_->hello();
    return layout::HashKey(key, h.hash_seed, h.num_buckets);
  }
  Status CheckKey(std::string_view key) const;
  // Finishes a GET whose candidate buckets (the pair at region offset `pair`) have been probed:
  // reads its targets if any, and caches where the key was found.
  Step Resolve(const layout::Probe& probe, uint64_t pair, std::string_view key,
               const layout::KeyHash& kh, std::string* value, Status* result);
  // A GET through the cached location of the key (cached_read.cc): kDone with the value, or
  // kRetry to fall back to the bucket pair (no entry, or it did not verify: erased).
  Step ReadCached(std::string_view key, const layout::KeyHash& kh, std::string* value,
                  Status* result);
  // Reads every target of the probe (one round trip for as many as the buffer areas hold) and
  // decides: found, absent, or kRetry when a slot or target that may hold the key was changing.
  // *found: the index of the target that held the key.
  Step ReadTargets(const layout::Probe& probe, std::string_view key, std::string* value,
                   Status* result, int* found);
  Status RoundTrip(const Connection::ReadOp* ops, int n) {
    Status s = PostRound(ops, n);
    return s.ok() ? WaitRound() : s;
  }
  // RoundTrip's halves: posts the READs (in cluster mode the ownership words' after them, in
  // the same chain); waits for them (and checks the words: MOVED unless readable).
  Status PostRound(const Connection::ReadOp* ops, int n);
  Status WaitRound();
  Status RpcStatus(wire::Op op, std::string_view key, std::string_view value, std::string* payload);
  // A reply's code and payload as a Status (the server's words escaped; MOVED's binary part
  // skipped).
  static Status ReplyStatus(Code code, std::string_view text);

  const std::string host_;
  const uint16_t port_;
  const Options options_;
  std::unique_ptr<Connection> conn_;
  ClientCounters counters_;
  LocationCache cache_;
  ServerInfo info_;
  std::minstd_rand jitter_;   // backoff jitter (not seeded from random_device: it may throw)
  bool owner_check_ = false;  // ExpectOwners
  int owner_count_ = 0;
  uint32_t owner_slots_[Connection::kMaxBatch] = {};
  uint64_t owner_epoch_ = 0;
  const std::function<bool()>* abandon_ = nullptr;  // SetAbandon
  // PostRound in cluster mode: posts ops plus the words' READs (owner_count_ of them).
  Status PostOwnedRound(const Connection::ReadOp* ops, int n);
  // WaitRound's check of the words read in the round.
  Status CheckOwnerWords();
};

}  // namespace rkv

#endif  // RKV_CLIENT_CLIENT_IMPL_H_
