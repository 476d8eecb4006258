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
  std::unordered_map<uint32_t, uint32_t> next;
  for (const ServerEntry& e : map.servers()) next[e.id] = Resolve(e.host);
  std::lock_guard<std::mutex> l(mu_);
  ipv4_.swap(next);
}

SenderAddresses::Verdict SenderAddresses::Check(uint32_t id, uint32_t ipv4) const {
  std::lock_guard<std::mutex> l(mu_);
  const auto it = ipv4_.find(id);
  if (it == ipv4_.end()) return Verdict::kUnknown;
  return it->second != 0 && it->second == ipv4 ? Verdict::kMatch : Verdict::kMismatch;
}

}  // namespace rkv::cluster
