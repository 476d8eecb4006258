// SPDX-License-Identifier: Apache-2.0
#include "server/conn/replica_fast_path.h"

#include <glog/logging.h>

#include <algorithm>
#include <system_error>
#include <utility>

#include "client/client_impl.h"
#include "common/wire.h"

namespace rkv {

ReplicaFastPath::ReplicaFastPath(RpcExecutor* exec, Options link_options, uint32_t owner_slots,
                                 size_t reply_cap, const WriteLog* log, ReplyFn reply, bool rings)
    : exec_(exec),
      options_(std::move(link_options)),
      owner_slots_(owner_slots),
      reply_cap_(reply_cap),
      log_(log),
      reply_(std::move(reply)),
      rings_(rings) {
  connector_ = std::thread([this] { ConnectorLoop(); });
}

ReplicaFastPath::~ReplicaFastPath() {
  // The server is stopping (the worker thread ended). Writes not ended are failed: number used,
  // kept as outcome unknown, lock and gate released (nobody waits for their replies).
  std::deque<std::unique_ptr<Flight>> waiting;
  std::deque<Connect> connects;  // torn down outside the lock
  std::vector<std::thread> helpers;
  {
    std::lock_guard<std::mutex> l(mu_);
    stop_ = true;
    waiting.swap(ends_);
    connects.swap(connects_);
    helpers.swap(helpers_);
  }
  cv_.notify_all();
  ccv_.notify_all();
  for (auto& f : waiting) exec_->FailFast(&f->op, f->status, f->maybe_sent);
  for (auto& f : flights_) {  // replies still due: those backups may hold it
    for (size_t i = 0; i < cluster::Replicator::kMaxBackups; ++i)
      if (f->links[i] != nullptr) f->status[i] = Status(Code::kBusy, "the server is stopping");
    exec_->FailFast(&f->op, f->status, f->maybe_sent);
  }
  flights_.clear();
  for (auto& t : helpers) t.join();  // a running end finishes (its deadline bounds it)
  if (connector_.joinable()) connector_.join();
  links_.clear();
  ready_.clear();
}

ReplicaFastPath::Link* ReplicaFastPath::FreeLink(uint32_t backup) {
  auto it = links_.find(backup);
  if (it == links_.end()) return nullptr;
  Link* dead = nullptr;
  for (auto& l : it->second) {
    if (l->flight != nullptr) continue;
    // Takes late SEND completions (then PostCall never waits). An idle link has no reply due:
    // one arriving is a protocol error.
    if (!l->failed && l->client && l->client->CallReady()) l->failed = true;
    if (l->failed || !l->client || l->client->broken()) {
      dead = l.get();  // dropped below, not while iterating its pool
      continue;
    }
    if (l->client->CallIdle()) {
      if (dead != nullptr) DropLink(dead);  // another link of this pool: `l` stays valid
      return l.get();
    }
  }
  if (dead != nullptr) DropLink(dead);  // a new one is asked for (AskForLink)
  return nullptr;
}

void ReplicaFastPath::AskForLink(const cluster::Replicator::Backup& b,
                                 const cluster::Replicator::Snapshot& snap) {
  const auto now = Clock::now();
  if (auto it = backoff_.find(b.id); it != backoff_.end() && now < it->second) return;
  const size_t have = links_.count(b.id) ? links_[b.id].size() : 0;
  int& asked = connecting_[b.id];
  if (have + size_t(asked) >= kLinksPerBackup || asked > 0) return;  // one connect at a time
  ++asked;
  Connect c;
  c.backup = b.id;
  c.host = b.host;
  c.port = b.port;
  c.writer = snap.primary;
  c.epoch = snap.epoch;
  PushConnect(std::move(c));
}

void ReplicaFastPath::AdoptLinks() {
  std::vector<std::unique_ptr<Link>> got;
  {
    std::lock_guard<std::mutex> l(mu_);
    got.swap(ready_);
    has_ready_.store(false, std::memory_order_relaxed);
  }
  for (auto& link : got) {
    int& asked = connecting_[link->backup];
    if (asked > 0) --asked;
    if (!link->client) {  // the connect failed: not asked again for a while
      backoff_[link->backup] = Clock::now() + std::chrono::milliseconds(kBackoffMs);
      continue;
    }
    Status s = link->client->RearmCompletions();  // armed before the worker first sleeps on it
    std::vector<std::unique_ptr<Link>>& pool = links_[link->backup];
    if (!s.ok() || pool.size() >= kLinksPerBackup) {
      if (!s.ok()) {
        LOG_EVERY_N(WARNING, 20) << "replication link to server " << link->backup << ": "
                                 << s.ToString();
      }
      Connect c;  // torn down by the connector, not on this thread
      c.dead = std::move(link);
      PushConnect(std::move(c));
      continue;
    }
    link->last_used = Clock::now();
    int& retry_ms = ring_retry_ms_.try_emplace(link->backup, kRingRetryMs).first->second;
    if (link->ring != nullptr) {
      retry_ms = kRingRetryMs;  // granted: the next refusal waits the least again
    } else if (link->ring_refused) {
      link->ring_retry = link->last_used + std::chrono::milliseconds(retry_ms);
      retry_ms = std::min(retry_ms * 2, kRingRetryMaxMs);
    }
    pool.push_back(std::move(link));
  }
}

void ReplicaFastPath::Tick() {
  if (has_ready_.load(std::memory_order_acquire)) AdoptLinks();
  const Clock::time_point now = Clock::now();
  const auto idle_before = now - std::chrono::milliseconds(kIdleMs);
  for (auto& [backup, pool] : links_) {
    // At most one link per backup closed for a ring's sake per second (none while a link
    // to it is being made): the others carry the writes meanwhile.
    auto asked = connecting_.find(backup);
    Clock::time_point& next_drop = ring_next_drop_[backup];
    bool retry_one = (asked == connecting_.end() || asked->second == 0) && next_drop <= now;
    for (size_t i = 0; i < pool.size();) {
      Link* l = pool[i].get();
      const bool retry_ring =
          retry_one && l->ring_retry != Clock::time_point{} && l->ring_retry <= now;
      if (l->flight == nullptr && (l->last_used < idle_before || retry_ring)) {
        if (retry_ring) {
          retry_one = false;
          next_drop = now + std::chrono::seconds(1);
        }
        DropLink(l);  // erases pool[i]
      } else {
        ++i;
      }
    }
  }
}

void ReplicaFastPath::DropLink(Link* l) {
  auto it = links_.find(l->backup);
  if (it == links_.end()) return;
  auto& pool = it->second;
  for (size_t i = 0; i < pool.size(); ++i)
    if (pool[i].get() == l) {
      Connect c;
      c.dead = std::move(pool[i]);
      pool.erase(pool.begin() + long(i));
      PushConnect(std::move(c));
      return;
    }
}

bool ReplicaFastPath::Try(const std::shared_ptr<Conn>& c, std::string* request) {
  if (flights_.size() + handed_.load(std::memory_order_relaxed) >= kMaxInFlight) return false;
  if (has_ready_.load(std::memory_order_acquire)) AdoptLinks();
  auto f = std::make_unique<Flight>();
  if (!exec_->BeginFast(request, &f->op)) return false;
  const std::vector<cluster::Replicator::Backup>& backups = f->op.fw.snap.backups;
  const size_t n = backups.size();
  // A free link to every backup, or nothing is posted (backup ids are distinct: so are links).
  bool all = true;
  for (size_t i = 0; i < n; ++i) {
    f->links[i] = FreeLink(backups[i].id);
    if (f->links[i] == nullptr) {
      AskForLink(backups[i], f->op.fw.snap);
      all = false;
    }
  }
  if (!all) {
    exec_->AbortFast(&f->op);
    *request = std::move(f->op.request);
    return false;
  }
  for (size_t i = 0; i < n; ++i) {
    Link* l = f->links[i];
    bool posted = false;
    Status s = PostOn(f.get(), i, &posted);
    if (s.ok() && !posted) s = Status(Code::kIoError, "REPLICATE not posted on an idle link");
    f->maybe_sent[i] = posted;  // set only once ibv_post_send took the SEND
    if (!s.ok()) {
      f->status[i] = s;
      f->links[i] = nullptr;
      DropLink(l);
      continue;
    }
    l->flight = f.get();
    l->last_used = Clock::now();
    ++f->waiting;
  }
  f->conn = c;
  f->posted = Clock::now();
  for (uint64_t& e : f->seen_epoch) e = f->op.fw.snap.epoch;
  if (f->waiting == 0) {
    HandOn(std::move(f));
  } else {
    flights_.push_back(std::move(f));
  }
  return true;
}

Status ReplicaFastPath::PostOn(Flight* f, size_t i, bool* posted) {
  Link* l = f->links[i];
  Connection* c = l->client->connection();
  if (l->ring != nullptr && c != nullptr) {
    l->ring->TakeControl(*c);  // a READ that completed since: what the backup said
    Status s = l->ring->TryPost(c, f->op.fw, posted);
    if (!s.ok() || *posted) {
      l->ring_flight = *posted;
      if (*posted) exec_->CountRingWrite();
      return s;
    }
  }
  const std::string_view value = f->op.fw.put ? std::string_view(f->op.fw.value) : "";
  Status s = l->client->PostCall(wire::Op::kReplicate, f->op.fw.msg, value, &l->rid, posted);
  // Not to the ring this time: learn the backup's epoch and room for the next write.
  if (s.ok() && *posted && l->ring != nullptr && c != nullptr) (void)l->ring->AskControl(c);
  return s;
}

void ReplicaFastPath::Poll(std::vector<Done>* done) {
  if (flights_.empty()) return;
  const auto now = Clock::now();
  for (size_t k = 0; k < flights_.size();) {
    Flight* f = flights_[k].get();
    const size_t n = f->op.fw.snap.backups.size();
    for (size_t i = 0; i < n; ++i) {
      Link* l = f->links[i];
      if (l == nullptr) continue;
      Status s;
      // Takes the link's completions (a ring chain's too); then a ring write whose chain
      // completed was placed in the backup's ring: its OK.
      const bool reply = l->client->CallReady();
      if (l->ring_flight && !reply && !l->client->broken() && !l->failed &&
          l->client->connection()->RingIdle()) {
        l->ring->TakeControl(*l->client->connection());
        s = Status::Ok();
      } else if (reply) {
        uint64_t rid = 0;
        std::string payload;
        s = l->client->TakeCall(&rid, &payload);
        if (s.ok() && rid != l->rid)
          s = Status(Code::kProtocolError,
                     "the backup answered another request than the REPLICATE");
      } else if (l->client->broken() || l->failed) {
        s = Status(Code::kConnectionLost,
                   "the replication link to server " + std::to_string(l->backup) + " broke");
      } else if (exec_->FastDropped(f->op, l->backup, &f->seen_epoch[i])) {
        // The map no longer wants this backup's reply (it left the slot, or this server is no
        // longer its primary): the end retries per the new map, as SendOnce's wait ends. A
        // late reply dies with the link.
        s = Status(Code::kConnectionLost, "the map dropped server " + std::to_string(l->backup) +
                                              " from the slot's backups");
        l->failed = true;
      } else if (now - f->posted > std::chrono::milliseconds(kWaitMs)) {
        // Not a transport failure (kBusy is not reported as a suspect): the helper asks again.
        s = Status(Code::kBusy, "no reply within " + std::to_string(kWaitMs) +
                                    " ms on the fast path (the link is dropped)");
        l->failed = true;
      } else {
        continue;
      }
      f->status[i] = s;
      f->links[i] = nullptr;
      --f->waiting;
      l->ring_flight = false;  // before a drop: the link is the connector thread's from then on
      if (l->failed || l->client->broken() || s.code() == Code::kProtocolError) {
        DropLink(l);
      } else {
        l->flight = nullptr;
      }
    }
    if (f->waiting > 0) {
      ++k;
      continue;
    }
    std::unique_ptr<Flight> mine = std::move(flights_[k]);
    flights_.erase(flights_.begin() + long(k));
    bool all_ok = true;
    for (size_t i = 0; i < n; ++i) all_ok = all_ok && mine->status[i].ok();
    // The apply may log: not on the worker when the log would make it wait for the disk.
    if (!all_ok || (log_ != nullptr && !log_->WriteInline())) {
      HandOn(std::move(mine));
      continue;
    }
    // Every backup applied it: EndFast does not wait (no retry), applies it here, answers.
    std::string reply(reply_cap_, '\0');
    const size_t len = exec_->EndFast(&mine->op, mine->status, mine->maybe_sent,
                                      reinterpret_cast<uint8_t*>(reply.data()), reply.size());
    reply.resize(len);
    done->push_back({std::move(mine->conn), std::move(reply)});
  }
}

void ReplicaFastPath::AppendFds(std::vector<pollfd>* fds) {
  polled_.clear();
  for (const auto& f : flights_)
    for (Link* l : f->links) {
      if (l == nullptr) continue;
      const int fd = l->client->completion_fd();
      if (fd < 0) continue;
      fds->push_back({fd, POLLIN, 0});
      polled_.push_back(l);
    }
}

void ReplicaFastPath::Rearm(const std::vector<pollfd>& fds, size_t from) {
  for (size_t i = 0; i < polled_.size() && from + i < fds.size(); ++i) {
    if (fds[from + i].revents & (POLLERR | POLLHUP | POLLNVAL)) {
      polled_[i]->failed = true;  // Poll ends its write's attempt; else poll() would spin
      continue;
    }
    if (fds[from + i].revents & POLLIN) {
      Status s = polled_[i]->client->RearmCompletions();
      if (!s.ok()) {  // Poll finds the link broken or overdue
        LOG_EVERY_N(WARNING, 20) << "replication link to server " << polled_[i]->backup << ": "
                                 << s.ToString();
      }
    }
  }
  polled_.clear();
}

void ReplicaFastPath::HandOn(std::unique_ptr<Flight> f) {
  handed_.fetch_add(1, std::memory_order_relaxed);
  {
    std::lock_guard<std::mutex> l(mu_);
    ends_.push_back(std::move(f));
    // A helper for every write waiting (at most kMaxInFlight): each may wait for a backup
    // until its deadline, and the writes behind it must not wait past theirs.
    if (idle_helpers_ < ends_.size() && helpers_.size() < kMaxInFlight) {
      try {
        helpers_.emplace_back([this] { HelperLoop(); });
      } catch (const std::system_error& e) {  // no thread now: a running helper takes it later
        LOG_EVERY_N(ERROR, 20) << "replication fast path: no helper thread: " << e.what();
      }
    }
  }
  cv_.notify_one();
}

void ReplicaFastPath::PushConnect(Connect c) {
  {
    std::lock_guard<std::mutex> l(mu_);
    connects_.push_back(std::move(c));
  }
  ccv_.notify_one();
}

void ReplicaFastPath::HelperLoop() {
  for (;;) {
    std::unique_ptr<Flight> f;
    {
      std::unique_lock<std::mutex> l(mu_);
      ++idle_helpers_;
      cv_.wait(l, [this] { return stop_ || !ends_.empty(); });
      --idle_helpers_;
      if (stop_) return;
      f = std::move(ends_.front());
      ends_.pop_front();
    }
    // A write whose first attempt did not succeed everywhere: ended as Write would.
    std::string reply(reply_cap_, '\0');
    const size_t len = exec_->EndFast(&f->op, f->status, f->maybe_sent,
                                      reinterpret_cast<uint8_t*>(reply.data()), reply.size());
    reply.resize(len);
    reply_(std::move(f->conn), std::move(reply));
    handed_.fetch_sub(1, std::memory_order_relaxed);
  }
}

void ReplicaFastPath::ConnectorLoop() {
  for (;;) {
    Connect t;
    {
      std::unique_lock<std::mutex> l(mu_);
      ccv_.wait(l, [this] { return stop_ || !connects_.empty(); });
      if (stop_) return;
      t = std::move(connects_.front());
      connects_.pop_front();
    }
    if (t.dead) {  // a dropped link: its disconnect and teardown here, not on the worker
      t.dead.reset();
      continue;
    }
    auto link = std::make_unique<Link>();
    link->backup = t.backup;
    auto c = std::make_unique<ClientImpl>(t.host, t.port, options_);
    Status s = c->Open();
    if (s.ok() && c->owner_slots() != owner_slots_)
      s = Status(Code::kProtocolError, "the backup has no ownership table of this cluster");
    if (s.ok() && rings_) {  // no ring: the link stays two-sided
      Status g = RingLink::Grant(c.get(), t.writer, t.epoch, &link->ring);
      if (!g.ok()) {
        LOG_EVERY_N(INFO, 20) << "replication link to server " << t.backup
                              << ": no log ring: " << g.ToString();
        // Refused for now (no headroom, a map being applied, the writer's bound, an epoch
        // not yet applied there): a later link asks again. Malformed or never: not asked.
        const Code k = g.code();
        link->ring_refused =
            k != Code::kInvalidArgument && k != Code::kBadRequest && k != Code::kProtocolError;
      }
    }
    if (s.ok()) {
      link->client = std::move(c);
    } else {
      LOG_EVERY_N(WARNING, 20) << "replication link to server " << t.backup << " (" << t.host << ":"
                               << t.port << "): " << s.ToString();
    }
    {
      std::lock_guard<std::mutex> l(mu_);
      ready_.push_back(std::move(link));
    }
    has_ready_.store(true, std::memory_order_release);
  }
}

}  // namespace rkv
