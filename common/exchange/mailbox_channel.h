// SPDX-License-Identifier: Apache-2.0
// MailboxChannel / MailboxListener: the exchange protocol over a Mailbox (file and etcd
// methods). A client picks a random 64-bit id, 16 lowercase hex digits from getrandom (so
// nobody can guess it to plant or squat its names); its k-th message is the entry
// "<id>.c.<k>", the server's k-th reply "<id>.s.<k>". The server discovers clients by listing
// "*.c.1" and ignores names whose id is not 16 lowercase hex digits.
// Liveness: a client channel runs a heartbeat thread (owned by the channel, joined in its
// destructor) so that its entries stay fresh; the server's entries are kept fresh by the
// listener's Tick(). PeerGone() is true once the peer's first entry is gone or stale.
// Thread safety: one user thread per object (plus the owned heartbeat thread).
#ifndef RKV_COMMON_EXCHANGE_MAILBOX_CHANNEL_H_
#define RKV_COMMON_EXCHANGE_MAILBOX_CHANNEL_H_

#include <condition_variable>
#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <thread>

#include "common/exchange/exchange.h"
#include "common/exchange/mailbox.h"

namespace rkv {

class MailboxChannel : public ExchangeChannel {
 public:
  static constexpr size_t kClientIdBytes = 8;
  [[nodiscard]] static Status ConnectClient(std::unique_ptr<Mailbox> mb,
                                            std::unique_ptr<ExchangeChannel>* out);
  MailboxChannel(std::shared_ptr<Mailbox> mb, std::string id, bool client);
  ~MailboxChannel() override;
  Status Send(const ExchangeMsg& m) override;
  Status Receive(ExchangeMsg* m, int timeout_ms) override;
  bool PeerGone() override;
  std::string Describe() const override { return mb_->Describe(id_ + ".*"); }

 private:
  std::string Name(bool mine, int seq) const;
  const std::shared_ptr<Mailbox> mb_;
  const std::string id_;
  const bool client_;
  int sent_ = 0, received_ = 0;
  std::vector<std::string> own_;
  std::mutex mu_;
  std::condition_variable cv_;
  bool stop_ = false;
  std::thread heartbeat_;  // client side only
};

class MailboxListener : public ExchangeListener {
 public:
  [[nodiscard]] static Status Create(std::unique_ptr<Mailbox> mb,
                                     std::unique_ptr<ExchangeListener>* out);
  Status Accept(std::unique_ptr<ExchangeChannel>* out, int timeout_ms) override;
  void Tick() override { mb_->Heartbeat(); }
  std::string Describe() const override { return mb_->Describe("*"); }

 private:
  explicit MailboxListener(std::shared_ptr<Mailbox> mb) : mb_(std::move(mb)) {}
  const std::shared_ptr<Mailbox> mb_;
  std::set<std::string> seen_;  // client ids already accepted
};

}  // namespace rkv

#endif  // RKV_COMMON_EXCHANGE_MAILBOX_CHANNEL_H_
