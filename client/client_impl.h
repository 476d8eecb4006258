// ClientImpl: the state behind rkv::Client (see rkv/client.h for the public contract).
// Thread safety: none (one thread at a time, as Client). Owns its Connection.
#ifndef RKV_CLIENT_CLIENT_IMPL_H_
#define RKV_CLIENT_CLIENT_IMPL_H_

#include <memory>
#include <string>

#include "client/connection.h"
#include "common/table/lookup.h"
#include "rkv/client.h"

namespace rkv {

class ClientImpl {
 public:
  ClientImpl(std::string host, uint16_t port, Options options)
      : host_(std::move(host)), port_(port), options_(options) {}
  Status Open();
  Status Get(std::string_view key, std::string* value);  // get_path.cc
  Status MultiGet(const std::vector<std::string_view>& keys, std::vector<std::string>* values,
                  std::vector<Status>* statuses);  // multi_get.cc
  Status Put(std::string_view key, std::string_view value);
  Status Delete(std::string_view key);
  Status Stats(std::string* text);
  Status Reconnect();
  const ClientCounters& counters() const { return counters_; }
  const ServerInfo& info() const { return info_; }

 private:
  enum class Step { kDone, kRetry };
  // The GET attempt loop for a validated, already counted key.
  Status ReadKey(std::string_view key, std::string* value);
  Status Usable() const;
  Status CheckKey(std::string_view key) const;
  // Finishes a GET whose candidate buckets have been probed: reads its targets if any.
  Step Resolve(const layout::Probe& probe, std::string_view key, std::string* value,
               Status* result);
  // Reads every target of the probe (one round trip for as many as the buffer areas hold) and
  // decides: found, absent, or kRetry when a slot or target that may hold the key was changing.
  Step ReadTargets(const layout::Probe& probe, std::string_view key, std::string* value,
                   Status* result);
  Status RoundTrip(const Connection::ReadOp* ops, int n);
  Status RpcStatus(wire::Op op, std::string_view key, std::string_view value, std::string* payload);

  const std::string host_;
  const uint16_t port_;
  const Options options_;
  std::unique_ptr<Connection> conn_;
  ClientCounters counters_;
  ServerInfo info_;
};

}  // namespace rkv

#endif  // RKV_CLIENT_CLIENT_IMPL_H_
