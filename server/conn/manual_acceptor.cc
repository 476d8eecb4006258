// SPDX-License-Identifier: Apache-2.0
#include "server/conn/manual_acceptor.h"

#include <glog/logging.h>
#include <poll.h>

#include <algorithm>
#include <cstring>
#include <system_error>

#include "common/printable.h"
#include "common/verbs/conn_params.h"
#include "common/verbs/qp_setup.h"
#include "server/conn/peer_gid.h"

namespace rkv {

ManualAcceptor::~ManualAcceptor() {
  Join();
  Shutdown();
}

void ManualAcceptor::Start() {
  thread_ = std::thread([this] { Loop(); });
}

void ManualAcceptor::Join() {
  if (thread_.joinable()) thread_.join();
  for (Handshake& h : handshakes_)
    if (h.thread.joinable()) h.thread.join();
  handshakes_.clear();
}

void ManualAcceptor::Shutdown() {
  events_.TakeAll();
  drained_early_.clear();
  owned_.clear();
  lingering_.clear();
}

void ManualAcceptor::Loop() {
  auto last_tick = Clock::now();
  while (!env_.stop->load()) {
    std::unique_ptr<ExchangeChannel> ch;
    Status s = listener_->Accept(&ch, 100);
    if (!s.ok()) {
      LOG_EVERY_N(WARNING, 50) << "exchange listener: " << s.ToString();
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
    }
    auto lease = std::make_shared<SourceLimiter::Lease>();
    if (ch) {
      sockaddr_storage peer{};
      // A tcp channel always has the address accept4 named; one without is refused (fail
      // closed). File and etcd channels have none: their access is the directory's or etcd's.
      Status admitted;
      if (ch->PeerAddress(&peer))
        admitted = AdmitSource(env_, reinterpret_cast<const sockaddr*>(&peer), lease.get());
      else if (env_.opt->exchange.method == Exchange::kTcp)
        admitted = Status(Code::kProtocolError, "no peer address for the tcp connection");
      if (!admitted.ok()) {
        Refuse(ch.get(), admitted.code(), "server: " + admitted.message());
        Linger(std::move(ch));
      } else if (int(handshakes_.size()) >= env_.opt->max_pending) {
        env_.counters->exchanges_refused_busy.fetch_add(1, std::memory_order_relaxed);
        Refuse(ch.get(), Code::kTimeout,
               "server busy: " + std::to_string(handshakes_.size()) +
                   " parameter exchanges in progress (--max_pending); try again");
        Linger(std::move(ch));
      } else {
        handshakes_.emplace_back();
        Handshake* h = &handshakes_.back();
        auto shared = std::make_shared<std::unique_ptr<ExchangeChannel>>(std::move(ch));
        try {
          h->thread = std::thread([this, h, shared, lease] {
            std::unique_ptr<ExchangeChannel> owned = std::move(*shared);
            bool established = false;
            std::shared_ptr<Conn> c = RunHandshake(owned.get(), lease.get(), &established);
            if (c && established) {
              c->control = std::move(owned);
              events_.Push({std::move(c), nullptr, true});
            } else {
              events_.Push({std::move(c), std::move(owned), true});
            }
            h->done.store(true);
          });
        } catch (const std::system_error& e) {  // no thread (EAGAIN): refuse, do not die
          handshakes_.pop_back();
          env_.counters->exchanges_refused_busy.fetch_add(1, std::memory_order_relaxed);
          Refuse(shared->get(), Code::kTimeout,
                 std::string("server busy: cannot start a handshake thread (") + e.what() + ")");
          Linger(std::move(*shared));
        }
      }
    }
    for (Event& e : events_.TakeAll()) {
      if (!e.handed_over) {  // drained
        if (std::find(owned_.begin(), owned_.end(), e.conn) != owned_.end())
          Destroy(e.conn);
        else
          drained_early_.insert(e.conn);
        continue;
      }
      if (e.ch) Linger(std::move(e.ch));
      if (!e.conn) continue;
      owned_.push_back(e.conn);
      auto it = drained_early_.find(e.conn);
      if (it != drained_early_.end()) {
        drained_early_.erase(it);
        Destroy(e.conn);
      }
    }
    for (auto it = handshakes_.begin(); it != handshakes_.end();) {
      if (it->done.load()) {
        it->thread.join();
        it = handshakes_.erase(it);
      } else {
        ++it;
      }
    }
    if (Clock::now() - last_tick >= std::chrono::seconds(1)) {
      last_tick = Clock::now();
      Tick();
    }
  }
}

void ManualAcceptor::Linger(std::unique_ptr<ExchangeChannel> ch) {
  if (lingering_.size() >= kMaxLingering) lingering_.erase(lingering_.begin());  // oldest goes
  lingering_.emplace_back(std::move(ch), Clock::now());
}

void ManualAcceptor::Tick() {
  listener_->Tick();
  auto linger_limit = std::chrono::milliseconds(std::min(env_.opt->exchange.timeout_ms, kLingerMs));
  for (size_t i = 0; i < lingering_.size();) {
    if (lingering_[i].first->PeerGone() || Clock::now() - lingering_[i].second > linger_limit)
      lingering_.erase(lingering_.begin() + long(i));
    else
      ++i;
  }
  // Liveness: a manual connection ends when its control channel closes (TCP EOF, client's
  // file removed or stale, client's etcd key deleted or its lease expired).
  for (auto& c : owned_) {
    Conn::State st = c->state();
    if ((st != Conn::State::kEstablished && st != Conn::State::kOpen) || !c->control) continue;
    if (c->control->PeerGone()) c->RequestClose("client left (" + c->control->Describe() + ")");
  }
}

void ManualAcceptor::Destroy(const std::shared_ptr<Conn>& c) {
  owned_.erase(std::remove(owned_.begin(), owned_.end(), c), owned_.end());
  DestroyDrained(env_, c.get());
}

void ManualAcceptor::Refuse(ExchangeChannel* ch, Code code, const std::string& why) {
  uint64_t held_back = 0;  // at most kRefusalLinesPerSecond lines a second: no log flood
  if (refusal_log_.Admit(LogThrottle::Clock::now(), &held_back))
    LOG(WARNING) << "refusing manual connection (" << ch->Describe() << "): " << why
                 << HeldBackNote(held_back);
  env_.counters->connections_rejected.fetch_add(1, std::memory_order_relaxed);
  ExchangeMsg e;
  e.type = MsgType::kError;
  e.code = code;
  e.text = why;
  (void)ch->Send(e);
}

std::shared_ptr<Conn> ManualAcceptor::RunHandshake(ExchangeChannel* ch, SourceLimiter::Lease* lease,
                                                   bool* established) {
  const ServerOptions& o = *env_.opt;
  const std::string where = ch->Describe();
  const auto deadline = Clock::now() + std::chrono::milliseconds(o.accept_timeout_ms);
  auto left_ms = [&deadline] {
    return int(std::max<int64_t>(
        1, std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now()).count()));
  };
  VLOG(1) << "parameter exchange from " << where;
  ExchangeMsg m;
  Status s = ch->Receive(&m, left_ms());
  if (!s.ok()) {
    uint64_t held_back = 0;
    if (refusal_log_.Admit(LogThrottle::Clock::now(), &held_back))
      LOG(WARNING) << "parameter exchange " << where << ": " << s.ToString()
                   << HeldBackNote(held_back);
    if (s.code() == Code::kTimeout)
      env_.counters->setup_timeouts.fetch_add(1, std::memory_order_relaxed);
    return nullptr;
  }
  ConnParams self;
  s = FillLocalParams(env_.ctx, o.qp, &self);
  if (!s.ok()) {
    Refuse(ch, s.code(), "server: " + s.message());
    return nullptr;
  }
  // No address or rkey in the record (anyone can ask for it): the client gets them from OPEN.
  self.remote_addr = 0;
  self.rkey = 0;
  self.region_size = 0;
  uint8_t nonce[wire::kNonceSize];
  s = NewServerNonce(nonce);
  if (!s.ok()) {
    Refuse(ch, s.code(), "server: " + s.message());
    return nullptr;
  }
  ExchangeMsg reply;
  reply.params = self;
  reply.has_hello = true;
  reply.hello = env_.hello;
  std::memcpy(reply.hello.server_nonce, nonce, sizeof nonce);
  if (m.type == MsgType::kCheck) {  // kvctl check: validate only, connect nothing
    reply.type = MsgType::kCheckReply;
    reply.text = CheckParams(self, m.params, o.qp);
    LOG(INFO) << "check from " << where << ": " << (reply.text.empty() ? "OK" : reply.text);
    (void)ch->Send(reply);
    return nullptr;
  }
  if (m.type != MsgType::kParams) {
    Refuse(ch, Code::kProtocolError, "expected the client's parameters first");
    return nullptr;
  }
  sockaddr_storage from{};
  const bool has_address = ch->PeerAddress(&from);
  if (!has_address && o.exchange.method == Exchange::kTcp) {  // fail closed (Loop refuses it too)
    Refuse(ch, Code::kProtocolError, "server: no peer address for the tcp connection");
    return nullptr;
  }
  s = CheckPeerGid(m.params, has_address ? &from : nullptr);
  if (!s.ok()) {
    Refuse(ch, s.code(), "server: " + s.message());
    return nullptr;
  }
  int slot = 0;
  if (!env_.registry->TakeSlot(&slot)) {
    Refuse(ch, Code::kTableFull,
           "server is at --max_connections=" + std::to_string(o.max_connections));
    return nullptr;
  }
  ibv_qp* qp = nullptr;
  std::unique_ptr<PrivateDomain> domain;
  s = CreateClientQp(env_, slot, nullptr, &self, &qp, &domain);  // in INIT
  if (!s.ok()) {
    env_.registry->ReleaseSlot(slot);
    Refuse(ch, s.code(), "server: " + s.message());
    return nullptr;
  }
  std::shared_ptr<Conn> c = NewConn(env_, Conn::Kind::kManual, slot, this, nullptr, qp, nonce,
                                    m.params.qp_num, std::move(domain), std::move(*lease));
  reply.params.qp_num = self.qp_num = qp->qp_num;
  std::string note;
  s = ConnectQp(qp, self, m.params, o.qp, IBV_ACCESS_REMOTE_READ, &note);
  if (!s.ok()) {
    Refuse(ch, s.code(), "server: " + s.message());
    c->RequestClose("parameters refused: " + s.message());
    return c;
  }
  if (!note.empty()) LOG(INFO) << note;
  s = ch->Send(reply);
  ExchangeMsg ready;
  if (s.ok()) s = ch->Receive(&ready, left_ms());
  // The client's own words: escaped (Printable), as they go to the log and the close reason.
  if (s.ok() && ready.type == MsgType::kError)
    s = Status(ready.code, "client: " + Printable(ready.text));
  if (s.ok() && ready.type != MsgType::kReady)
    s = Status(Code::kProtocolError, "expected READY from the client");
  if (!s.ok()) {
    uint64_t held_back = 0;
    if (refusal_log_.Admit(LogThrottle::Clock::now(), &held_back))
      LOG(WARNING) << "manual connection (" << where << ") failed: " << s.ToString()
                   << HeldBackNote(held_back);
    if (s.code() == Code::kTimeout)
      env_.counters->setup_timeouts.fetch_add(1, std::memory_order_relaxed);
    c->RequestClose("handshake failed: " + s.message());
    return c;
  }
  if (!MarkEstablished(env_, c.get())) return c;  // closed meanwhile (bad requests, async error)
  c->owner_pending = false;
  env_.counters->connections_pending.fetch_sub(1, std::memory_order_relaxed);
  LOG(INFO) << "connection established via " << where << ": " << QpParamsLine(qp);
  *established = true;
  return c;
}

}  // namespace rkv
