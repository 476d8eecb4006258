// SPDX-License-Identifier: Apache-2.0
#include "common/exchange/mailbox_channel.h"

#include <chrono>
#include <vector>

#include "common/secure_random.h"

namespace rkv {
namespace {
// A client id as ConnectClient makes them: 2*kClientIdBytes lowercase hex digits. Anything
// else under the server's prefix or directory is not a client (and its name is not used to
// form the server's reply names).
bool ValidClientId(const std::string& id) {
  return id.size() == 2 * MailboxChannel::kClientIdBytes &&
         id.find_first_not_of("0123456789abcdef") == std::string::npos;
}
}  // namespace

Status MailboxChannel::ConnectClient(std::unique_ptr<Mailbox> mb,
                                     std::unique_ptr<ExchangeChannel>* out) {
  std::string id;
  Status s = SecureRandom::Hex(kClientIdBytes, &id);
  if (!s.ok()) return s;
  *out = std::make_unique<MailboxChannel>(std::shared_ptr<Mailbox>(std::move(mb)), id, true);
  return Status::Ok();
}

MailboxChannel::MailboxChannel(std::shared_ptr<Mailbox> mb, std::string id, bool client)
    : mb_(std::move(mb)), id_(std::move(id)), client_(client) {
  if (client_) {
    heartbeat_ = std::thread([this] {
      std::unique_lock<std::mutex> l(mu_);
      while (!cv_.wait_for(l, std::chrono::milliseconds(Mailbox::kHeartbeatMs),
                           [this] { return stop_; })) {
        l.unlock();
        mb_->Heartbeat();
        l.lock();
      }
    });
  }
}

MailboxChannel::~MailboxChannel() {
  if (heartbeat_.joinable()) {
    {
      std::lock_guard<std::mutex> l(mu_);
      stop_ = true;
    }
    cv_.notify_all();
    heartbeat_.join();
  }
  for (const std::string& n : own_) mb_->Remove(n);
  // A client that died leaves its entries behind; the server removes them once it has seen the
  // client go (stale file, expired lease).
  if (!client_ && PeerGone())
    for (int k = 1; k <= received_; ++k) mb_->Remove(Name(false, k));
}

std::string MailboxChannel::Name(bool mine, int seq) const {
  bool client_side = mine ? client_ : !client_;
  return id_ + (client_side ? ".c." : ".s.") + std::to_string(seq);
}

Status MailboxChannel::Send(const ExchangeMsg& m) {
  std::string name = Name(true, ++sent_);
  Status s = mb_->Put(name, EncodeExchangeMsg(m));
  if (s.ok()) own_.push_back(name);
  return s;
}

Status MailboxChannel::Receive(ExchangeMsg* m, int timeout_ms) {
  std::string name = Name(false, ++received_);
  std::string bytes;
  Status s = mb_->WaitFor(name, &bytes, timeout_ms);
  if (!s.ok()) {
    if (s.code() == Code::kTimeout)
      return Status(Code::kTimeout,
                    "no " + std::string(client_ ? "server" : "client") + " message at " +
                        mb_->Describe(name) + " within " + std::to_string(timeout_ms) + " ms" +
                        (client_ ? " (is kvserver running with this exchange?)" : ""));
    return s;
  }
  return DecodeExchangeMsg(reinterpret_cast<const uint8_t*>(bytes.data()), bytes.size(), m);
}

bool MailboxChannel::PeerGone() { return !mb_->Alive(Name(false, 1)); }

Status MailboxListener::Create(std::unique_ptr<Mailbox> mb,
                               std::unique_ptr<ExchangeListener>* out) {
  out->reset(new MailboxListener(std::shared_ptr<Mailbox>(std::move(mb))));
  return Status::Ok();
}

Status MailboxListener::Accept(std::unique_ptr<ExchangeChannel>* out, int timeout_ms) {
  out->reset();
  auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(timeout_ms);
  for (;;) {
    std::vector<std::string> names;
    Status s = mb_->List(".c.1", &names);
    if (!s.ok()) return s;
    std::set<std::string> present;
    for (const std::string& n : names) {
      std::string id = n.substr(0, n.size() - 4);
      if (!ValidClientId(id)) continue;
      present.insert(id);
      if (seen_.count(id)) continue;
      if (!mb_->Alive(n)) {  // left behind by a client that died: clean up
        mb_->Remove(n);
        continue;
      }
      seen_.insert(id);
      *out = std::make_unique<MailboxChannel>(mb_, id, false);
      return Status::Ok();
    }
    // Forget ids whose entries are gone, so the set stays bounded.
    for (auto it = seen_.begin(); it != seen_.end();)
      it = present.count(*it) ? std::next(it) : seen_.erase(it);
    if (std::chrono::steady_clock::now() >= deadline) return Status::Ok();
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
}

}  // namespace rkv
