#include "server/server.h"

#include <arpa/inet.h>
#include <glog/logging.h>
#include <netdb.h>
#include <poll.h>
#include <sys/mman.h>

#include <cerrno>
#include <chrono>
#include <cstring>
#include <random>
#include <sstream>

#include "common/qp_setup.h"
#include "common/wire.h"

namespace rkv {
namespace {
constexpr size_t kRecvBufSize = (wire::kMaxRequestSize + 4095) / 4096 * 4096;
constexpr uint64_t kRecvTag = 1;  // recv wr_id = index << 1 | 1; send wr_id = Conn* (even)
}  // namespace

void Server::Unmap::operator()(uint8_t* p) const { munmap(p, len); }

Server::Server(ServerOptions options) : opt_(std::move(options)) {}

Server::~Server() {
  Stop();
  if (exchange_thread_.joinable()) exchange_thread_.join();
  lingering_.clear();
  for (auto& w : workers_)
    if (w->thread.joinable()) w->thread.join();
  std::vector<std::shared_ptr<Conn>> all = manual_;
  manual_.clear();
  for (auto& [id, c] : by_id_) all.push_back(c);
  for (auto& c : all) DestroyConn(c);
}

Status Server::Start() {
  std::random_device rd;
  instance_id_ = (uint64_t{rd()} << 32 | rd()) ^
                 uint64_t(std::chrono::system_clock::now().time_since_epoch().count());
  if (instance_id_ == 0) instance_id_ = 1;

  channel_.reset(rdma_create_event_channel());
  if (!channel_) return ErrnoStatus("rdma_create_event_channel", errno);
  rdma_cm_id* id = nullptr;
  if (rdma_create_id(channel_.get(), &id, nullptr, RDMA_PS_TCP) != 0)
    return ErrnoStatus("rdma_create_id", errno);
  listen_id_.reset(id);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(opt_.port);
  if (inet_pton(AF_INET, opt_.host.c_str(), &addr.sin_addr) != 1) {
    addrinfo hints{}, *res = nullptr;
    hints.ai_family = AF_INET;
    if (getaddrinfo(opt_.host.c_str(), nullptr, &hints, &res) != 0)
      return Status(Code::kInvalidArgument, "cannot resolve --listen host '" + opt_.host + "'");
    addr.sin_addr = reinterpret_cast<sockaddr_in*>(res->ai_addr)->sin_addr;
    freeaddrinfo(res);
  }
  if (rdma_bind_addr(id, reinterpret_cast<sockaddr*>(&addr)) != 0)
    return ErrnoStatus("rdma_bind_addr(" + opt_.host + ":" + std::to_string(opt_.port) +
                           ") (is the address on an RDMA-capable interface?)",
                       errno);
  if (rdma_listen(id, 128) != 0) return ErrnoStatus("rdma_listen", errno);
  bound_port_ = ntohs(rdma_get_src_port(id));

  ctx_ = id->verbs;
  if (ctx_ == nullptr) {
    int n = 0;
    ibv_context** list = rdma_get_devices(&n);
    if (list == nullptr || n == 0) {
      if (list) rdma_free_devices(list);
      return Status(Code::kIoError, "no RDMA device found (ibv_devices lists none)");
    }
    ctx_ = list[0];
    rdma_free_devices(list);
  }
  pd_.reset(ibv_alloc_pd(ctx_));
  if (!pd_) return ErrnoStatus("ibv_alloc_pd", errno);

  void* mem = mmap(nullptr, opt_.memory, PROT_READ | PROT_WRITE,
                   MAP_PRIVATE | MAP_ANONYMOUS | MAP_POPULATE, -1, 0);
  if (mem == MAP_FAILED)
    return ErrnoStatus("mmap(" + std::to_string(opt_.memory) + " bytes for --memory)", errno);
  region_ = std::unique_ptr<uint8_t, Unmap>(static_cast<uint8_t*>(mem), Unmap{opt_.memory});
  layout::Geometry geo;
  uint64_t seed = instance_id_ * 0x9E3779B97F4A7C15ull;
  if (!layout::ComputeGeometry(opt_.memory, opt_.buckets, opt_.index_fraction, seed, &geo))
    return Status(Code::kInvalidArgument, "--memory=" + std::to_string(opt_.memory) +
                                              " is too small for the index (" +
                                              std::to_string(opt_.buckets) + " buckets requested)");
  table_ = std::make_unique<Table>(region_.get(), geo);
  // Remote READ only: no remote write, no remote atomic.
  region_mr_.reset(ibv_reg_mr(pd_.get(), region_.get(), opt_.memory, IBV_ACCESS_REMOTE_READ));
  if (!region_mr_) return ErrnoStatus("ibv_reg_mr(table region)", errno);

  recv_buf_.assign(size_t(opt_.srq_depth) * kRecvBufSize, 0);
  recv_mr_.reset(ibv_reg_mr(pd_.get(), recv_buf_.data(), recv_buf_.size(), IBV_ACCESS_LOCAL_WRITE));
  if (!recv_mr_) return ErrnoStatus("ibv_reg_mr(receive buffers)", errno);
  send_buf_.assign(size_t(opt_.max_connections) * kSendSlotsPerConn * kSendSlotSize, 0);
  send_mr_.reset(ibv_reg_mr(pd_.get(), send_buf_.data(), send_buf_.size(), 0));
  if (!send_mr_) return ErrnoStatus("ibv_reg_mr(send buffers)", errno);
  ibv_srq_init_attr sa{};
  sa.attr.max_wr = opt_.srq_depth;
  sa.attr.max_sge = 1;
  srq_.reset(ibv_create_srq(pd_.get(), &sa));
  if (!srq_) return ErrnoStatus("ibv_create_srq", errno);
  for (int i = 0; i < opt_.srq_depth; ++i) {
    Status s = PostRecv(i);
    if (!s.ok()) return s;
  }
  int cqe = opt_.srq_depth + opt_.max_connections * kSendSlotsPerConn + 64;
  for (int w = 0; w < opt_.workers; ++w) {
    auto wk = std::make_unique<Worker>();
    wk->channel.reset(ibv_create_comp_channel(ctx_));
    if (!wk->channel) return ErrnoStatus("ibv_create_comp_channel", errno);
    wk->cq.reset(ibv_create_cq(ctx_, cqe, nullptr, wk->channel.get(), 0));
    if (!wk->cq) return ErrnoStatus("ibv_create_cq(" + std::to_string(cqe) + ")", errno);
    if (ibv_req_notify_cq(wk->cq.get(), 0) != 0) return ErrnoStatus("ibv_req_notify_cq", errno);
    workers_.push_back(std::move(wk));
  }
  {
    MutexLock l(&conns_mu_);
    for (int i = opt_.max_connections - 1; i >= 0; --i) free_slots_.push_back(i);
  }
  if (opt_.exchange.method != Exchange::kRdmaCm) {
    Status s = ListenExchange(opt_.exchange, opt_.host, bound_port_, &exchange_listener_);
    if (!s.ok()) return s;
    // Fail now, not at the first client, if the settings do not fit the device.
    ConnParams probe;
    s = FillLocalParams(ctx_, opt_.qp, &probe);
    if (!s.ok()) return Status(s.code(), "connection settings: " + s.message());
    LOG(INFO) << "manual-mode connections: parameters exchanged over "
              << exchange_listener_->Describe();
  }

  LOG(INFO) << "kvserver listening on " << opt_.host << ":" << bound_port_ << " device "
            << ibv_get_device_name(ctx_->device) << " instance " << instance_id_;
  LOG(INFO) << "region addr 0x" << std::hex << reinterpret_cast<uint64_t>(region_.get()) << std::dec
            << " rkey 0x" << std::hex << region_mr_->rkey << std::dec << " size " << opt_.memory
            << " buckets " << geo.num_buckets << " overflow_slots " << geo.overflow_slots
            << " entry_capacity " << geo.entry_capacity() << " heap "
            << (opt_.memory - geo.heap_offset) << " bytes, workers " << opt_.workers;
  return Status::Ok();
}

Status Server::PostRecv(uint32_t index) {
  ibv_sge sge{reinterpret_cast<uint64_t>(recv_buf_.data() + size_t(index) * kRecvBufSize),
              uint32_t(kRecvBufSize), recv_mr_->lkey};
  ibv_recv_wr wr{}, *bad = nullptr;
  wr.wr_id = (uint64_t{index} << 1) | kRecvTag;
  wr.sg_list = &sge;
  wr.num_sge = 1;
  int rc = ibv_post_srq_recv(srq_.get(), &wr, &bad);
  return rc == 0 ? Status::Ok() : ErrnoStatus("ibv_post_srq_recv", rc);
}

std::shared_ptr<Server::Conn> Server::FindByQpn(uint32_t qpn) {
  MutexLock l(&conns_mu_);
  auto it = by_qpn_.find(qpn);
  return it == by_qpn_.end() ? nullptr : it->second;
}

Status Server::Run() {
  for (int w = 0; w < opt_.workers; ++w)
    workers_[w]->thread = std::thread([this, w] { WorkerLoop(w); });
  if (exchange_listener_) exchange_thread_ = std::thread([this] { ExchangeLoop(); });
  Status result;
  while (!stop_.load()) {
    std::vector<std::shared_ptr<Conn>> to_drop;
    for (auto& [id, c] : by_id_)
      if (c->disconnect_requested.exchange(false)) to_drop.push_back(c);
    for (auto& c : to_drop) {
      LOG(WARNING) << "dropping client qp " << c->qp->qp_num << ": too many bad requests";
      rdma_disconnect(c->id);
    }
    pollfd pfd{channel_->fd, POLLIN, 0};
    int r = poll(&pfd, 1, 200);
    if (r < 0 && errno != EINTR) {
      result = ErrnoStatus("poll(rdma_cm channel)", errno);
      break;
    }
    if (r <= 0) continue;
    rdma_cm_event* ev = nullptr;
    if (rdma_get_cm_event(channel_.get(), &ev) != 0) {
      result = ErrnoStatus("rdma_get_cm_event", errno);
      break;
    }
    rdma_cm_id* eid = ev->id;
    switch (ev->event) {
      case RDMA_CM_EVENT_CONNECT_REQUEST:
        HandleConnectRequest(ev);  // acks
        break;
      case RDMA_CM_EVENT_ESTABLISHED: {
        rdma_ack_cm_event(ev);
        auto it = by_id_.find(eid);
        if (it != by_id_.end()) {
          it->second->state = Conn::State::kEstablished;
          LOG(INFO) << "connection established via rdma_cm: " << ParamsLine(eid->qp);
        }
        break;
      }
      case RDMA_CM_EVENT_DISCONNECTED:
      case RDMA_CM_EVENT_REJECTED:
      case RDMA_CM_EVENT_CONNECT_ERROR:
      case RDMA_CM_EVENT_UNREACHABLE:
        VLOG(1) << rdma_event_str(ev->event);
        rdma_ack_cm_event(ev);
        CloseConn(eid);
        break;
      case RDMA_CM_EVENT_DEVICE_REMOVAL:
        rdma_ack_cm_event(ev);
        result = Status(Code::kIoError, "RDMA device removed");
        stop_.store(true);
        break;
      default:
        rdma_ack_cm_event(ev);
        break;
    }
  }
  stop_.store(true);
  if (exchange_thread_.joinable()) exchange_thread_.join();
  for (auto& w : workers_)
    if (w->thread.joinable()) w->thread.join();
  return result;
}

wire::ServerHello Server::MakeHello() const {
  const layout::Geometry& g = table_->geometry();
  wire::ServerHello h{};
  h.magic = wire::kHelloMagic;
  h.version = wire::kProtocolVersion;
  h.instance_id = instance_id_;
  h.region_addr = reinterpret_cast<uint64_t>(region_.get());
  h.region_size = opt_.memory;
  h.rkey = region_mr_->rkey;
  h.num_buckets = g.num_buckets;
  h.hash_seed = g.seed;
  h.bucket_size = layout::kBucketSize;
  h.slot_size = layout::kSlotSize;
  h.overflow_offset = g.overflow_offset;
  h.overflow_slots = g.overflow_slots;
  h.max_key_size = wire::kMaxKeySize;
  h.max_value_size = wire::kMaxValueSize;
  h.max_request_size = wire::kMaxRequestSize;
  return h;
}

ibv_qp_init_attr Server::QpAttr(int worker) const {
  ibv_qp_init_attr qa{};
  qa.send_cq = workers_[worker]->cq.get();
  qa.recv_cq = workers_[worker]->cq.get();
  qa.srq = srq_.get();
  qa.qp_type = IBV_QPT_RC;
  qa.cap.max_send_wr = kSendSlotsPerConn;
  qa.cap.max_send_sge = 1;
  return qa;
}

bool Server::TakeSlot(int* index) {
  MutexLock l(&conns_mu_);
  if (free_slots_.empty()) return false;
  *index = free_slots_.back();
  free_slots_.pop_back();
  return true;
}

void Server::ReleaseSlot(int index) {
  MutexLock l(&conns_mu_);
  free_slots_.push_back(index);
}

std::string Server::ParamsLine(ibv_qp* qp) {
  ConnParams l, r;
  Status s = ReadBackParams(qp, &l, &r);
  if (!s.ok()) return "qp " + std::to_string(qp->qp_num) + " (" + s.message() + ")";
  return FormatParamsLine(l, r);
}

void Server::HandleConnectRequest(rdma_cm_event* ev) {
  rdma_cm_id* id = ev->id;
  auto reject = [&](const std::string& why) {
    LOG(WARNING) << "rejecting connection: " << why;
    connections_rejected_.fetch_add(1);
    rdma_reject(id, why.c_str(), static_cast<uint8_t>(std::min<size_t>(why.size() + 1, 140)));
    rdma_ack_cm_event(ev);
    rdma_destroy_id(id);
  };
  wire::ClientHello hello;
  Status s =
      wire::DecodeClientHello(ev->param.conn.private_data, ev->param.conn.private_data_len, &hello);
  if (!s.ok()) return reject(s.message());
  if (id->verbs != ctx_)
    return reject("connection arrived on another RDMA device than the table's");
  int slot = 0;
  if (!TakeSlot(&slot))
    return reject("server is at --max_connections=" + std::to_string(opt_.max_connections));
  auto c = std::make_shared<Conn>();
  c->index = slot;
  c->worker = c->index % opt_.workers;
  c->id = id;
  ibv_qp_init_attr qa = QpAttr(c->worker);
  if (rdma_create_qp(id, pd_.get(), &qa) != 0) {
    ReleaseSlot(slot);
    return reject(std::string("rdma_create_qp failed: ") + std::strerror(errno));
  }
  c->qp = id->qp;
  uint8_t ack_timeout = static_cast<uint8_t>(opt_.qp.timeout);
  if (rdma_set_option(id, RDMA_OPTION_ID, RDMA_OPTION_ID_ACK_TIMEOUT, &ack_timeout,
                      sizeof ack_timeout) != 0)
    LOG(WARNING) << "rdma_set_option(ACK_TIMEOUT) failed: " << std::strerror(errno);
  wire::ServerHello h = MakeHello();
  ibv_device_attr dev{};
  ibv_query_device(ctx_, &dev);
  rdma_conn_param cp{};
  cp.private_data = &h;
  cp.private_data_len = sizeof(h);
  // Outstanding READs a client may have at once on this QP (its max_dest_rd_atomic): what the
  // client asks for, at least 16, within the device's limit; or --max_dest_rd_atomic.
  int requested = std::max<int>(ev->param.conn.initiator_depth, ev->param.conn.responder_resources);
  int responder =
      opt_.qp.max_dest_rd_atomic >= 0 ? opt_.qp.max_dest_rd_atomic : std::max(requested, 16);
  cp.responder_resources =
      static_cast<uint8_t>(std::max(1, std::min<int>(responder, dev.max_qp_rd_atom)));
  cp.initiator_depth = static_cast<uint8_t>(std::max(0, opt_.qp.max_rd_atomic));
  cp.retry_count = static_cast<uint8_t>(opt_.qp.retry_cnt);
  cp.rnr_retry_count = static_cast<uint8_t>(opt_.qp.rnr_retry);
  {
    MutexLock l(&conns_mu_);
    by_qpn_[id->qp->qp_num] = c;
  }
  by_id_[id] = c;
  connections_total_.fetch_add(1);
  connections_active_.fetch_add(1);  // from accept until the QP is destroyed
  if (rdma_accept(id, &cp) != 0) {
    LOG(WARNING) << "rdma_accept failed: " << std::strerror(errno);
    rdma_ack_cm_event(ev);
    CloseConn(id);
    return;
  }
  VLOG(1) << "accepted qp " << id->qp->qp_num << " responder_resources "
          << int(cp.responder_resources);
  rdma_ack_cm_event(ev);
}

void Server::CloseConn(rdma_cm_id* id) {
  auto it = by_id_.find(id);
  if (it == by_id_.end()) return;
  std::shared_ptr<Conn> c = it->second;
  by_id_.erase(it);
  connections_active_.fetch_sub(1);
  DestroyConn(std::move(c));
}

void Server::DestroyConn(std::shared_ptr<Conn> c) {
  c->state = Conn::State::kClosing;
  if (c->id) rdma_disconnect(c->id);  // may fail if already disconnected; that is fine
  MoveQpToError(c->qp);
  {
    MutexLock l(&conns_mu_);
    by_qpn_.erase(c->qp->qp_num);
  }
  // Workers decrement sends_in_flight on each (flushed) send completion; the Conn must stay
  // alive until then because its address is the send wr_id.
  auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(5);
  while (c->sends_in_flight.load() > 0 && std::chrono::steady_clock::now() < deadline &&
         !stop_.load())
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  if (c->sends_in_flight.load() > 0 && !stop_.load()) {
    LOG(ERROR) << "qp " << c->qp->qp_num << " still has sends in flight; leaking it";
    new std::shared_ptr<Conn>(c);  // deliberate leak: a late completion must not see freed memory
    return;
  }
  if (c->id) {
    rdma_destroy_qp(c->id);
    rdma_destroy_id(c->id);
    c->id = nullptr;
  } else if (int rc = ibv_destroy_qp(c->qp); rc != 0) {
    LOG(ERROR) << "ibv_destroy_qp failed: " << std::strerror(rc);
  }
  c->qp = nullptr;
  c->control.reset();
  ReleaseSlot(c->index);
}

void Server::ExchangeLoop() {
  using Clock = std::chrono::steady_clock;
  auto last_tick = Clock::now();
  while (!stop_.load()) {
    std::unique_ptr<ExchangeChannel> ch;
    Status s = exchange_listener_->Accept(&ch, 100);
    if (!s.ok()) {
      LOG_EVERY_N(WARNING, 50) << "exchange listener: " << s.ToString();
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
    }
    if (ch) HandleExchange(std::move(ch));
    if (Clock::now() - last_tick < std::chrono::seconds(1)) continue;
    last_tick = Clock::now();
    exchange_listener_->Tick();
    auto linger_limit = std::chrono::milliseconds(opt_.exchange.timeout_ms);
    for (size_t i = 0; i < lingering_.size();) {
      if (lingering_[i].first->PeerGone() || Clock::now() - lingering_[i].second > linger_limit)
        lingering_.erase(lingering_.begin() + long(i));
      else
        ++i;
    }
    // Liveness: a manual connection ends when its control channel closes (TCP EOF, client's
    // file removed or stale, client's etcd key deleted or its lease expired).
    for (size_t i = 0; i < manual_.size();) {
      std::shared_ptr<Conn> c = manual_[i];
      bool gone = c->control->PeerGone();
      if (!gone && !c->disconnect_requested.load()) {
        ++i;
        continue;
      }
      LOG(INFO) << "manual connection qp " << c->qp->qp_num << " closed: "
                << (gone ? "client left (" + c->control->Describe() + ")"
                         : std::string("too many bad requests"));
      manual_.erase(manual_.begin() + long(i));
      connections_active_.fetch_sub(1);
      DestroyConn(std::move(c));
    }
  }
}

void Server::HandleExchange(std::unique_ptr<ExchangeChannel> ch) {
  const std::string where = ch->Describe();
  VLOG(1) << "parameter exchange from " << where;
  struct Linger {  // unless the connection is established, keep the channel a while
    Server* server;
    std::unique_ptr<ExchangeChannel>* ch;
    ~Linger() {
      if (*ch) server->lingering_.emplace_back(std::move(*ch), std::chrono::steady_clock::now());
    }
  } linger{this, &ch};
  ExchangeMsg m;
  Status s = ch->Receive(&m, opt_.exchange.timeout_ms);
  if (!s.ok()) {
    LOG(WARNING) << "parameter exchange " << where << ": " << s.ToString();
    return;
  }
  auto refuse = [&](Code code, const std::string& why) {
    LOG(WARNING) << "refusing manual connection (" << where << "): " << why;
    connections_rejected_.fetch_add(1);
    ExchangeMsg e;
    e.type = MsgType::kError;
    e.code = code;
    e.text = why;
    (void)ch->Send(e);
  };
  ConnParams self;
  s = FillLocalParams(ctx_, opt_.qp, &self);
  if (!s.ok()) return refuse(s.code(), "server: " + s.message());
  self.remote_addr = reinterpret_cast<uint64_t>(region_.get());
  self.rkey = region_mr_->rkey;
  self.region_size = opt_.memory;
  ExchangeMsg reply;
  reply.params = self;
  reply.has_hello = true;
  reply.hello = MakeHello();
  if (m.type == MsgType::kCheck) {  // kvctl check: validate only, connect nothing
    reply.type = MsgType::kCheckReply;
    reply.text = CheckParams(self, m.params, opt_.qp);
    LOG(INFO) << "check from " << where << ": " << (reply.text.empty() ? "OK" : reply.text);
    (void)ch->Send(reply);
    return;
  }
  if (m.type != MsgType::kParams)
    return refuse(Code::kProtocolError, "expected the client's parameters first");
  int slot = 0;
  if (!TakeSlot(&slot))
    return refuse(Code::kTableFull,
                  "server is at --max_connections=" + std::to_string(opt_.max_connections));
  auto c = std::make_shared<Conn>();
  c->index = slot;
  c->worker = slot % opt_.workers;
  ibv_qp_init_attr qa = QpAttr(c->worker);
  c->qp = ibv_create_qp(pd_.get(), &qa);
  if (c->qp == nullptr) {
    int err = errno;
    ReleaseSlot(slot);
    return refuse(Code::kIoError, "server: ibv_create_qp failed: " + std::string(strerror(err)));
  }
  reply.params.qp_num = self.qp_num = c->qp->qp_num;
  std::string note;
  s = ModifyQpToInit(c->qp, self, IBV_ACCESS_REMOTE_READ);
  if (s.ok()) s = ConnectQp(c->qp, self, m.params, opt_.qp, IBV_ACCESS_REMOTE_READ, &note);
  {
    MutexLock l(&conns_mu_);
    by_qpn_[c->qp->qp_num] = c;
  }
  connections_total_.fetch_add(1);
  connections_active_.fetch_add(1);
  if (!s.ok()) {
    refuse(s.code(), "server: " + s.message());
    connections_active_.fetch_sub(1);
    DestroyConn(c);
    return;
  }
  if (!note.empty()) LOG(INFO) << note;
  s = ch->Send(reply);
  ExchangeMsg ready;
  if (s.ok()) s = ch->Receive(&ready, opt_.exchange.timeout_ms);
  if (s.ok() && ready.type == MsgType::kError) s = Status(ready.code, ready.text);
  if (s.ok() && ready.type != MsgType::kReady)
    s = Status(Code::kProtocolError, "expected READY from the client");
  if (!s.ok()) {
    LOG(WARNING) << "manual connection (" << where << ") failed: " << s.ToString();
    connections_rejected_.fetch_add(1);
    connections_active_.fetch_sub(1);
    DestroyConn(c);
    return;
  }
  c->state = Conn::State::kEstablished;
  c->control = std::move(ch);
  LOG(INFO) << "connection established via " << where << ": " << ParamsLine(c->qp);
  manual_.push_back(std::move(c));
}

void Server::WorkerLoop(int w) {
  Worker& wk = *workers_[w];
  ibv_wc wc[32];
  while (!stop_.load()) {
    pollfd pfd{wk.channel->fd, POLLIN, 0};
    int r = poll(&pfd, 1, 200);
    if (r <= 0) continue;
    ibv_cq* cq = nullptr;
    void* ctx = nullptr;
    if (ibv_get_cq_event(wk.channel.get(), &cq, &ctx) != 0) continue;
    ibv_ack_cq_events(cq, 1);
    if (ibv_req_notify_cq(cq, 0) != 0) LOG(ERROR) << "ibv_req_notify_cq failed";
    int n;
    while ((n = ibv_poll_cq(cq, 32, wc)) > 0) {
      for (int i = 0; i < n; ++i) {
        if (wc[i].wr_id & kRecvTag) {
          uint32_t index = static_cast<uint32_t>(wc[i].wr_id >> 1);
          if (wc[i].status == IBV_WC_SUCCESS) HandleRecv(wc[i]);
          if (!stop_.load()) {
            Status s = PostRecv(index);
            if (!s.ok()) LOG(ERROR) << s.ToString();
          }
        } else {
          auto* c = reinterpret_cast<Conn*>(wc[i].wr_id);
          if (wc[i].status != IBV_WC_SUCCESS && wc[i].status != IBV_WC_WR_FLUSH_ERR)
            VLOG(1) << "reply send failed: " << ibv_wc_status_str(wc[i].status);
          c->sends_in_flight.fetch_sub(1);
        }
      }
    }
  }
}

void Server::HandleRecv(const ibv_wc& wc) {
  std::shared_ptr<Conn> c = FindByQpn(wc.qp_num);
  if (!c || c->state == Conn::State::kClosing) return;
  const uint8_t* msg = recv_buf_.data() + size_t(wc.wr_id >> 1) * kRecvBufSize;
  wire::Request req{};
  Status s = wire::DecodeRequest(msg, wc.byte_len, &req);
  std::string payload;
  Code code = Code::kOk;
  wire::Op op = req.op;
  if (!s.ok()) {
    rpc_bad_.fetch_add(1);
    LOG_EVERY_N(WARNING, 100) << "bad request from qp " << wc.qp_num << ": " << s.message();
    if (c->bad_requests.fetch_add(1) + 1 > opt_.max_bad_requests) {
      clients_dropped_.fetch_add(1);
      c->disconnect_requested.store(true);
      return;
    }
    code = Code::kBadRequest;
    payload = s.message();
    op = static_cast<wire::Op>(0);
    wire::RequestHeader h{};
    if (wc.byte_len >= sizeof(h)) {
      std::memcpy(&h, msg, sizeof(h));
      req.request_id = h.request_id;
    }
  } else if (req.op == wire::Op::kPut) {
    rpc_put_.fetch_add(1);
    s = table_->Put(req.key, req.value);
  } else if (req.op == wire::Op::kDelete) {
    rpc_delete_.fetch_add(1);
    s = table_->Delete(req.key);
  } else if (req.op == wire::Op::kParams) {
    rpc_params_.fetch_add(1);
    ConnParams local, peer;
    s = ReadBackParams(c->qp, &local, &peer);
    local.remote_addr = reinterpret_cast<uint64_t>(region_.get());
    local.rkey = region_mr_->rkey;
    local.region_size = opt_.memory;
    uint8_t rec[kConnParamsSize];
    EncodeConnParams(local, rec);
    if (s.ok()) payload.assign(reinterpret_cast<const char*>(rec), sizeof rec);
  } else {
    rpc_stats_.fetch_add(1);
    payload = StatsText();
  }
  if (code == Code::kOk && !s.ok()) {
    code = s.code();
    payload = s.message();
    if (code != Code::kNotFound) put_errors_.fetch_add(1);
  }
  if (c->sends_in_flight.load() >= kSendSlotsPerConn) {
    // The client pipelines more requests than the protocol allows: drop it.
    replies_dropped_.fetch_add(1);
    c->disconnect_requested.store(true);
    return;
  }
  uint32_t slot = c->next_send++ % kSendSlotsPerConn;
  uint8_t* buf = send_buf_.data() + (size_t(c->index) * kSendSlotsPerConn + slot) * kSendSlotSize;
  size_t len = wire::EncodeReply(op, req.request_id, code, payload, buf, kSendSlotSize);
  ibv_sge sge{reinterpret_cast<uint64_t>(buf), uint32_t(len), send_mr_->lkey};
  ibv_send_wr wr{}, *bad = nullptr;
  wr.wr_id = reinterpret_cast<uint64_t>(c.get());
  wr.sg_list = &sge;
  wr.num_sge = 1;
  wr.opcode = IBV_WR_SEND;
  wr.send_flags = IBV_SEND_SIGNALED;
  c->sends_in_flight.fetch_add(1);
  int rc = ibv_post_send(c->qp, &wr, &bad);
  if (rc != 0) {
    c->sends_in_flight.fetch_sub(1);
    VLOG(1) << "ibv_post_send(reply) failed: " << std::strerror(rc);
  }
}

std::string Server::StatsText() {
  std::ostringstream o;
  const layout::Geometry& g = table_->geometry();
  uint64_t entries = table_->entries();
  o << "instance_id " << instance_id_ << "\n"
    << "connections_total " << connections_total_.load() << "\n"
    << "connections_active " << connections_active_.load() << "\n"
    << "connections_rejected " << connections_rejected_.load() << "\n"
    << "rpc_put " << rpc_put_.load() << "\n"
    << "rpc_delete " << rpc_delete_.load() << "\n"
    << "rpc_stats " << rpc_stats_.load() << "\n"
    << "rpc_params " << rpc_params_.load() << "\n"
    << "rpc_bad_request " << rpc_bad_.load() << "\n"
    << "rpc_errors " << put_errors_.load() << "\n"
    << "clients_dropped " << clients_dropped_.load() << "\n"
    << "replies_dropped " << replies_dropped_.load() << "\n"
    << "entries " << entries << "\n"
    << "entry_capacity " << g.entry_capacity() << "\n"
    << "load_factor " << double(entries) / double(g.entry_capacity()) << "\n"
    << "overflow_entries " << table_->overflow_entries() << "\n"
    << "heap_bytes_in_use " << table_->heap_bytes_in_use() << "\n"
    << "heap_capacity " << table_->heap_capacity() << "\n"
    << "region_size " << g.region_size << "\n"
    << "num_buckets " << g.num_buckets << "\n"
    << "workers " << opt_.workers << "\n";
  return o.str();
}

}  // namespace rkv
