// SPDX-License-Identifier: Apache-2.0
#include "rkv/client.h"

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <thread>

#include "client/client_impl.h"
#include "client/cluster_router.h"
#include "client/refusal.h"
#include "common/cluster/cluster_address.h"
#include "common/parse.h"
#include "common/printable.h"

namespace rkv {

namespace {
using SteadyClock = std::chrono::steady_clock;

int64_t MsSince(SteadyClock::time_point t) {
  return std::chrono::duration_cast<std::chrono::milliseconds>(SteadyClock::now() - t).count();
}
std::string InstanceChange(uint64_t from, uint64_t to) {
  return "server instance changed: " + std::to_string(from) + " -> " + std::to_string(to);
}
}  // namespace

ClientImpl::ClientImpl(std::string host, uint16_t port, Options options)
    : host_(std::move(host)),
      port_(port),
      options_(std::move(options)),
      cache_(static_cast<size_t>(std::max(0, options_.location_cache_entries))),
      jitter_(static_cast<uint32_t>(SteadyClock::now().time_since_epoch().count() ^
                                    reinterpret_cast<uintptr_t>(this))) {}

Status ClientImpl::ValidateOptions(const Options& o) {
  auto bad = [](const char* name, int v, const std::string& rule) {
    return Status(Code::kInvalidArgument,
                  std::string("Options::") + name + " = " + std::to_string(v) + ": " + rule);
  };
  if (o.reconnect_initial_backoff_ms < 0)
    return bad("reconnect_initial_backoff_ms", o.reconnect_initial_backoff_ms, "must be >= 0");
  if (o.reconnect_max_backoff_ms < o.reconnect_initial_backoff_ms)
    return bad("reconnect_max_backoff_ms", o.reconnect_max_backoff_ms,
               "must be >= reconnect_initial_backoff_ms (" +
                   std::to_string(o.reconnect_initial_backoff_ms) + ")");
  if (o.reconnect_timeout_ms < 0)
    return bad("reconnect_timeout_ms", o.reconnect_timeout_ms, "must be >= 0");
  if (o.location_cache_entries < 0 || o.location_cache_entries > (1 << 22))
    return bad("location_cache_entries", o.location_cache_entries, "must be in [0, 4194304]");
  if (o.reply_spin_us < -1 || o.reply_spin_us > 1000000)
    return bad("reply_spin_us", o.reply_spin_us, "must be -1 (always poll) or in [0, 1000000]");
  return Status::Ok();
}

Status ClientImpl::Open(const Options& options) {
  // Two refusals pass by themselves, and are retried, jittered, within connect_timeout_ms:
  // the connects of one address beyond its setup share (--max_pending_per_source), for as long
  // as the earlier ones take to open (milliseconds), and its connection cap
  // (--max_conns_per_source) while connections it closed are still being torn down (the
  // refusal says "N still closing", common/wire.h; a client that reconnects in a loop meets
  // it). Every other refusal (the cap held by live connections, the attempt rate) returns.
  const auto deadline =
      SteadyClock::now() + std::chrono::milliseconds(std::max(0, options.connect_timeout_ms));
  // A retry gets what remains of connect_timeout_ms, for the connect and for the manual
  // modes' exchange alike (a server that refuses and then stalls cannot stretch the call).
  Options again = options;
  for (int attempt = 0;; ++attempt) {
    std::unique_ptr<Connection> c;
    if (attempt > 0) {
      const int remaining = int(std::max<int64_t>(
          1, std::chrono::duration_cast<std::chrono::milliseconds>(deadline - SteadyClock::now())
                 .count()));
      again.connect_timeout_ms = remaining;
      again.exchange.timeout_ms = std::min(options.exchange.timeout_ms, remaining);
    }
    Status s = Connection::Open(host_, port_, attempt > 0 ? again : options, &c, abandon_);
    if (s.ok()) {
      conn_ = std::move(c);
      info_ = conn_->info();
      return Status::Ok();
    }
    if (s.code() != Code::kBusy || !PassingRefusal(s.message())) return s;
    const int64_t cap_ms = int64_t(5) << std::min(attempt, 5);  // pause: [cap/2, 1.5 cap)
    const auto pause =
        std::chrono::milliseconds(cap_ms / 2 + int64_t(jitter_() % uint64_t(cap_ms)));
    if (SteadyClock::now() + pause >= deadline) return s;
    std::this_thread::sleep_for(pause);
  }
}

Status ClientImpl::Usable() const {
  if (!conn_) return Status(Code::kConnectionLost, "not connected; call Reconnect()");
  if (conn_->state() != Connection::State::kConnected)
    return Status(Code::kConnectionLost, "connection to " + host_ + ":" + std::to_string(port_) +
                                             " was lost; call Reconnect()");
  return Status::Ok();
}

Status ClientImpl::CheckKey(std::string_view key) const {
  if (key.empty()) return Status(Code::kInvalidArgument, "empty key");
  if (key.size() > conn_->hello().max_key_size)
    return Status(Code::kTooLarge, "key of " + std::to_string(key.size()) +
                                       " bytes exceeds the server's limit of " +
                                       std::to_string(conn_->hello().max_key_size));
  return Status::Ok();
}

Status ClientImpl::RpcStatus(wire::Op op, std::string_view key, std::string_view value,
                             std::string* payload) {
  Status s = Usable();
  if (!s.ok()) return s;
  ++counters_.rpcs;
  Code code;
  std::string msg;
  s = conn_->Rpc(op, key, value, &code, payload ? payload : &msg);
  if (!s.ok()) return s;
  return ReplyStatus(code, payload ? *payload : msg);
}

Status ClientImpl::ReplyStatus(Code code, std::string_view text) {
  if (code == Code::kOk) return Status::Ok();
  // MOVED and TRY_AGAIN lead with a wire::MovedPayload; the words follow it.
  if ((code == Code::kMoved || code == Code::kTryAgain) &&
      text.size() >= sizeof(wire::MovedPayload))
    text.remove_prefix(sizeof(wire::MovedPayload));
  return Status(code, Printable(text, 2048));  // the server's words, escaped
}

Status ClientImpl::PostCall(wire::Op op, std::string_view key, std::string_view value,
                            uint64_t* rid, bool* posted) {
  *posted = false;
  Status s = Usable();
  if (!s.ok()) return s;
  s = conn_->PostRpc(op, key, value, rid, posted);
  if (s.ok() && *posted) ++counters_.rpcs;
  return s;
}

Status ClientImpl::TakeCall(uint64_t* rid, std::string* payload) {
  Status s = Usable();
  if (!s.ok()) return s;
  Code code = Code::kOk;
  std::string msg;
  s = conn_->NextReply(rid, &code, payload ? payload : &msg);
  if (!s.ok()) return s;
  return ReplyStatus(code, payload ? *payload : msg);
}

Status ClientImpl::Put(std::string_view key, std::string_view value) {
  Status s = Usable();
  if (s.ok()) s = CheckKey(key);
  if (!s.ok()) return s;
  if (value.size() > conn_->hello().max_value_size)
    return Status(Code::kTooLarge, "value of " + std::to_string(value.size()) +
                                       " bytes exceeds the server's limit of " +
                                       std::to_string(conn_->hello().max_value_size));
  const layout::KeyHash kh = KeyHashOf(key);
  cache_.Erase(kh.hash);  // whatever happens, the old location is stale
  std::string where;
  s = RpcStatus(wire::Op::kPut, key, value, &where);
  layout::EntryLocation loc;
  if (s.ok() &&
      layout::DecodeEntryLocation(where, conn_->geometry(), Connection::kBlockAreaSize, &loc))
    cache_.Insert(kh.hash, loc);  // a server that sends none (or garbage) just fills no entry
  return s;
}

Status ClientImpl::Delete(std::string_view key) {
  Status s = Usable();
  if (s.ok()) s = CheckKey(key);
  if (!s.ok()) return s;
  cache_.Erase(KeyHashOf(key).hash);
  return RpcStatus(wire::Op::kDelete, key, {}, nullptr);
}

Status ClientImpl::Stats(std::string* text) { return RpcStatus(wire::Op::kStats, {}, {}, text); }
Status ClientImpl::RequestSnapshot(std::string* message) {
  return RpcStatus(wire::Op::kSnapshot, {}, {}, message);
}

Status ClientImpl::Reopen(const Options& options, bool* restarted) {
  const uint64_t old_instance = info_.instance_id;
  conn_.reset();
  cache_.Clear();  // maybe another server instance: another table
  Status s = Open(options);
  if (!s.ok()) return s;  // info_ keeps the last connected instance's id
  ++counters_.reconnects;
  *restarted = old_instance != 0 && info_.instance_id != old_instance;
  if (*restarted) ++counters_.server_restarts;
  return Status::Ok();
}

Status ClientImpl::Reconnect() {
  const uint64_t old_instance = info_.instance_id;
  bool restarted = false;
  Status s = Reopen(options_, &restarted);
  if (!s.ok()) return s;
  if (restarted)
    return Status(Code::kServerRestarted,
                  "server instance changed (" + std::to_string(old_instance) + " -> " +
                      std::to_string(info_.instance_id) + "); its table was rebuilt");
  return Status::Ok();
}

Status ClientImpl::ReconnectWithBackoff(const Status& cause, bool* restarted) {
  return ReconnectWithin("connection to " + Where() + " lost (" + cause.ToString() + ")",
                         restarted);
}

Status ClientImpl::ReconnectWithin(const std::string& context, bool* restarted) {
  const SteadyClock::time_point start = SteadyClock::now();
  const int64_t budget_ms = options_.reconnect_timeout_ms;
  int64_t backoff_ms = options_.reconnect_initial_backoff_ms;
  Options attempt_options = options_;
  Status last;
  int attempts = 0;
  for (;;) {
    // Each attempt's own deadlines are cut to what remains of the budget (a budget of 0 is one
    // attempt with the full deadlines).
    if (budget_ms > 0) {
      const int remaining = int(std::clamp<int64_t>(budget_ms - MsSince(start), 1, budget_ms));
      attempt_options.connect_timeout_ms = std::min(options_.connect_timeout_ms, remaining);
      attempt_options.exchange.timeout_ms = std::min(options_.exchange.timeout_ms, remaining);
    }
    ++attempts;
    last = Reopen(attempt_options, restarted);
    if (last.ok()) return last;
    const int64_t left_ms = budget_ms - MsSince(start);
    if (left_ms <= 0) break;
    // Equal jitter: a wait drawn from [w/2, w], never past the budget.
    const int64_t half = backoff_ms / 2;
    const int64_t wait_ms =
        std::min(left_ms, half + int64_t(jitter_() % uint64_t(backoff_ms - half + 1)));
    std::this_thread::sleep_for(std::chrono::milliseconds(wait_ms));
    if (wait_ms >= left_ms) break;
    backoff_ms = std::min<int64_t>(backoff_ms * 2, options_.reconnect_max_backoff_ms);
  }
  return Status(Code::kConnectionLost,
                context + "; reconnecting failed: " + std::to_string(attempts) + " attempt(s) in " +
                    std::to_string(MsSince(start)) + " ms (reconnect_timeout_ms " +
                    std::to_string(budget_ms) + "), last: " + last.ToString() +
                    "; the next call tries again");
}

Status ClientImpl::LostWrite(const char* op, bool sent, const Status& cause) {
  const std::string context =
      sent ? std::string(op) + " outcome unknown: the connection to " + Where() +
                 " failed after the request was sent (" + cause.ToString() + ")"
           : std::string(op) + " not sent: the connection to " + Where() +
                 " had been lost before this call (" + cause.ToString() + ")";
  const std::string verdict =
      sent ? std::string("; the ") + op + " was not retried: it may or may not have been applied"
           : std::string("; the ") + op + " was not applied";
  const uint64_t old_instance = info_.instance_id;
  bool restarted = false;
  Status s = ReconnectWithin(context, &restarted);
  if (!s.ok()) return s;  // kConnectionLost: context + why reconnecting failed
  if (restarted)
    return Status(Code::kServerRestarted,
                  context + "; the connection was re-established to a new server instance (" +
                      InstanceChange(old_instance, info_.instance_id) + ")" + verdict);
  return Status(Code::kConnectionLost,
                context + "; the connection was re-established (same server instance)" + verdict);
}

Status Client::Connect(const std::string& address, const Options& options,
                       std::unique_ptr<Client>* client) {
  if (cluster::IsClusterAddress(address)) {
    cluster::ClusterAddress where;
    Status s = cluster::ParseClusterAddress(address, &where);
    if (!s.ok()) return s;
    std::unique_ptr<ClusterRouter> router;
    s = ClusterRouter::Open(where, options, &router);
    if (!s.ok()) return s;
    client->reset(new Client(std::move(router)));
    return Status::Ok();
  }
  std::string host;
  uint16_t port;
  Status s = ParseHostPort(address, &host, &port);
  if (!s.ok()) return s;
  s = ClientImpl::ValidateOptions(options);
  if (!s.ok()) return s;
  auto impl = std::make_unique<ClientImpl>(host, port, options);
  s = impl->Open();
  if (!s.ok()) return s;
  client->reset(new Client(std::move(impl)));
  return Status::Ok();
}

Client::Client(std::unique_ptr<ClientImpl> impl) : impl_(std::move(impl)) {}
Client::Client(std::unique_ptr<ClusterRouter> router) : router_(std::move(router)) {}
Client::~Client() = default;
// The reconnect policy (rkv/client.h, "Reconnection"). On success and on errors of a usable
// connection (NOT_FOUND included) a call pays one inline test; the rest is the error path.
Status Client::Get(std::string_view key, std::string* value) {
  if (router_) return router_->Get(key, value);
  Status s = impl_->Get(key, value);
  if (s.ok() || !impl_->ShouldReconnect()) return s;
  bool restarted = false;
  s = impl_->ReconnectWithBackoff(s, &restarted);
  if (!s.ok()) return s;
  return impl_->Get(key, value);
}
Status Client::MultiGet(const std::vector<std::string_view>& keys, std::vector<std::string>* values,
                        std::vector<Status>* statuses) {
  if (router_) return router_->MultiGet(keys, values, statuses);
  Status s = impl_->MultiGet(keys, values, statuses);
  if (s.ok() || !impl_->ShouldReconnect()) return s;
  bool restarted = false;
  s = impl_->ReconnectWithBackoff(s, &restarted);
  if (!s.ok()) return s;
  return impl_->MultiGet(keys, values, statuses);
}
Status Client::Put(std::string_view key, std::string_view value) {
  if (router_) return router_->Put(key, value);
  const uint64_t rpcs = impl_->counters().rpcs;
  Status s = impl_->Put(key, value);
  if (s.ok() || !impl_->ShouldReconnect()) return s;
  return impl_->LostWrite("PUT", impl_->counters().rpcs != rpcs, s);
}
Status Client::Delete(std::string_view key) {
  if (router_) return router_->Delete(key);
  const uint64_t rpcs = impl_->counters().rpcs;
  Status s = impl_->Delete(key);
  if (s.ok() || !impl_->ShouldReconnect()) return s;
  return impl_->LostWrite("DELETE", impl_->counters().rpcs != rpcs, s);
}
Status Client::Execute(BatchOp* ops, size_t n) {
  if (router_) return router_->Execute(ops, n);
  Status s = impl_->Execute(ops, n);
  if (s.ok() || !impl_->ShouldReconnect()) return s;
  bool restarted = false;
  // Not retried: each operation's status says what happened to it. Reconnecting now lets the
  // next call go on; if that fails too, the next call reports it.
  (void)impl_->ReconnectWithBackoff(s, &restarted);
  return s;
}
Status Client::Stats(std::string* text) {
  if (router_) return router_->Stats(text);
  Status s = impl_->Stats(text);
  if (s.ok() || !impl_->ShouldReconnect()) return s;
  bool restarted = false;
  s = impl_->ReconnectWithBackoff(s, &restarted);
  if (!s.ok()) return s;
  return impl_->Stats(text);
}
Status Client::RequestSnapshot(std::string* message) {
  if (router_)
    return Status(Code::kInvalidArgument,
                  "snapshots are per server: ask each server's ADDR:PORT (kvctl cluster status)");
  Status s = impl_->RequestSnapshot(message);
  if (s.ok() || !impl_->ShouldReconnect()) return s;
  bool restarted = false;
  s = impl_->ReconnectWithBackoff(s, &restarted);
  if (!s.ok()) return s;
  return impl_->RequestSnapshot(message);  // asking twice is harmless
}
Status Client::Reconnect() { return router_ ? router_->Reconnect() : impl_->Reconnect(); }
const ClientCounters& Client::counters() const {
  return router_ ? router_->counters() : impl_->counters();
}
const ServerInfo& Client::server_info() const { return router_ ? router_->info() : impl_->info(); }

}  // namespace rkv
