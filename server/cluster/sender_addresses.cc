// SPDX-License-Identifier: Apache-2.0
#include "server/cluster/sender_addresses.h"

#include <arpa/inet.h>
#include <netdb.h>
#include <netinet/in.h>

namespace rkv::cluster {

namespace {
// The host's IPv4 address (a dotted quad, else the first IPv4 answer of the resolver); 0 if none.
uint32_t Resolve(const std::string& host) {
  in_addr a{};
  if (inet_pton(AF_INET, host.c_str(), &a) == 1) return a.s_addr;
  addrinfo hints{}, *res = nullptr;
  hints.ai_family = AF_INET;
  if (getaddrinfo(host.c_str(), nullptr, &hints, &res) != 0 || res == nullptr) return 0;
  const uint32_t ip = reinterpret_cast<const sockaddr_in*>(res->ai_addr)->sin_addr.s_addr;
  freeaddrinfo(res);
  return ip;
}
}  // namespace

void SenderAddresses::Update(const SlotMap& map) {
  std::unordered_map<std::string, uint32_t> resolved;
  std::unordered_map<uint32_t, uint32_t> next;
  for (const ServerEntry& e : map.servers()) {
    auto it = resolved_.find(e.host);
    const uint32_t ip =
        it != resolved_.end() && it->second != 0 ? it->second : Resolve(e.host);  // no DNS twice
    resolved[e.host] = ip;
    next[e.id] = ip;
  }
  resolved_.swap(resolved);  // only the hosts of this map: bounded
  std::lock_guard<std::mutex> l(mu_);
  ipv4_.swap(next);
  epoch_ = map.epoch();
  any_ = true;
}

SenderAddresses::Verdict SenderAddresses::Check(uint32_t id, uint64_t epoch, uint32_t ipv4) const {
  std::lock_guard<std::mutex> l(mu_);
  if (!any_ || epoch > epoch_) return Verdict::kUnknown;  // this server's map lags
  const auto it = ipv4_.find(id);
  if (it == ipv4_.end()) return Verdict::kMismatch;  // not a member at the message's epoch
  if (it->second == 0) return Verdict::kUnknown;     // its host did not resolve here
  return it->second == ipv4 ? Verdict::kMatch : Verdict::kMismatch;
}

Status SenderAddresses::Admit(uint32_t id, uint64_t epoch, uint32_t ipv4) const {
  switch (Check(id, epoch, ipv4)) {
    case Verdict::kMatch:
      return Status::Ok();
    case Verdict::kUnknown:  // this server's map lags, or the host did not resolve: asked again
      return Status(Code::kUnavailable, "REPLICATE: cannot check server " + std::to_string(id) +
                                            "'s address at map epoch " + std::to_string(epoch) +
                                            " yet");
    case Verdict::kMismatch:
      break;
  }
  return Status(Code::kInvalidArgument,
                "REPLICATE: this connection does not come from the address server " +
                    std::to_string(id) + " registered (or no such server); refused");
}

}  // namespace rkv::cluster
