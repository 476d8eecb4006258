#include "rkv/client.h"

#include "client/client_impl.h"
#include "common/parse.h"

namespace rkv {

Status ClientImpl::Open() {
  std::unique_ptr<Connection> c;
  Status s = Connection::Open(host_, port_, options_, &c);
  if (!s.ok()) return s;
  conn_ = std::move(c);
  info_ = conn_->info();
  return Status::Ok();
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
  if (code == Code::kOk) return Status::Ok();
  return Status(code, payload ? *payload : msg);
}

Status ClientImpl::Put(std::string_view key, std::string_view value) {
  Status s = Usable();
  if (s.ok()) s = CheckKey(key);
  if (!s.ok()) return s;
  if (value.size() > conn_->hello().max_value_size)
    return Status(Code::kTooLarge, "value of " + std::to_string(value.size()) +
                                       " bytes exceeds the server's limit of " +
                                       std::to_string(conn_->hello().max_value_size));
  return RpcStatus(wire::Op::kPut, key, value, nullptr);
}

Status ClientImpl::Delete(std::string_view key) {
  Status s = Usable();
  if (s.ok()) s = CheckKey(key);
  if (!s.ok()) return s;
  return RpcStatus(wire::Op::kDelete, key, {}, nullptr);
}

Status ClientImpl::Stats(std::string* text) { return RpcStatus(wire::Op::kStats, {}, {}, text); }

Status ClientImpl::Reconnect() {
  uint64_t old_instance = info_.instance_id;
  conn_.reset();
  Status s = Open();
  if (!s.ok()) return s;
  if (old_instance != 0 && info_.instance_id != old_instance)
    return Status(Code::kServerRestarted,
                  "server instance changed (" + std::to_string(old_instance) + " -> " +
                      std::to_string(info_.instance_id) + "); its table was rebuilt");
  return Status::Ok();
}

Status Client::Connect(const std::string& address, const Options& options,
                       std::unique_ptr<Client>* client) {
  std::string host;
  uint16_t port;
  Status s = ParseHostPort(address, &host, &port);
  if (!s.ok()) return s;
  auto impl = std::make_unique<ClientImpl>(host, port, options);
  s = impl->Open();
  if (!s.ok()) return s;
  client->reset(new Client(std::move(impl)));
  return Status::Ok();
}

Client::Client(std::unique_ptr<ClientImpl> impl) : impl_(std::move(impl)) {}
Client::~Client() = default;
Status Client::Get(std::string_view key, std::string* value) { return impl_->Get(key, value); }
Status Client::MultiGet(const std::vector<std::string_view>& keys, std::vector<std::string>* values,
                        std::vector<Status>* statuses) {
  return impl_->MultiGet(keys, values, statuses);
}
Status Client::Put(std::string_view key, std::string_view value) { return impl_->Put(key, value); }
Status Client::Delete(std::string_view key) { return impl_->Delete(key); }
Status Client::Stats(std::string* text) { return impl_->Stats(text); }
Status Client::Reconnect() { return impl_->Reconnect(); }
const ClientCounters& Client::counters() const { return impl_->counters(); }
const ServerInfo& Client::server_info() const { return impl_->info(); }

}  // namespace rkv
