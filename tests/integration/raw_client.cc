// SPDX-License-Identifier: Apache-2.0
// raw_client: a deliberately misbehaving kvserver client, for the hostile-peer tests in
// tests/integration/hostile.sh. It is built on raw libibverbs/librdmacm (its own rdma_cm ids,
// PDs, CQs, MRs and QPs) and the wire encoders of common/wire.h, so it can do what the real
// client never does: vanish with requests in flight, pipeline past the announced credits, leave
// connects half-open, stall the manual-mode exchange. Only `hold` uses the real rkv::Client.
//
//   raw_client MODE --server=ADDR:PORT [options]
//   vanish      --rounds=N --puts=K --value_size=B [--parallel=P]
//   flood       --seconds=S --value_size=B --depth=D
//   halfopen    --count=N --hold=SECS
//   tcp-half | tcp-noready | tcp-hold   --hold=SECS
//   (SIGUSR1 ends a --hold early)
//   hold        --seconds=S [--get_every_ms=M] [--exchange=cm|tcp]
//   credits     [--over_by=N]
//
// Every mode prints one line `raw_client MODE: key=value ...` on stdout. Exit status: 0 the mode
// ran as intended (the server's reaction is reported, not judged), 1 it could not do its job
// (e.g. never connected; vanish: a round that did not connect, post and vanish; credits: no
// connection or no credits announced), 2 bad usage. Every wait has a deadline (--timeout_ms for
// connects, exchanges and replies). Failed calls are reported on stderr with the call and errno
// text.
#include <arpa/inet.h>
#include <gflags/gflags.h>
#include <glog/logging.h>
#include <infiniband/verbs.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <rdma/rdma_cma.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <csignal>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <iomanip>
#include <iostream>
#include <map>
#include <memory>
#include <mutex>
#include <random>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "client/refusal.h"
#include "common/auth.h"
#include "common/exchange/exchange.h"
#include "common/exchange/tcp_exchange.h"
#include "common/parse.h"
#include "common/secure_random.h"
#include "common/verbs/conn_params.h"
#include "common/verbs/qp_setup.h"
#include "common/verbs/rdma.h"
#include "common/wire.h"
#include "rkv/client.h"

DEFINE_string(server, "", "kvserver address ADDR:PORT");
DEFINE_int32(rounds, 100, "vanish: connect/post/vanish rounds per stream");
DEFINE_int32(puts, 8, "vanish: PUT requests posted per round (plus one PARAMS)");
DEFINE_int32(value_size, -1,
             "vanish, flood: value bytes per PUT, 0..65536 (-1: 4096 for "
             "vanish, 65536 for flood)");
DEFINE_int32(parallel, 1, "vanish: streams running in parallel, each doing --rounds rounds");
DEFINE_int32(seconds, 10, "flood, hold: how long to run");
DEFINE_int32(depth, 16, "flood: PUT sends outstanding at once");
DEFINE_int32(count, 8, "halfopen: connect requests left half-open");
DEFINE_int32(hold, 10, "halfopen, tcp-half, tcp-noready, tcp-hold: seconds to hold");
DEFINE_int32(get_every_ms, 0, "hold: milliseconds between GETs (0: no traffic at all)");
DEFINE_string(exchange, "cm", "hold: how the real client connects: cm (rdma_cm) or tcp");
DEFINE_int32(over_by, 1, "credits: how many requests beyond the credits the second batch sends");
DEFINE_int32(drop_wait_ms, 20000,
             "credits: how long after the over batch the server's disconnect is waited for "
             "(it comes once the server's QP has drained; its drain deadline is 10 s)");
DEFINE_int32(timeout_ms, 5000, "deadline of each connect, exchange step and reply wait");
DEFINE_string(auth_token_file, "", "the server's token (kvserver --auth_token_file); empty: none");
DEFINE_bool(open, true,
            "send OPEN after connecting, as every real client must (false: stay unopened, to "
            "test the server's refusal)");

namespace {

using Clock = std::chrono::steady_clock;
using rkv::Status;

constexpr size_t kRecvSlot = 4096;  // one reply (header + at most 4072 bytes of payload)
constexpr int kMaxVanishPuts = 1024;
constexpr uint32_t kMaxCredits = 1024;
constexpr int kMaxOverBy = 64;
// wr_id: kind in the top byte, slot index below.
constexpr uint64_t kSendWr = 1ull << 56;
constexpr uint64_t kRecvWr = 2ull << 56;
constexpr uint64_t kSlotMask = (1ull << 56) - 1;

double SecondsSince(Clock::time_point t0) {
  return std::chrono::duration<double>(Clock::now() - t0).count();
}
int MillisLeft(Clock::time_point deadline) {
  auto ms = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now()).count();
  return ms < 0 ? 0 : int(ms);
}
std::string Fixed(double v, int digits = 1) {
  std::ostringstream o;
  o << std::fixed << std::setprecision(digits) << v;
  return o.str();
}

void Warn(const std::string& msg) { std::cerr << "raw_client: " << msg << std::endl; }
void WarnErrno(const std::string& call, int err) { Warn(call + " failed: " + std::strerror(err)); }

// The one summary line: `raw_client MODE: key=value ...`; values with blanks are quoted.
class Summary {
 public:
  explicit Summary(std::string mode) : mode_(std::move(mode)) {}
  template <typename T>
  Summary& Add(const std::string& key, const T& value) {
    std::ostringstream o;
    o << value;
    std::string v = o.str();
    bool quote = v.empty() || v.find_first_of(" \t\"=") != std::string::npos;
    if (quote) {
      std::string q = "\"";
      for (char c : v) {
        if (c == '"' || c == '\\') q += '\\';
        q += (c == '\n' || c == '\t') ? ' ' : c;
      }
      v = q + "\"";
    }
    text_ += " " + key + "=" + v;
    return *this;
  }
  void Print() const { std::cout << "raw_client " << mode_ << ":" << text_ << std::endl; }

 private:
  std::string mode_;
  std::string text_;
};

// A page-aligned, zeroed buffer for registration.
struct Buffer {
  explicit Buffer(size_t len) : size(len) {
    void* p = nullptr;
    if (posix_memalign(&p, 4096, len) == 0) {
      std::memset(p, 0, len);
      data = static_cast<uint8_t*>(p);
    }
  }
  ~Buffer() { free(data); }
  Buffer(const Buffer&) = delete;
  Buffer& operator=(const Buffer&) = delete;
  uint8_t* data = nullptr;
  size_t size;
};

// Reject text sent by the server as private data of an rdma_reject, or the status if none.
std::string RejectReason(const rdma_cm_event* ev) {
  std::string text;
  if (ev->param.conn.private_data != nullptr && ev->param.conn.private_data_len > 0) {
    const char* p = static_cast<const char*>(ev->param.conn.private_data);
    text.assign(p, strnlen(p, ev->param.conn.private_data_len));
    for (char& c : text)
      if (c < 0x20 || c > 0x7e) c = '?';
  }
  if (text.empty()) return "no reason text (reject status " + std::to_string(ev->status) + ")";
  return text;
}

// One raw rdma_cm connection: event channel, id, PD, CQ, MR and QP, each released explicitly
// (Release, also from the destructor) in the order QP, id, MR, CQ, PD, channel.
class CmConn {
 public:
  CmConn() = default;
  CmConn(const CmConn&) = delete;
  CmConn& operator=(const CmConn&) = delete;
  ~CmConn() { Release(); }

  // Event channel, id, address and route resolution (each step within timeout_ms).
  Status Resolve(const std::string& host, uint16_t port, int timeout_ms) {
    channel_ = rdma_create_event_channel();
    if (channel_ == nullptr) return rkv::ErrnoStatus("rdma_create_event_channel", errno);
    if (rdma_create_id(channel_, &id_, nullptr, RDMA_PS_TCP) != 0) {
      id_ = nullptr;
      return rkv::ErrnoStatus("rdma_create_id", errno);
    }
    Status s = rkv::ResolveRoute(channel_, id_, host, port, timeout_ms, 0);
    if (!s.ok()) return s;
    uint8_t ack_timeout = 14;  // as the real client: 4.096 us * 2^14
    if (rdma_set_option(id_, RDMA_OPTION_ID, RDMA_OPTION_ID_ACK_TIMEOUT, &ack_timeout,
                        sizeof ack_timeout) != 0)
      return rkv::ErrnoStatus("rdma_set_option(ACK_TIMEOUT)", errno);
    return Status::Ok();
  }

  // PD, CQ, MR over buf (none if buf is null) and an RC QP with every send signaled.
  Status CreateResources(void* buf, size_t len, int send_wr, int recv_wr) {
    pd_ = ibv_alloc_pd(id_->verbs);
    if (pd_ == nullptr) return rkv::ErrnoStatus("ibv_alloc_pd", errno);
    cq_ = ibv_create_cq(id_->verbs, send_wr + recv_wr + 16, nullptr, nullptr, 0);
    if (cq_ == nullptr) return rkv::ErrnoStatus("ibv_create_cq", errno);
    if (buf != nullptr) {
      mr_ = ibv_reg_mr(pd_, buf, len, IBV_ACCESS_LOCAL_WRITE);
      if (mr_ == nullptr) return rkv::ErrnoStatus("ibv_reg_mr", errno);
    }
    open_mr_ = ibv_reg_mr(pd_, open_buf_, sizeof open_buf_, IBV_ACCESS_LOCAL_WRITE);
    if (open_mr_ == nullptr) return rkv::ErrnoStatus("ibv_reg_mr(OPEN buffer)", errno);
    ibv_qp_init_attr qa{};
    qa.send_cq = cq_;
    qa.recv_cq = cq_;
    qa.qp_type = IBV_QPT_RC;
    qa.cap.max_send_wr = uint32_t(std::max(send_wr, 1));
    qa.cap.max_recv_wr = uint32_t(std::max(recv_wr, 1));
    qa.cap.max_send_sge = 1;
    qa.cap.max_recv_sge = 1;
    qa.sq_sig_all = 1;
    if (rdma_create_qp(id_, pd_, &qa) != 0) return rkv::ErrnoStatus("rdma_create_qp", errno);
    return Status::Ok();
  }

  // rdma_connect with a real ClientHello as private data; does not wait.
  Status PostConnect() {
    wire_hello_ = {rkv::wire::kHelloMagic, rkv::wire::kProtocolVersion, 0,
                   (uint64_t{std::random_device{}()} << 32) | std::random_device{}()};
    rdma_conn_param cp{};
    cp.private_data = &wire_hello_;
    cp.private_data_len = sizeof wire_hello_;
    cp.initiator_depth = 1;
    cp.responder_resources = 0;
    cp.retry_count = 7;
    cp.rnr_retry_count = 7;
    if (rdma_connect(id_, &cp) != 0) return rkv::ErrnoStatus("rdma_connect", errno);
    return Status::Ok();
  }

  // Waits for ESTABLISHED and reads the ServerHello. On REJECTED: kConnectionLost and *reject
  // holds the server's reason. The hello is checked for magic only (a credits field of 0 is
  // reported, not refused: this tool must talk to servers that do not announce credits yet).
  Status WaitEstablished(int timeout_ms, std::string* reject) {
    auto deadline = Clock::now() + std::chrono::milliseconds(timeout_ms);
    rdma_cm_event* ev = nullptr;
    Status s = NextEvent(deadline, &ev);
    if (!s.ok()) return s;
    rdma_cm_event_type type = ev->event;
    if (type == RDMA_CM_EVENT_ESTABLISHED) {
      hello_len_ = ev->param.conn.private_data_len;
      hello_ = {};
      if (ev->param.conn.private_data != nullptr)
        std::memcpy(&hello_, ev->param.conn.private_data,
                    std::min<size_t>(hello_len_, sizeof hello_));
      server_qpn_ = ev->param.conn.qp_num;
      hello_raw_.assign(static_cast<const uint8_t*>(ev->param.conn.private_data),
                        static_cast<const uint8_t*>(ev->param.conn.private_data) +
                            (ev->param.conn.private_data != nullptr ? hello_len_ : 0));
      rdma_ack_cm_event(ev);
      if (hello_len_ < 16 || hello_.magic != rkv::wire::kHelloMagic)
        return Status(rkv::Code::kProtocolError, "accept private data is not a ServerHello (" +
                                                     std::to_string(hello_len_) + " bytes)");
      if (hello_len_ < sizeof(rkv::wire::ServerHello)) hello_.credits = 0;
      return Status::Ok();
    }
    if (type == RDMA_CM_EVENT_REJECTED && reject != nullptr) *reject = RejectReason(ev);
    std::string what = std::string("connect ended with ") + rdma_event_str(type) + " (status " +
                       std::to_string(ev->status) + ")";
    rdma_ack_cm_event(ev);
    return Status(rkv::Code::kConnectionLost, what);
  }

  // Connects and, with --open (the default), opens (OPEN with --auth_token_file's mac).
  Status Connect(int timeout_ms, std::string* reject) {
    Status s = PostConnect();
    if (s.ok()) s = WaitEstablished(timeout_ms, reject);
    if (s.ok() && FLAGS_open) s = Open(timeout_ms, Token(), nullptr);
    return s;
  }

  // The token of --auth_token_file ("" without one; exits on an unreadable file).
  static const std::string& Token() {
    static const std::string token = [] {
      std::string t;
      if (FLAGS_auth_token_file.empty()) return t;
      Status s = rkv::auth::LoadTokenFile(FLAGS_auth_token_file, &t);
      if (!s.ok()) {
        std::cerr << "raw_client: " << s.ToString() << "\n";
        std::exit(2);
      }
      return t;
    }();
    return token;
  }

  // Sends OPEN with the mac under `token` (none if empty) and waits for its reply. OK only if
  // the server granted it; else the server's code and message. `request` (optional) overrides
  // the OPEN value (replays, tampering); the granted memory parameters go to granted().
  Status Open(int timeout_ms, const std::string& token, const rkv::wire::OpenRequest* request) {
    rkv::wire::OpenRequest req{};
    if (request != nullptr) {
      req = *request;
    } else {
      Status s = rkv::SecureRandom::Fill(req.client_nonce, sizeof req.client_nonce);
      if (!s.ok()) return s;
      if (!token.empty()) {
        s = rkv::auth::ComputeMac(token, rkv::auth::Prover::kClient, Transcript(req), req.mac);
        if (!s.ok()) return s;
      }
    }
    last_open_ = req;
    size_t len = rkv::wire::EncodeRequest(
        rkv::wire::Op::kOpen, 1, {}, std::string_view(reinterpret_cast<char*>(&req), sizeof req),
        open_buf_, 4096);
    return Call(open_buf_, len, timeout_ms, [&](const rkv::wire::Reply& r) {
      if (r.status != rkv::Code::kOk) return Status(r.status, std::string(r.payload));
      if (!token.empty() && !rkv::auth::VerifyOpenProof(token, Transcript(req), r.payload))
        return Status(rkv::Code::kUnauthenticated, "the server did not prove the token");
      return rkv::wire::DecodeOpenReply(r.payload, &granted_);
    });
  }

  // Sends one raw request (len bytes at req, inside the OPEN buffer's first 4 KiB) and waits
  // for its reply; `check` judges it.
  template <typename Check>
  Status Call(const uint8_t* req, size_t len, int timeout_ms, Check check) {
    ibv_sge rsge{reinterpret_cast<uint64_t>(open_buf_ + 4096), 4096, open_mr_->lkey};
    ibv_recv_wr rwr{}, *rbad = nullptr;
    rwr.wr_id = kRecvWr | kSlotMask;
    rwr.sg_list = &rsge;
    rwr.num_sge = 1;
    if (int rc = ibv_post_recv(qp(), &rwr, &rbad); rc != 0)
      return rkv::ErrnoStatus("ibv_post_recv(OPEN reply)", rc);
    ibv_sge ssge{reinterpret_cast<uint64_t>(req), uint32_t(len), open_mr_->lkey};
    ibv_send_wr swr{}, *sbad = nullptr;
    swr.wr_id = kSendWr | kSlotMask;
    swr.sg_list = &ssge;
    swr.num_sge = 1;
    swr.opcode = IBV_WR_SEND;
    if (int rc = ibv_post_send(qp(), &swr, &sbad); rc != 0)
      return rkv::ErrnoStatus("ibv_post_send(OPEN)", rc);
    auto deadline = Clock::now() + std::chrono::milliseconds(timeout_ms);
    bool sent = false, received = false;
    uint32_t got = 0;
    while (!(sent && received)) {
      if (Clock::now() > deadline) return Status(rkv::Code::kTimeout, "no reply to the request");
      ibv_wc wc;
      int n = ibv_poll_cq(cq_, 1, &wc);
      if (n < 0) return Status(rkv::Code::kIoError, "ibv_poll_cq failed");
      if (n == 0) {
        std::this_thread::sleep_for(std::chrono::microseconds(50));
        continue;
      }
      if (wc.status != IBV_WC_SUCCESS)
        return Status(rkv::Code::kConnectionLost,
                      std::string("request completion: ") + ibv_wc_status_str(wc.status));
      if ((wc.wr_id & ~kSlotMask) == kSendWr) sent = true;
      if ((wc.wr_id & ~kSlotMask) == kRecvWr) {
        received = true;
        got = wc.byte_len;
      }
    }
    rkv::wire::Reply r;
    Status s = rkv::wire::DecodeReply(open_buf_ + 4096, std::min<uint32_t>(got, 4096), &r);
    return s.ok() ? check(r) : s;
  }

  // What a mac of this connection covers (the server's nonce and both QP numbers).
  rkv::auth::Transcript Transcript(const rkv::wire::OpenRequest& req) const {
    rkv::auth::Transcript t{};
    std::memcpy(t.server_nonce, hello_.server_nonce, sizeof t.server_nonce);
    std::memcpy(t.client_nonce, req.client_nonce, sizeof t.client_nonce);
    t.server_qpn = server_qpn_;
    t.client_qpn = qp() != nullptr ? qp()->qp_num : 0;
    return t;
  }
  const rkv::wire::OpenReply& granted() const { return granted_; }
  const rkv::wire::OpenRequest& last_open() const { return last_open_; }
  size_t hello_len() const { return hello_len_; }
  const std::vector<uint8_t>& hello_raw() const { return hello_raw_; }
  ibv_pd* pd() const { return pd_; }
  uint8_t* scratch() { return open_buf_; }
  uint32_t scratch_lkey() const { return open_mr_->lkey; }

  // The name of the next rdma_cm event if one is already queued, else "" (never blocks).
  std::string PollEvent() {
    if (channel_ == nullptr) return "";
    pollfd p{channel_->fd, POLLIN, 0};
    if (poll(&p, 1, 0) <= 0) return "";
    rdma_cm_event* ev = nullptr;
    if (rdma_get_cm_event(channel_, &ev) != 0) {
      WarnErrno("rdma_get_cm_event", errno);
      return "";
    }
    std::string name = rdma_event_str(ev->event);
    rdma_ack_cm_event(ev);
    return name;
  }

  void Disconnect() {
    if (id_ != nullptr && rdma_disconnect(id_) != 0) WarnErrno("rdma_disconnect", errno);
  }

  // What a vanishing process leaves behind: QP and id destroyed, no DREQ sent by us first
  // (the kernel sends one when it destroys a connected id).
  void DestroyQpAndId() {
    if (id_ == nullptr) return;
    if (id_->qp != nullptr) rdma_destroy_qp(id_);
    if (rdma_destroy_id(id_) != 0) WarnErrno("rdma_destroy_id", errno);
    id_ = nullptr;
  }

  void Release() {
    DestroyQpAndId();
    if (open_mr_ != nullptr) {
      if (int rc = ibv_dereg_mr(open_mr_); rc != 0) WarnErrno("ibv_dereg_mr", rc);
      open_mr_ = nullptr;
    }
    if (mr_ != nullptr) {
      if (int rc = ibv_dereg_mr(mr_); rc != 0) WarnErrno("ibv_dereg_mr", rc);
      mr_ = nullptr;
    }
    if (cq_ != nullptr) {
      if (int rc = ibv_destroy_cq(cq_); rc != 0) WarnErrno("ibv_destroy_cq", rc);
      cq_ = nullptr;
    }
    if (pd_ != nullptr) {
      if (int rc = ibv_dealloc_pd(pd_); rc != 0) WarnErrno("ibv_dealloc_pd", rc);
      pd_ = nullptr;
    }
    if (channel_ != nullptr) {
      rdma_destroy_event_channel(channel_);
      channel_ = nullptr;
    }
  }

  ibv_qp* qp() const { return id_ != nullptr ? id_->qp : nullptr; }
  ibv_cq* cq() const { return cq_; }
  uint32_t lkey() const { return mr_ != nullptr ? mr_->lkey : 0; }
  const rkv::wire::ServerHello& hello() const { return hello_; }

 private:
  Status NextEvent(Clock::time_point deadline, rdma_cm_event** ev) {
    pollfd p{channel_->fd, POLLIN, 0};
    int r;
    do {
      r = poll(&p, 1, MillisLeft(deadline));
    } while (r < 0 && errno == EINTR);
    if (r < 0) return rkv::ErrnoStatus("poll(rdma_cm channel)", errno);
    if (r == 0) return Status(rkv::Code::kTimeout, "no rdma_cm event before the deadline");
    if (rdma_get_cm_event(channel_, ev) != 0) return rkv::ErrnoStatus("rdma_get_cm_event", errno);
    return Status::Ok();
  }

  rdma_event_channel* channel_ = nullptr;
  rdma_cm_id* id_ = nullptr;
  ibv_pd* pd_ = nullptr;
  ibv_cq* cq_ = nullptr;
  ibv_mr* mr_ = nullptr;
  ibv_mr* open_mr_ = nullptr;
  // Request at 0, reply at 4096; 8192.. for bigger raw requests (auth big-before-open).
  alignas(64) uint8_t open_buf_[16384] = {};
  uint32_t server_qpn_ = 0;
  rkv::wire::OpenRequest last_open_{};
  rkv::wire::OpenReply granted_{};
  rkv::wire::ClientHello wire_hello_{};
  rkv::wire::ServerHello hello_{};
  size_t hello_len_ = 0;
  std::vector<uint8_t> hello_raw_;  // the whole accept private data
};

// Posts one SEND per (offset, length) of the registered buffer as one chain.
Status PostSends(CmConn& c, uint8_t* base, const std::vector<std::pair<size_t, size_t>>& msgs,
                 uint64_t first_slot) {
  if (msgs.empty()) return Status::Ok();
  std::vector<ibv_sge> sge(msgs.size());
  std::vector<ibv_send_wr> wr(msgs.size());
  for (size_t i = 0; i < msgs.size(); ++i) {
    sge[i] = {reinterpret_cast<uint64_t>(base + msgs[i].first), uint32_t(msgs[i].second), c.lkey()};
    wr[i] = {};
    wr[i].wr_id = kSendWr | (first_slot + i);
    wr[i].sg_list = &sge[i];
    wr[i].num_sge = 1;
    wr[i].opcode = IBV_WR_SEND;
    wr[i].next = i + 1 < msgs.size() ? &wr[i + 1] : nullptr;
  }
  ibv_send_wr* bad = nullptr;
  int rc = ibv_post_send(c.qp(), wr.data(), &bad);
  if (rc != 0) return rkv::ErrnoStatus("ibv_post_send(SEND)", rc);
  return Status::Ok();
}

// Posts `n` receives of kRecvSlot bytes at base + (first_slot + i) * kRecvSlot.
Status PostRecvs(CmConn& c, uint8_t* base, int n, uint64_t first_slot) {
  if (n <= 0) return Status::Ok();
  std::vector<ibv_sge> sge(static_cast<size_t>(n));
  std::vector<ibv_recv_wr> wr(static_cast<size_t>(n));
  for (int i = 0; i < n; ++i) {
    sge[i] = {reinterpret_cast<uint64_t>(base + (first_slot + uint64_t(i)) * kRecvSlot),
              uint32_t(kRecvSlot), c.lkey()};
    wr[i] = {};
    wr[i].wr_id = kRecvWr | (first_slot + uint64_t(i));
    wr[i].sg_list = &sge[i];
    wr[i].num_sge = 1;
    wr[i].next = i + 1 < n ? &wr[size_t(i) + 1] : nullptr;
  }
  ibv_recv_wr* bad = nullptr;
  int rc = ibv_post_recv(c.qp(), wr.data(), &bad);
  if (rc != 0) return rkv::ErrnoStatus("ibv_post_recv", rc);
  return Status::Ok();
}

// Polls the CQ once; sleeps a little when it is empty (the sandbox has few CPUs to spare).
int PollCq(ibv_cq* cq, ibv_wc* wc, int n) {
  int got = ibv_poll_cq(cq, n, wc);
  if (got < 0) {
    Warn("ibv_poll_cq failed");
    return got;
  }
  if (got == 0) std::this_thread::sleep_for(std::chrono::microseconds(50));
  return got;
}

std::string WcName(const ibv_wc& wc) {
  return std::string((wc.wr_id & ~kSlotMask) == kSendWr ? "SEND " : "RECV ") +
         ibv_wc_status_str(wc.status);
}

// Decodes a reply received in a kRecvSlot slot of wc.byte_len bytes.
Status DecodeReplyAt(const uint8_t* slot, uint32_t len, rkv::wire::Reply* out) {
  return rkv::wire::DecodeReply(slot, std::min<size_t>(len, kRecvSlot), out);
}

// ---------------------------------------------------------------------------------------------
// vanish

struct VanishStats {
  std::atomic<int> rounds_done{0}, connected{0}, refused{0}, connect_failed{0}, errors{0};
  std::atomic<int> refused_with_reason{0};  // rejects carrying the server's own text
  std::atomic<int> passing_refusals{0};     // retried (rkv::PassingRefusal), not counted above
  std::atomic<int> sends_acked{0}, send_errors{0}, stopped_streams{0};
  std::atomic<int> variant[3] = {{0}, {0}, {0}};
  std::mutex mu;
  std::map<std::string, int> reject_reasons;  // guarded by mu
  std::string first_error;                    // guarded by mu
  void Error(const std::string& e) {
    errors.fetch_add(1);
    std::lock_guard<std::mutex> l(mu);
    if (first_error.empty()) first_error = e;
  }
};

// Waits until `want` send completions arrived, or an error completion, or the deadline.
void WaitSendsAcked(CmConn& c, int want, int timeout_ms, VanishStats* st) {
  auto deadline = Clock::now() + std::chrono::milliseconds(timeout_ms);
  ibv_wc wc[32];
  int seen = 0;
  while (seen < want && Clock::now() < deadline) {
    int n = PollCq(c.cq(), wc, 32);
    if (n < 0) return;
    for (int i = 0; i < n; ++i) {
      if ((wc[i].wr_id & ~kSlotMask) != kSendWr) continue;
      ++seen;
      if (wc[i].status == IBV_WC_SUCCESS) {
        st->sends_acked.fetch_add(1);
      } else {
        st->send_errors.fetch_add(1);
        return;  // the QP is in error now: the rest flush
      }
    }
  }
}

void VanishStream(int stream, const std::string& host, uint16_t port, int rounds, int puts,
                  int value_size, VanishStats* st) {
  const size_t req_stride =
      (sizeof(rkv::wire::RequestHeader) + 64 + size_t(value_size) + 63) / 64 * 64;
  const size_t send_area = req_stride * size_t(puts + 1);
  const size_t recv_off = (send_area + kRecvSlot - 1) / kRecvSlot * kRecvSlot;
  Buffer buf(recv_off + size_t(puts + 1) * kRecvSlot);
  if (buf.data == nullptr) {
    st->Error("posix_memalign of the request buffer failed");
    return;
  }
  const std::string value(size_t(value_size), char('a' + stream % 26));
  int consecutive_failures = 0;
  for (int r = 0; r < rounds; ++r) {
    CmConn c;
    // Receives posted before vanishing: none, one, a few, or one per request.
    const int recv_choices[4] = {0, 1, 3, puts + 1};
    const int recvs = recv_choices[r % 4];
    // A passing refusal (the stream's earlier connections still closing, or in setup) is
    // retried 20 ms apart within --timeout_ms, as rkv::Client::Connect does, so that every
    // round vanishes with requests in flight however fast the server tears connections down.
    const auto retry_deadline = Clock::now() + std::chrono::milliseconds(FLAGS_timeout_ms);
    Status s;
    std::string reject;
    for (;;) {
      s = c.Resolve(host, port, FLAGS_timeout_ms);
      if (s.ok()) s = c.CreateResources(buf.data, buf.size, puts + 1, std::max(recvs, 1));
      reject.clear();
      if (s.ok()) s = c.Connect(FLAGS_timeout_ms, &reject);
      if (s.ok() || !rkv::PassingRefusal(reject) || Clock::now() >= retry_deadline) break;
      st->passing_refusals.fetch_add(1);
      c.Release();
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
    if (!s.ok()) {
      const bool no_text = reject.rfind("no reason text", 0) == 0;
      if (!reject.empty()) {
        st->refused.fetch_add(1);
        if (!no_text) st->refused_with_reason.fetch_add(1);
        std::lock_guard<std::mutex> l(st->mu);
        st->reject_reasons[reject]++;
      } else {
        st->connect_failed.fetch_add(1);
        st->Error("stream " + std::to_string(stream) + " round " + std::to_string(r) + ": " +
                  s.message());
      }
      // The server answers with its own reason while it lives; without one (no listener,
      // timeouts) the server is most likely gone: stop instead of waiting out every round.
      if (reject.empty() || no_text) {
        if (++consecutive_failures >= 10) {
          st->stopped_streams.fetch_add(1);
          return;
        }
      }
      continue;
    }
    consecutive_failures = 0;
    st->connected.fetch_add(1);
    // K PUTs with keys unique to this round, then one PARAMS.
    std::vector<std::pair<size_t, size_t>> msgs;
    for (int k = 0; k <= puts; ++k) {
      size_t off = size_t(k) * req_stride;
      size_t len;
      if (k < puts) {
        std::string key = "vanish-" + std::to_string(getpid()) + "-s" + std::to_string(stream) +
                          "-r" + std::to_string(r) + "-" + std::to_string(k);
        len = rkv::wire::EncodeRequest(rkv::wire::Op::kPut, uint64_t(k) + 1, key, value,
                                       buf.data + off, req_stride);
      } else {
        len = rkv::wire::EncodeRequest(rkv::wire::Op::kParams, uint64_t(k) + 1, {}, {},
                                       buf.data + off, req_stride);
      }
      msgs.emplace_back(off, len);
    }
    s = PostRecvs(c, buf.data + recv_off, recvs, 0);
    if (s.ok()) s = PostSends(c, buf.data, msgs, 0);
    if (!s.ok()) st->Error(s.message());
    // Disappear: (a) let the requests arrive, then disconnect and destroy everything; (b) let
    // them arrive, then destroy QP and id without disconnecting; (c) destroy QP and id at once,
    // with the sends possibly still on the wire (what a process exit does).
    const int variant = (r + stream) % 3;
    st->variant[variant].fetch_add(1);
    if (variant == 0) {
      WaitSendsAcked(c, puts + 1, FLAGS_timeout_ms, st);
      c.Disconnect();
    } else if (variant == 1) {
      WaitSendsAcked(c, puts + 1, FLAGS_timeout_ms, st);
      c.DestroyQpAndId();
    } else {
      c.DestroyQpAndId();
    }
    c.Release();
    st->rounds_done.fetch_add(1);
  }
}

int RunVanish(const std::string& host, uint16_t port) {
  const int value_size = FLAGS_value_size < 0 ? 4096 : FLAGS_value_size;
  auto t0 = Clock::now();
  VanishStats st;
  std::vector<std::thread> threads;
  for (int p = 0; p < FLAGS_parallel; ++p)
    threads.emplace_back(VanishStream, p, host, port, FLAGS_rounds, FLAGS_puts, value_size, &st);
  for (auto& t : threads) t.join();
  std::string reasons;
  for (const auto& [why, n] : st.reject_reasons)
    reasons += (reasons.empty() ? "" : "; ") + std::to_string(n) + "x " + why;
  Summary sum("vanish");
  sum.Add("rounds", FLAGS_rounds * FLAGS_parallel)
      .Add("parallel", FLAGS_parallel)
      .Add("puts", FLAGS_puts)
      .Add("value_size", value_size)
      .Add("done", st.rounds_done.load())
      .Add("connected", st.connected.load())
      .Add("refused", st.refused.load())
      .Add("passing_refusals_retried", st.passing_refusals.load());
  if (!reasons.empty()) sum.Add("reject_reason", reasons);
  sum.Add("connect_failed", st.connect_failed.load())
      .Add("errors", st.errors.load())
      .Add("sends_acked", st.sends_acked.load())
      .Add("send_errors", st.send_errors.load())
      .Add("vanished", "disconnect:" + std::to_string(st.variant[0].load()) +
                           ",destroy-after-ack:" + std::to_string(st.variant[1].load()) +
                           ",destroy-at-once:" + std::to_string(st.variant[2].load()))
      .Add("streams_stopped", st.stopped_streams.load());
  if (!st.first_error.empty()) sum.Add("first_error", st.first_error);
  sum.Add("elapsed_s", Fixed(SecondsSince(t0)));
  sum.Print();
  // The storm is the job: every round of every stream must have connected, posted its
  // requests and vanished. A round refused (for good) or failed is a storm not delivered.
  const int all = FLAGS_rounds * FLAGS_parallel;
  return st.connected.load() == all && st.rounds_done.load() == all && st.errors.load() == 0 ? 0
                                                                                             : 1;
}

// ---------------------------------------------------------------------------------------------
// flood

// Connects *c over rdma_cm with `sends`/`recvs` work requests on `buf`; on failure adds the
// error (and the server's reject reason) to *sum, prints it and returns false.
bool ConnectOrReport(CmConn* c, const std::string& host, uint16_t port, const Buffer& buf,
                     int sends, int recvs, Summary* sum) {
  std::string reject;
  Status s = c->Resolve(host, port, FLAGS_timeout_ms);
  if (s.ok()) s = c->CreateResources(buf.data, buf.size, sends, recvs);
  if (s.ok()) s = c->Connect(FLAGS_timeout_ms, &reject);
  if (s.ok()) return true;
  sum->Add("connected", 0).Add("error", s.message());
  if (!reject.empty()) sum->Add("reject_reason", reject);
  sum->Print();
  return false;
}

int RunFlood(const std::string& host, uint16_t port) {
  const int value_size = FLAGS_value_size < 0 ? 65536 : FLAGS_value_size;
  const int depth = FLAGS_depth;
  // Receives for every reply that can be pending: never more than `recvs` requests without a
  // reply, so the server's replies never meet an empty receive queue (RNR) on our side.
  const int recvs = std::max(8 * depth, 64);
  auto t0 = Clock::now();
  Summary sum("flood");
  const size_t req_stride =
      (sizeof(rkv::wire::RequestHeader) + 64 + size_t(value_size) + 63) / 64 * 64;
  const size_t recv_off = (req_stride * size_t(depth) + kRecvSlot - 1) / kRecvSlot * kRecvSlot;
  Buffer buf(recv_off + size_t(recvs) * kRecvSlot);
  if (buf.data == nullptr) {
    Warn("posix_memalign of the request buffer failed");
    return 1;
  }
  CmConn c;
  if (!ConnectOrReport(&c, host, port, buf, depth, recvs, &sum)) return 1;
  const std::string value(size_t(value_size), 'f');
  const std::string key_prefix = "flood-" + std::to_string(getpid()) + "-";
  uint64_t next_rid = 1;
  auto encode = [&](int slot) {
    std::string key = key_prefix + std::to_string(next_rid % 64);
    size_t len = rkv::wire::EncodeRequest(rkv::wire::Op::kPut, next_rid++, key, value,
                                          buf.data + size_t(slot) * req_stride, req_stride);
    return std::make_pair(size_t(slot) * req_stride, len);
  };
  uint64_t posted = 0, sent = 0, replies = 0, bad_replies = 0;
  std::map<std::string, uint64_t> by_status;
  Status s = PostRecvs(c, buf.data + recv_off, recvs, 0);
  std::vector<std::pair<size_t, size_t>> first;
  for (int i = 0; i < depth; ++i) first.push_back(encode(i));
  if (s.ok()) s = PostSends(c, buf.data, first, 0);
  if (s.ok()) posted += uint64_t(depth);
  std::string drop_reason, cm_event, error = s.ok() ? "" : s.message();
  bool dropped = false;
  uint64_t dropped_after = 0;
  double dropped_at = 0;
  auto end = t0 + std::chrono::seconds(FLAGS_seconds);
  Clock::time_point drop_deadline{};
  std::vector<int> idle;  // send slots whose SEND completed
  ibv_wc wc[32];
  while (error.empty()) {
    auto now = Clock::now();
    if (!dropped && now >= end) break;
    if (dropped && now >= drop_deadline) break;
    int n = PollCq(c.cq(), wc, 32);
    if (n < 0) {
      error = "ibv_poll_cq failed";
      break;
    }
    for (int i = 0; i < n; ++i) {
      const bool is_send = (wc[i].wr_id & ~kSlotMask) == kSendWr;
      const uint64_t slot = wc[i].wr_id & kSlotMask;
      if (wc[i].status != IBV_WC_SUCCESS) {
        if (!dropped) {
          dropped = true;
          dropped_after = sent;
          dropped_at = SecondsSince(t0);
          drop_deadline = Clock::now() + std::chrono::seconds(1);
        }
        if (drop_reason.empty()) drop_reason = WcName(wc[i]);
        continue;
      }
      if (is_send) {
        ++sent;
        idle.push_back(int(slot));
      } else {
        ++replies;
        rkv::wire::Reply rep;
        if (DecodeReplyAt(buf.data + recv_off + slot * kRecvSlot, wc[i].byte_len, &rep).ok())
          by_status[rkv::CodeName(rep.status)]++;
        else
          ++bad_replies;
        s = PostRecvs(c, buf.data + recv_off, 1, slot);
        if (!s.ok()) {
          error = s.message();
          break;
        }
      }
    }
    // Refill every free send slot, as long as each request still has a receive for its reply.
    while (error.empty() && !dropped && !idle.empty() && Clock::now() < end &&
           posted - replies < uint64_t(recvs)) {
      int slot = idle.back();
      idle.pop_back();
      s = PostSends(c, buf.data, {encode(slot)}, uint64_t(slot));
      if (s.ok())
        ++posted;
      else
        error = s.message();
    }
    std::string ev = c.PollEvent();
    if (!ev.empty()) {
      if (cm_event.empty()) cm_event = ev;
      if (!dropped) {
        dropped = true;
        dropped_after = sent;
        dropped_at = SecondsSince(t0);
        // Give the QP a moment to report the completion error that goes with it.
        drop_deadline = Clock::now() + std::chrono::seconds(3);
      }
    }
  }
  if (!dropped) c.Disconnect();
  std::string statuses;
  for (const auto& [name, cnt] : by_status)
    statuses += (statuses.empty() ? "" : ",") + name + ":" + std::to_string(cnt);
  sum.Add("credits", c.hello().credits)
      .Add("depth", depth)
      .Add("value_size", value_size)
      .Add("posted", posted)
      .Add("sent", sent)
      .Add("replies", replies)
      .Add("by_status", statuses.empty() ? "none" : statuses);
  if (bad_replies) sum.Add("undecodable_replies", bad_replies);
  if (dropped) {
    std::string why = drop_reason;
    if (!cm_event.empty()) why = cm_event + (why.empty() ? "" : ", then " + why);
    sum.Add("fate", "dropped after " + std::to_string(dropped_after) + " requests (" + why + ")")
        .Add("dropped_at_s", Fixed(dropped_at));
  } else {
    sum.Add("fate", "survived");
  }
  if (!error.empty()) sum.Add("error", error);
  sum.Add("elapsed_s", Fixed(SecondsSince(t0)));
  sum.Print();
  return error.empty() ? 0 : 1;
}

// ---------------------------------------------------------------------------------------------
// halfopen

// SIGUSR1 ends every --hold early (the test has seen what it waited for and need not wait
// the hold out). Set by the handler, read by the hold loops.
std::atomic<bool> g_hold_released{false};
static_assert(std::atomic<bool>::is_always_lock_free, "read from a signal handler");
void ReleaseHold(int) { g_hold_released.store(true); }
bool Holding(Clock::time_point until) { return Clock::now() < until && !g_hold_released.load(); }

int RunHalfOpen(const std::string& host, uint16_t port) {
  auto t0 = Clock::now();
  std::vector<std::unique_ptr<CmConn>> ids;
  int sent = 0, failed = 0;
  std::string first_error;
  for (int i = 0; i < FLAGS_count; ++i) {
    auto c = std::make_unique<CmConn>();
    Status s = c->Resolve(host, port, FLAGS_timeout_ms);
    if (s.ok()) s = c->CreateResources(nullptr, 0, 1, 1);
    // The connect request goes out; its event channel is never read again, so librdmacm
    // never moves the QP to RTS nor sends the RTU: the server never sees ESTABLISHED.
    if (s.ok()) s = c->PostConnect();
    if (s.ok()) {
      ++sent;
    } else {
      ++failed;
      if (first_error.empty()) first_error = s.message();
      Warn("halfopen connect " + std::to_string(i) + ": " + s.message());
    }
    ids.push_back(std::move(c));
  }
  double sent_at = SecondsSince(t0);
  auto until = Clock::now() + std::chrono::seconds(FLAGS_hold);
  while (Holding(until)) std::this_thread::sleep_for(std::chrono::milliseconds(100));
  ids.clear();  // every QP, id, CQ, PD and channel released
  Summary sum("halfopen");
  sum.Add("count", FLAGS_count)
      .Add("connects_sent", sent)
      .Add("failed", failed)
      .Add("sent_in_s", Fixed(sent_at, 2))
      .Add("held_s", Fixed(SecondsSince(t0) - sent_at));
  if (!first_error.empty()) sum.Add("first_error", first_error);
  sum.Add("elapsed_s", Fixed(SecondsSince(t0)));
  sum.Print();
  return sent > 0 ? 0 : 1;
}

// ---------------------------------------------------------------------------------------------
// tcp-half, tcp-noready, tcp-hold

// A TCP connection to host:port within timeout_ms; returns the fd or -1 (*err says why).
int TcpConnect(const std::string& host, uint16_t port, int timeout_ms, std::string* err) {
  addrinfo hints{}, *res = nullptr;
  hints.ai_family = AF_INET;
  hints.ai_socktype = SOCK_STREAM;
  int gai = getaddrinfo(host.c_str(), std::to_string(port).c_str(), &hints, &res);
  if (gai != 0) {
    *err = "getaddrinfo(" + host + ") failed: " + gai_strerror(gai);
    return -1;
  }
  int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
  if (fd < 0) {
    *err = std::string("socket failed: ") + std::strerror(errno);
    freeaddrinfo(res);
    return -1;
  }
  int rc = connect(fd, res->ai_addr, res->ai_addrlen);
  freeaddrinfo(res);
  if (rc != 0 && errno != EINPROGRESS) {
    *err = std::string("connect failed: ") + std::strerror(errno);
    close(fd);
    return -1;
  }
  if (rc != 0) {
    pollfd p{fd, POLLOUT, 0};
    int r = poll(&p, 1, timeout_ms);
    int soerr = 0;
    socklen_t len = sizeof soerr;
    if (r > 0) getsockopt(fd, SOL_SOCKET, SO_ERROR, &soerr, &len);
    if (r <= 0 || soerr != 0) {
      *err = r == 0 ? "connect: no answer within " + std::to_string(timeout_ms) + " ms"
                    : std::string("connect failed: ") + std::strerror(r < 0 ? errno : soerr);
      close(fd);
      return -1;
    }
  }
  int one = 1;
  setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
  return fd;
}

int RunTcpHalf(const std::string& host, uint16_t port) {
  auto t0 = Clock::now();
  Summary sum("tcp-half");
  std::string err;
  int fd = TcpConnect(host, port, FLAGS_timeout_ms, &err);
  if (fd < 0) {
    sum.Add("connected", 0).Add("error", err).Print();
    return 1;
  }
  // The first 8 bytes of a valid PARAMS header: magic, version, type. Length, code and flags
  // never follow.
  uint8_t half[8];
  uint32_t magic = rkv::kExchangeMagic;
  uint16_t version = rkv::kExchangeVersion, type = uint16_t(rkv::MsgType::kParams);
  std::memcpy(half, &magic, 4);
  std::memcpy(half + 4, &version, 2);
  std::memcpy(half + 6, &type, 2);
  ssize_t n = send(fd, half, sizeof half, MSG_NOSIGNAL);
  if (n != ssize_t(sizeof half)) {
    sum.Add("connected", 1)
        .Add("error",
             std::string("send failed: ") + (n < 0 ? std::strerror(errno) : "short write"));
    sum.Print();
    close(fd);
    return 1;
  }
  std::string received;
  std::string closed = "no";
  auto until = Clock::now() + std::chrono::seconds(FLAGS_hold);
  while (Holding(until)) {
    pollfd p{fd, POLLIN, 0};
    int r = poll(&p, 1, std::min(MillisLeft(until), 200));
    if (r < 0 && errno != EINTR) {
      WarnErrno("poll(tcp)", errno);
      break;
    }
    if (r <= 0) continue;
    char b[4096];
    ssize_t got = recv(fd, b, sizeof b, 0);
    if (got > 0) {
      received.append(b, size_t(got));
      continue;
    }
    if (got < 0 && (errno == EAGAIN || errno == EINTR)) continue;
    closed = (got == 0 ? "eof after " : std::string(std::strerror(errno)) + " after ") +
             Fixed(SecondsSince(t0)) + "s";
    break;
  }
  close(fd);
  sum.Add("sent", "8 of 16 header bytes").Add("received_bytes", received.size());
  rkv::ExchangeMsg m;
  if (!received.empty() &&
      rkv::DecodeExchangeMsg(reinterpret_cast<const uint8_t*>(received.data()), received.size(), &m)
          .ok()) {
    sum.Add("reply", m.type == rkv::MsgType::kError ? "ERROR" : std::to_string(int(m.type)));
    if (!m.text.empty()) sum.Add("reply_text", m.text);
  }
  sum.Add("server_closed", closed).Add("elapsed_s", Fixed(SecondsSince(t0)));
  sum.Print();
  return 0;
}

// tcp-noready (ready=false) and tcp-hold (ready=true): a manual-mode QP set up as
// client/connection.cc OpenManual does, the PARAMS exchange, then READY or not, then the hold.
// Like the real client, the QP grants remote write only so that the server's zero-length
// keepalive WRITEs are answered; no MR allows remote access.
constexpr int kKeepaliveAccess = IBV_ACCESS_REMOTE_WRITE;
int RunTcpManual(const std::string& mode, const std::string& host, uint16_t port, bool ready) {
  auto t0 = Clock::now();
  Summary sum(mode);
  // Destroyed in reverse: QP, CQ, PD, device, channel.
  std::unique_ptr<rkv::ExchangeChannel> ch;
  rkv::ContextPtr ctx;
  rkv::PdPtr pd;
  rkv::CqPtr cq;
  rkv::QpOwner qp;
  auto fail = [&](const std::string& step, const Status& s) {
    sum.Add("failed_at", step).Add("error", s.message());
    sum.Add("elapsed_s", Fixed(SecondsSince(t0))).Print();
    return 1;
  };
  Status s = rkv::TcpChannel::Connect(host, port, FLAGS_timeout_ms, &ch);
  if (!s.ok()) return fail("connect", s);
  rkv::QpSettings qs;
  qs.max_dest_rd_atomic = 0;  // a client serves no READs (kvctl's default)
  s = rkv::OpenDeviceFor(ch->LocalIpv4(), &qs, &ctx);
  if (!s.ok()) return fail("open-device", s);
  pd.reset(ibv_alloc_pd(ctx.get()));
  if (!pd) return fail("ibv_alloc_pd", rkv::ErrnoStatus("ibv_alloc_pd", errno));
  cq.reset(ibv_create_cq(ctx.get(), 16, nullptr, nullptr, 0));
  if (!cq) return fail("ibv_create_cq", rkv::ErrnoStatus("ibv_create_cq", errno));
  ibv_qp_init_attr qa{};
  qa.send_cq = cq.get();
  qa.recv_cq = cq.get();
  qa.qp_type = IBV_QPT_RC;
  qa.cap.max_send_wr = 4;
  qa.cap.max_recv_wr = 4;
  qa.cap.max_send_sge = 1;
  qa.cap.max_recv_sge = 1;
  qa.sq_sig_all = 1;
  ibv_qp* raw_qp = ibv_create_qp(pd.get(), &qa);
  if (raw_qp == nullptr) return fail("ibv_create_qp", rkv::ErrnoStatus("ibv_create_qp", errno));
  qp = rkv::QpOwner(raw_qp, cq.get());
  rkv::ConnParams self;
  s = rkv::FillLocalParams(ctx.get(), qs, &self);
  if (!s.ok()) return fail("fill-params", s);
  self.qp_num = raw_qp->qp_num;
  s = rkv::ModifyQpToInit(raw_qp, self, kKeepaliveAccess);
  if (!s.ok()) return fail("init", s);
  rkv::ExchangeMsg m;
  m.type = rkv::MsgType::kParams;
  m.params = self;
  s = ch->Send(m);
  if (!s.ok()) return fail("send-params", s);
  std::string sent = "PARAMS";
  rkv::ExchangeMsg reply;
  s = ch->Receive(&reply, FLAGS_timeout_ms);
  std::string got;
  if (!s.ok()) {
    got = (s.code() == rkv::Code::kTimeout ? "nothing (" : "no usable reply (") + s.message() + ")";
  } else if (reply.type == rkv::MsgType::kError) {
    got = "ERROR " + std::string(rkv::CodeName(reply.code)) + ": " + reply.text;
  } else if (reply.type == rkv::MsgType::kParams) {
    got = "PARAMS (server qp " + std::to_string(reply.params.qp_num) + ", credits " +
          std::to_string(reply.has_hello ? reply.hello.credits : 0) + ")";
    std::string note;
    Status cs = rkv::ConnectQp(raw_qp, self, reply.params, qs, kKeepaliveAccess, &note);
    if (!cs.ok()) {
      got += "; our QP did not reach RTS: " + cs.message();
    } else if (ready) {
      rkv::ExchangeMsg r;
      r.type = rkv::MsgType::kReady;
      s = ch->Send(r);
      sent += s.ok() ? ",READY" : ",READY failed (" + s.message() + ")";
    }
  } else {
    got = "message type " + std::to_string(int(reply.type));
  }
  const double handshake_s = SecondsSince(t0);
  std::string closed = "no";
  auto until = Clock::now() + std::chrono::seconds(FLAGS_hold);
  if (!ready) {
    // Watch (without consuming anything) for the server giving up on us.
    while (Holding(until)) {
      if (ch->PeerGone()) {
        closed = "after " + Fixed(SecondsSince(t0)) + "s";
        break;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
    }
  } else {
    // Neither read nor write during the hold; look once at the end.
    while (Holding(until)) std::this_thread::sleep_for(std::chrono::milliseconds(100));
    if (ch->PeerGone()) closed = "yes (seen at the end of the hold)";
  }
  ibv_qp_attr attr{};
  ibv_qp_init_attr init{};
  std::string qp_state = "?";
  if (int rc = ibv_query_qp(raw_qp, &attr, IBV_QP_STATE, &init); rc != 0) {
    WarnErrno("ibv_query_qp", rc);
  } else {
    static const char* kStates[] = {"RESET", "INIT", "RTR", "RTS", "SQD", "SQE", "ERR"};
    qp_state = attr.qp_state <= IBV_QPS_ERR ? kStates[attr.qp_state] : "UNKNOWN";
  }
  sum.Add("sent", sent)
      .Add("received", got)
      .Add("handshake_s", Fixed(handshake_s, 2))
      .Add("held_s", Fixed(SecondsSince(t0) - handshake_s))
      .Add("server_closed", closed)
      .Add("qp_state", qp_state)
      .Add("elapsed_s", Fixed(SecondsSince(t0)));
  sum.Print();
  return 0;
}

// ---------------------------------------------------------------------------------------------
// hold (the real client)

int RunHold() {
  auto t0 = Clock::now();
  Summary sum("hold");
  rkv::Options o;
  if (!rkv::ParseExchange(FLAGS_exchange, &o.exchange.method)) return 2;  // checked in main
  o.auth_token = CmConn::Token();
  std::unique_ptr<rkv::Client> client;
  Status s = rkv::Client::Connect(FLAGS_server, o, &client);
  if (!s.ok()) {
    sum.Add("connected", 0).Add("error", s.ToString()).Print();
    return 1;
  }
  const std::string key = "raw-client-hold-probe";
  std::string value;
  uint64_t gets = 0, failures = 0;
  std::string first_failure;
  auto until = t0 + std::chrono::seconds(FLAGS_seconds);
  auto next_get = Clock::now();
  while (Clock::now() < until) {
    if (FLAGS_get_every_ms > 0 && Clock::now() >= next_get) {
      s = client->Get(key, &value);
      ++gets;
      if (!s.ok() && !s.IsNotFound()) {
        ++failures;
        if (first_failure.empty())
          first_failure = "at " + Fixed(SecondsSince(t0)) + "s: " + s.ToString();
      }
      next_get += std::chrono::milliseconds(FLAGS_get_every_ms);
    }
    auto wake = std::min(until, FLAGS_get_every_ms > 0 ? next_get : until);
    std::this_thread::sleep_for(
        std::min<Clock::duration>(wake - Clock::now(), std::chrono::milliseconds(100)));
  }
  s = client->Get(key, &value);
  const bool alive = s.ok() || s.IsNotFound();
  sum.Add("exchange", rkv::ExchangeName(o.exchange.method))
      .Add("seconds", FLAGS_seconds)
      .Add("get_every_ms", FLAGS_get_every_ms)
      .Add("gets", gets)
      .Add("get_failures", failures);
  if (!first_failure.empty()) sum.Add("first_failure", first_failure);
  sum.Add("alive", alive ? 1 : 0).Add("last_status", rkv::CodeName(s.code()));
  if (!alive) sum.Add("last_error", s.message());
  sum.Add("elapsed_s", Fixed(SecondsSince(t0)));
  sum.Print();
  return 0;
}

// ---------------------------------------------------------------------------------------------
// credits

// Collects completions until `want_sends` sends and `want_recvs` replies completed, an error
// completion or rdma_cm event arrived, or the deadline passed. Replies' statuses go to *codes.
struct Batch {
  int sends = 0, recvs = 0;
  std::vector<rkv::Code> codes;
  std::string failure;  // first error completion; empty if none
  std::string event;    // first rdma_cm event (e.g. RDMA_CM_EVENT_DISCONNECTED); empty if none
  bool timed_out = false;
  bool clean() const { return failure.empty() && event.empty(); }
  void Merge(const Batch& b) {
    sends += b.sends;
    recvs += b.recvs;
    codes.insert(codes.end(), b.codes.begin(), b.codes.end());
    if (failure.empty()) failure = b.failure;
    if (event.empty()) event = b.event;
  }
};
Batch Collect(CmConn& c, uint8_t* recv_base, int want_sends, int want_recvs, int timeout_ms) {
  Batch b;
  auto deadline = Clock::now() + std::chrono::milliseconds(timeout_ms);
  ibv_wc wc[32];
  while (b.sends < want_sends || b.recvs < want_recvs) {
    if (Clock::now() >= deadline) {
      b.timed_out = true;
      break;
    }
    int n = PollCq(c.cq(), wc, 32);
    if (n < 0) {
      b.failure = "ibv_poll_cq failed";
      break;
    }
    for (int i = 0; i < n; ++i) {
      if (wc[i].status != IBV_WC_SUCCESS) {
        if (b.failure.empty()) b.failure = WcName(wc[i]);
        continue;
      }
      if ((wc[i].wr_id & ~kSlotMask) == kSendWr) {
        ++b.sends;
      } else {
        ++b.recvs;
        rkv::wire::Reply rep;
        Status s =
            DecodeReplyAt(recv_base + (wc[i].wr_id & kSlotMask) * kRecvSlot, wc[i].byte_len, &rep);
        b.codes.push_back(s.ok() ? rep.status : rkv::Code::kProtocolError);
      }
    }
    std::string ev = c.PollEvent();
    if (!ev.empty() && b.event.empty()) b.event = ev;
    if (!b.clean()) break;
  }
  return b;
}

// The server's disconnect: waits until `deadline` for rdma_cm events; true once DISCONNECTED is
// among *events (the ones already seen, and each one that arrives is appended).
bool AwaitDisconnect(CmConn& c, Clock::time_point deadline, std::vector<std::string>* events) {
  const std::string kDisconnected = rdma_event_str(RDMA_CM_EVENT_DISCONNECTED);
  for (;;) {
    if (std::find(events->begin(), events->end(), kDisconnected) != events->end()) return true;
    std::string ev = c.PollEvent();
    if (!ev.empty()) {
      events->push_back(ev);
      continue;
    }
    if (Clock::now() >= deadline) return false;
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
}

int RunCredits(const std::string& host, uint16_t port) {
  auto t0 = Clock::now();
  Summary sum("credits");
  constexpr size_t kReqStride = 128;
  const int slots = int(kMaxCredits) + kMaxOverBy + 1;  // + the probe
  const size_t recv_off = size_t(slots) * kReqStride;
  Buffer buf(recv_off + size_t(slots) * kRecvSlot);
  if (buf.data == nullptr) {
    Warn("posix_memalign of the request buffer failed");
    return 1;
  }
  CmConn c;
  if (!ConnectOrReport(&c, host, port, buf, slots, slots, &sum)) return 1;
  const uint32_t credits = c.hello().credits;
  sum.Add("credits", credits);
  if (credits == 0 || credits > kMaxCredits) {
    sum.Add("within", "n/a")
        .Add("over", "n/a")
        .Add("error", credits == 0 ? "the server announces no credits (ServerHello.credits 0)"
                                   : "more credits than this tool handles (" +
                                         std::to_string(kMaxCredits) + ")");
    sum.Print();
    c.Disconnect();
    return 1;
  }
  const std::string key_prefix = "credits-" + std::to_string(getpid()) + "-";
  uint64_t rid = 1;
  auto requests = [&](int n) {
    std::vector<std::pair<size_t, size_t>> msgs;
    for (int i = 0; i < n; ++i) {
      size_t off = size_t(i) * kReqStride;
      size_t len =
          rkv::wire::EncodeRequest(rkv::wire::Op::kPut, rid, key_prefix + std::to_string(i),
                                   "value-" + std::to_string(rid), buf.data + off, kReqStride);
      ++rid;
      msgs.emplace_back(off, len);
    }
    return msgs;
  };
  auto all_ok = [](const Batch& b) {
    return std::all_of(b.codes.begin(), b.codes.end(),
                       [](rkv::Code code) { return code == rkv::Code::kOk; });
  };
  // Within: exactly `credits` requests back to back, receives posted for every reply.
  const int n_in = int(credits);
  Status s = PostRecvs(c, buf.data + recv_off, n_in, 0);
  if (s.ok()) s = PostSends(c, buf.data, requests(n_in), 0);
  Batch in = s.ok() ? Collect(c, buf.data + recv_off, n_in, n_in, FLAGS_timeout_ms) : Batch{};
  std::string within_detail;
  bool within_ok = s.ok() && in.clean() && !in.timed_out && in.recvs == n_in && all_ok(in);
  if (!s.ok())
    within_detail = s.message();
  else if (!within_ok)
    within_detail =
        std::to_string(in.recvs) + "/" + std::to_string(n_in) + " replies" +
        (in.failure.empty() ? "" : ", " + in.failure) + (in.event.empty() ? "" : ", " + in.event) +
        (in.timed_out ? ", deadline passed" : "") + (all_ok(in) ? "" : ", a reply was not OK");
  sum.Add("within", within_ok ? "ok" : "failed");
  if (!within_detail.empty()) sum.Add("within_detail", within_detail);
  if (!within_ok) {
    sum.Add("over", "n/a").Add("elapsed_s", Fixed(SecondsSince(t0))).Print();
    return 0;
  }
  // Over: credits + over_by at once, with no receive posted for their replies: the server's
  // replies meet RNR (retried without end) and stay unacknowledged, so the server's count of
  // requests without a completed reply only grows, however fast either host is, and the
  // request past its slots must get the client dropped. (With receives posted, replies that
  // complete before the last requests arrive would keep the count down by chance.) Until an
  // error completion or an rdma_cm event: the sends, then the receives are posted and the
  // replies collected, then the second after, then one probe request. The verdict:
  //   dropped      the server disconnected: RDMA_CM_EVENT_DISCONNECTED arrived, at once or
  //                within --drop_wait_ms of the over batch (the server sends its DREQ once
  //                the QP has drained, which may come after an error completion of ours)
  //   not-dropped  every reply and the probe's came back, no error: the server kept serving
  //   error        an error completion or another rdma_cm event, but no DISCONNECTED: the
  //                connection broke without the server dropping it
  //   hung         nothing at all: replies or the probe unanswered, no error, no disconnect
  const int n_over = n_in + FLAGS_over_by;
  const auto drop_deadline = Clock::now() + std::chrono::milliseconds(FLAGS_drop_wait_ms);
  Batch over;
  s = PostSends(c, buf.data, requests(n_over), 0);
  if (s.ok()) over = Collect(c, buf.data + recv_off, n_over, 1 << 30, FLAGS_timeout_ms);
  if (s.ok() && over.clean()) s = PostRecvs(c, buf.data + recv_off, n_over, 0);
  if (!s.ok()) {
    sum.Add("over", "n/a").Add("error", s.message()).Print();
    return 1;
  }
  if (over.clean()) over.Merge(Collect(c, buf.data + recv_off, 0, n_over, FLAGS_timeout_ms));
  if (over.clean()) over.Merge(Collect(c, buf.data + recv_off, 1 << 30, 1 << 30, 1000));
  const int over_recvs = over.recvs;
  std::vector<rkv::Code> over_codes = over.codes;
  bool probe_answered = false;
  if (over.clean()) {
    s = PostRecvs(c, buf.data + recv_off, 1, 0);
    if (s.ok()) s = PostSends(c, buf.data, requests(1), 0);
    if (!s.ok()) {
      sum.Add("over", "n/a").Add("error", "probe: " + s.message()).Print();
      return 1;
    }
    Batch probe = Collect(c, buf.data + recv_off, 1, 1, FLAGS_timeout_ms);
    probe_answered = probe.clean() && probe.recvs == 1;
    over.Merge(probe);
  }
  const bool served = over.clean() && over_recvs == n_over && probe_answered;
  std::vector<std::string> events;
  if (!over.event.empty()) events.push_back(over.event);
  const bool disconnected = !served && AwaitDisconnect(c, drop_deadline, &events);
  std::string verdict = disconnected                               ? "dropped"
                        : served                                   ? "not-dropped"
                        : !over.failure.empty() || !events.empty() ? "error"
                                                                   : "hung";
  sum.Add("over", verdict)
      .Add("over_by", FLAGS_over_by)
      .Add("over_replies", std::to_string(over_recvs) + "/" + std::to_string(n_over));
  if (!std::all_of(over_codes.begin(), over_codes.end(),
                   [](rkv::Code code) { return code == rkv::Code::kOk; })) {
    std::map<std::string, int> counts;
    for (rkv::Code code : over_codes) counts[rkv::CodeName(code)]++;
    std::string text;
    for (const auto& [name, n] : counts)
      text += (text.empty() ? "" : ",") + name + ":" + std::to_string(n);
    sum.Add("over_statuses", text);
  }
  std::string events_text;
  for (const std::string& e : events) events_text += (events_text.empty() ? "" : ",") + e;
  if (!served) {
    sum.Add("over_completion_error", over.failure.empty() ? "none" : over.failure)
        .Add("over_cm_events", events_text.empty() ? "none" : events_text)
        .Add("probe", probe_answered ? "answered"
                      : over.clean() ? "unanswered"
                                     : "not sent");
  }
  if (!disconnected) c.Disconnect();
  sum.Add("elapsed_s", Fixed(SecondsSince(t0)));
  sum.Print();
  return 0;
}

}  // namespace

// ---------------------------------------------------------------------------------------------
// auth: the attacks of issue 12 on the handshake, each judged (exit 1 if the server let it
// through). --case:
//   anonymous   the accept data is a 32-byte ServerHello (no rkey, no address); a PUT before
//               OPEN gets UNAUTHENTICATED and the connection is dropped
//   wrong-token OPEN with a mac under --wrong_token is refused
//   no-mac      OPEN without a mac is refused
//   replay      a valid OPEN recorded on one connection, replayed on a second, is refused
//   open        a valid OPEN is granted; a READ of the region works, WRITE and atomic fail
//   connect-time  --count connects+OPENs, one at a time; prints the mean and median ms
//   big-before-open  a 6 KiB request before OPEN: refused (UNAUTHENTICATED, or in registration
//               mode a receive error: before OPEN a connection has one 4 KiB receive buffer) and
//               the connection dropped
//   cross-rkey  A and B open; B's READ with A's rkey fails while A is connected, and after A has
//               left (checked within a second of A's disconnect); B's own rkey works
//   scan        reads the whole granted region through the window, 64 KiB per READ, and looks for
//               the markers: each --scan_live one must be found, no --scan_dead one anywhere
//               (deleted and overwritten values are cleared). Heap blocks are stored XORed with
//               an 8-byte-periodic mask, so a marker is matched on x[i] ^ x[i + 8], which the
//               mask cancels (plain inline copies match too)
//   many        --count connections one after another: their rkeys and the server's PSNs show
//               no constant step (the most frequent difference between consecutive values is
//               under 10% of the pairs) and every granted region address is 0

DEFINE_string(auth_case, "", "auth: which attack (see the auth mode's comment)");
DEFINE_string(wrong_token, "a wrong token of enough bytes", "auth: the token wrong-token uses");
DEFINE_bool(big_refused, true,
            "auth big-before-open: expect UNAUTHENTICATED (else a remote error completion)");
DEFINE_string(scan_live, "", "auth scan: comma-separated markers that must be found");
DEFINE_string(scan_dead, "", "auth scan: comma-separated markers that must not be found");

namespace {
// Waits up to timeout_ms for the connection to end (DISCONNECTED) or its QP to fail.
bool WaitDropped(CmConn& c, int timeout_ms) {
  auto deadline = Clock::now() + std::chrono::milliseconds(timeout_ms);
  while (Clock::now() < deadline) {
    std::string ev = c.PollEvent();
    if (ev == "RDMA_CM_EVENT_DISCONNECTED") return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  return false;
}

// One RDMA operation on the server's region through this connection; the completion status.
Status RemoteOp(CmConn& c, ibv_wr_opcode op, uint64_t addr, uint32_t rkey, int timeout_ms) {
  uint8_t* local = c.scratch() + 2048;
  ibv_sge sge{reinterpret_cast<uint64_t>(local), op == IBV_WR_RDMA_READ ? 64u : 8u,
              c.scratch_lkey()};
  ibv_send_wr wr{}, *bad = nullptr;
  wr.wr_id = kSendWr | 7;
  wr.sg_list = &sge;
  wr.num_sge = 1;
  wr.opcode = op;
  wr.send_flags = IBV_SEND_SIGNALED;
  if (op == IBV_WR_ATOMIC_FETCH_AND_ADD) {
    wr.wr.atomic.remote_addr = addr;
    wr.wr.atomic.rkey = rkey;
    wr.wr.atomic.compare_add = 1;
  } else {
    wr.wr.rdma.remote_addr = addr;
    wr.wr.rdma.rkey = rkey;
  }
  if (int rc = ibv_post_send(c.qp(), &wr, &bad); rc != 0)
    return rkv::ErrnoStatus("ibv_post_send", rc);
  auto deadline = Clock::now() + std::chrono::milliseconds(timeout_ms);
  while (Clock::now() < deadline) {
    ibv_wc wc;
    int n = ibv_poll_cq(c.cq(), 1, &wc);
    if (n < 0) return Status(rkv::Code::kIoError, "ibv_poll_cq failed");
    if (n == 0) {
      std::this_thread::sleep_for(std::chrono::microseconds(100));
      continue;
    }
    if (wc.status != IBV_WC_SUCCESS)
      return Status(rkv::Code::kConnectionLost, ibv_wc_status_str(wc.status));
    return Status::Ok();
  }
  return Status(rkv::Code::kTimeout, "no completion");
}

// Refusals that ConnectOnly retried (rkv::PassingRefusal: the source's earlier connections
// still closing or still in setup), as rkv::Client::Connect retries them.
std::atomic<int> g_passing_refusals{0};

// Connects *c (without OPEN). A passing refusal is retried, 20 ms apart, within --timeout_ms:
// a loop of connect/disconnect faster than the server tears connections down meets one.
Status ConnectOnly(CmConn* c, const std::string& host, uint16_t port) {
  const auto deadline = Clock::now() + std::chrono::milliseconds(FLAGS_timeout_ms);
  for (;;) {
    Status s = c->Resolve(host, port, FLAGS_timeout_ms);
    if (s.ok()) s = c->CreateResources(nullptr, 0, 8, 4);
    if (s.ok()) s = c->PostConnect();
    std::string reject;
    if (s.ok()) s = c->WaitEstablished(FLAGS_timeout_ms, &reject);
    if (s.ok() || reject.empty()) return s;
    if (!rkv::PassingRefusal(reject) || Clock::now() >= deadline)
      return Status(s.code(), s.message() + " (" + reject + ")");
    g_passing_refusals.fetch_add(1);
    c->Release();
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
}

std::string Hex(const uint8_t* p, size_t n) {
  static const char* d = "0123456789abcdef";
  std::string out;
  for (size_t i = 0; i < n; ++i) {
    out += d[p[i] >> 4];
    out += d[p[i] & 15];
  }
  return out;
}

int RunAuth(const std::string& host, uint16_t port) {
  Summary sum("auth");
  const std::string& kase = FLAGS_auth_case;
  sum.Add("case", kase);
  auto fail = [&](const std::string& why) {
    sum.Add("verdict", "FAIL").Add("why", why).Print();
    return 1;
  };
  auto pass = [&]() {
    sum.Add("verdict", "pass").Print();
    return 0;
  };
  if (kase == "connect-time") {
    std::vector<double> ms;
    for (int i = 0; i < FLAGS_count; ++i) {
      auto t0 = Clock::now();
      CmConn c;
      Status s = ConnectOnly(&c, host, port);
      if (s.ok()) s = c.Open(FLAGS_timeout_ms, CmConn::Token(), nullptr);
      if (!s.ok()) return fail("connect " + std::to_string(i) + ": " + s.ToString());
      ms.push_back(std::chrono::duration<double, std::milli>(Clock::now() - t0).count());
      c.Disconnect();
      c.Release();
    }
    std::sort(ms.begin(), ms.end());
    double total = 0;
    for (double v : ms) total += v;
    sum.Add("count", ms.size())
        .Add("mean_ms", Fixed(total / double(ms.size())))
        .Add("median_ms", Fixed(ms[ms.size() / 2]))
        .Add("passing_refusals_retried", g_passing_refusals.load());
    return pass();
  }
  if (kase == "many") {
    std::vector<uint32_t> rkeys, psns;
    for (int i = 0; i < FLAGS_count; ++i) {
      CmConn m;
      Status s = ConnectOnly(&m, host, port);
      if (s.ok()) s = m.Open(FLAGS_timeout_ms, CmConn::Token(), nullptr);
      if (!s.ok()) return fail("connect " + std::to_string(i) + ": " + s.ToString());
      if (m.granted().region_addr != 0) return fail("a granted region address is not 0");
      ibv_qp_attr qa{};
      ibv_qp_init_attr qi{};
      if (ibv_query_qp(m.qp(), &qa, IBV_QP_RQ_PSN, &qi) != 0)
        return fail(rkv::ErrnoStatus("ibv_query_qp", errno).message());
      rkeys.push_back(m.granted().rkey);
      psns.push_back(qa.rq_psn);  // the server's send PSN
      m.Disconnect();
      m.Release();
    }
    auto worst_step = [](const std::vector<uint32_t>& v, uint32_t mask) {
      std::map<uint32_t, int> steps;
      int worst = 0;
      for (size_t i = 1; i < v.size(); ++i)
        worst = std::max(worst, ++steps[(v[i] - v[i - 1]) & mask]);
      return std::make_pair(worst, int(steps.size()));
    };
    auto [rk_worst, rk_distinct] = worst_step(rkeys, 0xffffffffu);
    auto [psn_worst, psn_distinct] = worst_step(psns, 0xffffffu);
    std::map<uint32_t, int> keybytes;
    for (uint32_t r : rkeys) keybytes[r & 0xff]++;
    const int pairs = int(rkeys.size()) - 1;
    sum.Add("count", rkeys.size())
        .Add("rkey_steps_distinct", rk_distinct)
        .Add("rkey_most_common_step", rk_worst)
        .Add("rkey_key_bytes_distinct", keybytes.size())
        .Add("psn_steps_distinct", psn_distinct)
        .Add("psn_most_common_step", psn_worst)
        .Add("passing_refusals_retried", g_passing_refusals.load());
    if (pairs >= 10 && rk_worst * 10 >= pairs) return fail("rkeys advance in a constant step");
    if (pairs >= 10 && psn_worst * 10 >= pairs) return fail("PSNs advance in a constant step");
    return pass();
  }
  if (kase == "scan") {
    CmConn c;
    Status s = ConnectOnly(&c, host, port);
    if (s.ok()) s = c.Open(FLAGS_timeout_ms, CmConn::Token(), nullptr);
    if (!s.ok()) return fail("connect: " + s.ToString());
    const rkv::wire::OpenReply& g = c.granted();
    if (g.region_size == 0 || g.region_size > (uint64_t{1} << 32))
      return fail("implausible region size " + std::to_string(g.region_size));
    std::vector<uint8_t> region(g.region_size);
    ibv_mr* mr = ibv_reg_mr(c.pd(), region.data(), region.size(), IBV_ACCESS_LOCAL_WRITE);
    if (mr == nullptr) return fail(rkv::ErrnoStatus("ibv_reg_mr", errno).message());
    constexpr uint64_t kChunk = 64 << 10;
    for (uint64_t off = 0; off < g.region_size && s.ok(); off += kChunk) {
      const uint32_t len = uint32_t(std::min(kChunk, g.region_size - off));
      ibv_sge sge{reinterpret_cast<uint64_t>(region.data() + off), len, mr->lkey};
      ibv_send_wr wr{}, *bad = nullptr;
      wr.wr_id = kSendWr | 9;
      wr.sg_list = &sge;
      wr.num_sge = 1;
      wr.opcode = IBV_WR_RDMA_READ;
      wr.send_flags = IBV_SEND_SIGNALED;
      wr.wr.rdma.remote_addr = g.region_addr + off;
      wr.wr.rdma.rkey = g.rkey;
      if (int rc = ibv_post_send(c.qp(), &wr, &bad); rc != 0) {
        s = rkv::ErrnoStatus("ibv_post_send(RDMA_READ)", rc);
        break;
      }
      auto deadline = Clock::now() + std::chrono::milliseconds(FLAGS_timeout_ms);
      for (;;) {
        ibv_wc wc;
        int n = ibv_poll_cq(c.cq(), 1, &wc);
        if (n > 0) {
          if (wc.status != IBV_WC_SUCCESS)
            s = Status(rkv::Code::kConnectionLost, ibv_wc_status_str(wc.status));
          break;
        }
        if (n < 0 || Clock::now() > deadline) {
          s = Status(rkv::Code::kTimeout, "READ at offset " + std::to_string(off));
          break;
        }
      }
    }
    ibv_dereg_mr(mr);
    if (!s.ok()) return fail("reading the region: " + s.ToString());
    // Copies of `m` (plain or masked): positions where x[i] ^ x[i + 8] equals m's.
    auto copies = [&region](const std::string& m) {
      if (m.size() < 16) return -1;
      const size_t sig = m.size() - 8;
      int found = 0;
      for (size_t p = 0; p + m.size() <= region.size(); ++p) {
        size_t i = 0;
        while (i < sig && uint8_t(region[p + i] ^ region[p + i + 8]) == uint8_t(m[i] ^ m[i + 8]))
          ++i;
        if (i == sig) ++found;
      }
      return found;
    };
    auto split = [](const std::string& list) {
      std::vector<std::string> v;
      for (size_t b = 0; b < list.size();) {
        size_t e = list.find(',', b);
        if (e == std::string::npos) e = list.size();
        if (e > b) v.push_back(list.substr(b, e - b));
        b = e + 1;
      }
      return v;
    };
    sum.Add("region_bytes", g.region_size);
    int live_missing = 0, dead_found = 0;
    for (const std::string& m : split(FLAGS_scan_live)) live_missing += copies(m) > 0 ? 0 : 1;
    for (const std::string& m : split(FLAGS_scan_dead)) dead_found += copies(m) > 0 ? 1 : 0;
    sum.Add("live_missing", live_missing).Add("dead_found", dead_found);
    if (split(FLAGS_scan_live).empty())
      return fail("no --scan_live marker: the scan proves nothing");
    if (live_missing > 0) return fail("a live marker was not found: the scan does not work");
    if (dead_found > 0) return fail("bytes of a deleted or overwritten value are still readable");
    return pass();
  }
  if (kase == "cross-rkey") {
    CmConn a, b;
    Status s = ConnectOnly(&a, host, port);
    if (s.ok()) s = a.Open(FLAGS_timeout_ms, CmConn::Token(), nullptr);
    if (s.ok()) s = ConnectOnly(&b, host, port);
    if (s.ok()) s = b.Open(FLAGS_timeout_ms, CmConn::Token(), nullptr);
    if (!s.ok()) return fail("connect A and B: " + s.ToString());
    const uint32_t a_rkey = a.granted().rkey;
    sum.Add("a_rkey", a_rkey).Add("b_rkey", b.granted().rkey);
    if (a_rkey == b.granted().rkey) return fail("A and B were given the same rkey");
    s = RemoteOp(a, IBV_WR_RDMA_READ, 0, a_rkey, FLAGS_timeout_ms);
    if (!s.ok()) return fail("A's READ with its own rkey: " + s.ToString());
    s = RemoteOp(b, IBV_WR_RDMA_READ, 0, a_rkey, FLAGS_timeout_ms);
    sum.Add("b_with_a_rkey_while_a_connected", s.ok() ? "OK" : s.message());
    if (s.ok()) return fail("B read with A's rkey while A was connected");
    // B's QP is in error now; C (opened before A leaves) tries after A's disconnect.
    CmConn c;
    s = ConnectOnly(&c, host, port);
    if (s.ok()) s = c.Open(FLAGS_timeout_ms, CmConn::Token(), nullptr);
    if (!s.ok()) return fail("connect C: " + s.ToString());
    s = RemoteOp(c, IBV_WR_RDMA_READ, 0, c.granted().rkey, FLAGS_timeout_ms);
    if (!s.ok()) return fail("C's READ with its own rkey: " + s.ToString());
    a.Disconnect();
    a.Release();
    auto left = Clock::now();
    std::this_thread::sleep_for(std::chrono::milliseconds(1000));
    s = RemoteOp(c, IBV_WR_RDMA_READ, 0, a_rkey, FLAGS_timeout_ms);
    sum.Add("c_with_a_rkey_1s_after_a_left", s.ok() ? "OK" : s.message())
        .Add("ms_after_a_left",
             Fixed(std::chrono::duration<double, std::milli>(Clock::now() - left).count()));
    if (s.ok()) return fail("A's rkey still worked after A left");
    return pass();
  }
  CmConn c;
  Status s = ConnectOnly(&c, host, port);
  if (!s.ok()) return fail("connect: " + s.ToString());
  sum.Add("hello_bytes", c.hello_len())
      .Add("auth_required", (c.hello().flags & rkv::wire::kHelloAuthRequired) ? 1 : 0);
  if (kase == "anonymous") {
    // rdma_cm pads the accept private data with zeros (to 196 bytes on RoCE): beyond the
    // 32-byte hello there must be nothing.
    const std::vector<uint8_t>& raw = c.hello_raw();
    if (raw.size() < sizeof(rkv::wire::ServerHello))
      return fail("accept private data is " + std::to_string(raw.size()) + " bytes, under 32");
    for (size_t i = sizeof(rkv::wire::ServerHello); i < raw.size(); ++i)
      if (raw[i] != 0) return fail("accept private data has non-zero byte " + std::to_string(i));
    sum.Add("hello", Hex(reinterpret_cast<const uint8_t*>(&c.hello()), sizeof(c.hello())));
    uint8_t* req = c.scratch();
    size_t len =
        rkv::wire::EncodeRequest(rkv::wire::Op::kPut, 9, "anon-key", "anon-value", req, 4096);
    rkv::Code code = rkv::Code::kOk;
    std::string msg;
    s = c.Call(req, len, FLAGS_timeout_ms, [&](const rkv::wire::Reply& r) {
      code = r.status;
      msg = std::string(r.payload);
      return Status::Ok();
    });
    if (!s.ok()) return fail("PUT before OPEN: " + s.ToString());
    sum.Add("put_before_open", rkv::CodeName(code)).Add("message", msg);
    if (code != rkv::Code::kUnauthenticated) return fail("PUT before OPEN was not refused");
    bool dropped = WaitDropped(c, 3000);
    sum.Add("dropped", dropped ? 1 : 0);
    return dropped ? pass() : fail("connection not dropped after the refusal");
  }
  if (kase == "big-before-open") {
    uint8_t* req = c.scratch() + 8192;
    size_t len = rkv::wire::EncodeRequest(rkv::wire::Op::kPut, 9, "big-key", std::string(6000, 'b'),
                                          req, 8192);
    std::string outcome;
    s = c.Call(req, len, FLAGS_timeout_ms, [&](const rkv::wire::Reply& r) {
      outcome = rkv::CodeName(r.status);
      return Status::Ok();
    });
    if (!s.ok()) outcome = s.message();
    sum.Add("request_bytes", len).Add("outcome", outcome);
    // Refused with UNAUTHENTICATED (a shared SRQ buffer holds it), or with --big_refused=false
    // (registration mode: one 4 KiB buffer before OPEN) an error the server's side raised.
    if (FLAGS_big_refused && !(s.ok() && outcome == rkv::CodeName(rkv::Code::kUnauthenticated)))
      return fail("not refused with UNAUTHENTICATED: " + outcome);
    if (!FLAGS_big_refused &&
        (s.ok() || outcome.find("request completion: remote") == std::string::npos))
      return fail("expected a remote error completion, got " + outcome);
    bool dropped = WaitDropped(c, 3000);
    sum.Add("dropped", dropped ? 1 : 0);
    return dropped ? pass() : fail("connection not dropped");
  }
  if (kase == "wrong-token" || kase == "no-mac") {
    s = c.Open(FLAGS_timeout_ms, kase == "no-mac" ? std::string() : FLAGS_wrong_token, nullptr);
    sum.Add("open", s.ToString());
    if (s.code() != rkv::Code::kUnauthenticated) return fail("OPEN was not refused");
    bool dropped = WaitDropped(c, 3000);
    sum.Add("dropped", dropped ? 1 : 0);
    return dropped ? pass() : fail("connection not dropped after the refusal");
  }
  if (kase == "replay") {
    s = c.Open(FLAGS_timeout_ms, CmConn::Token(), nullptr);
    if (!s.ok()) return fail("first OPEN (with the right token) failed: " + s.ToString());
    rkv::wire::OpenRequest recorded = c.last_open();
    CmConn second;
    s = ConnectOnly(&second, host, port);
    if (!s.ok()) return fail("second connect: " + s.ToString());
    s = second.Open(FLAGS_timeout_ms, "", &recorded);
    sum.Add("replayed_open", s.ToString());
    return s.code() == rkv::Code::kUnauthenticated ? pass() : fail("the replayed OPEN was granted");
  }
  if (kase == "open") {
    s = c.Open(FLAGS_timeout_ms, CmConn::Token(), nullptr);
    if (!s.ok()) return fail("OPEN with the right token: " + s.ToString());
    const rkv::wire::OpenReply& g = c.granted();
    s = RemoteOp(c, IBV_WR_RDMA_READ, g.region_addr, g.rkey, FLAGS_timeout_ms);
    sum.Add("read", s.ok() ? "OK" : s.message());
    if (!s.ok()) return fail("READ with the granted rkey failed");
    Status w = RemoteOp(c, IBV_WR_RDMA_WRITE, g.region_addr, g.rkey, FLAGS_timeout_ms);
    sum.Add("write", w.ok() ? "OK" : w.message());
    if (w.ok()) return fail("RDMA WRITE to the region succeeded");
    // The QP is in error after the refused WRITE: the atomic needs a fresh granted connection.
    CmConn d;
    s = ConnectOnly(&d, host, port);
    if (s.ok()) s = d.Open(FLAGS_timeout_ms, CmConn::Token(), nullptr);
    if (!s.ok()) return fail("second OPEN: " + s.ToString());
    Status a = RemoteOp(d, IBV_WR_ATOMIC_FETCH_AND_ADD, d.granted().region_addr, d.granted().rkey,
                        FLAGS_timeout_ms);
    sum.Add("atomic", a.ok() ? "OK" : a.message());
    if (a.ok()) return fail("atomic on the region succeeded");
    return pass();
  }
  return fail("unknown --auth_case '" + kase + "'");
}
}  // namespace

namespace {
// ---------------------------------------------------------------------------------------------

const char kUsage[] =
    "raw_client MODE --server=ADDR:PORT [options]\n"
    "  vanish      --rounds=N --puts=K --value_size=B [--parallel=P]\n"
    "  flood       --seconds=S --value_size=B --depth=D\n"
    "  halfopen    --count=N --hold=SECS\n"
    "  tcp-half | tcp-noready | tcp-hold   --hold=SECS\n"
    "  hold        --seconds=S [--get_every_ms=M] [--exchange=cm|tcp]\n"
    "  credits     [--over_by=N]   (N requests beyond the credits in the second batch)\n"
    "  auth        --auth_case=anonymous|wrong-token|no-mac|replay|open|connect-time|\n"
    "              cross-rkey|many\n"
    "              [--auth_token_file=F] [--count=N]   (judged: exit 1 if an attack worked)\n"
    "common: --timeout_ms=MS (deadline of each connect, exchange step and reply wait)";

int Usage(const std::string& why) {
  if (!why.empty()) std::cerr << "raw_client: " << why << "\n";
  std::cerr << "usage: " << kUsage << "\n";
  return 2;
}

// Parses --name=value / --name value / --name (bools) with gflags' registry, so that a bad
// flag is a usage error (exit 2) rather than gflags' exit 1. Non-flag arguments go to *args.
bool ParseArgs(int argc, char** argv, std::vector<std::string>* args, std::string* err) {
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    if (a.size() < 2 || a[0] != '-') {
      args->push_back(a);
      continue;
    }
    std::string body = a.substr(a[1] == '-' ? 2 : 1);
    std::string name = body, value;
    bool has_value = false;
    if (size_t eq = body.find('='); eq != std::string::npos) {
      name = body.substr(0, eq);
      value = body.substr(eq + 1);
      has_value = true;
    }
    gflags::CommandLineFlagInfo info;
    if (!gflags::GetCommandLineFlagInfo(name.c_str(), &info)) {
      if (!has_value && name.rfind("no", 0) == 0 &&
          gflags::GetCommandLineFlagInfo(name.substr(2).c_str(), &info) && info.type == "bool") {
        name = name.substr(2);
        value = "false";
        has_value = true;
      } else {
        *err = "unknown flag " + a;
        return false;
      }
    }
    if (!has_value) {
      if (info.type == "bool") {
        value = "true";
      } else if (i + 1 < argc) {
        value = argv[++i];
      } else {
        *err = "flag " + a + " needs a value";
        return false;
      }
    }
    if (gflags::SetCommandLineOption(name.c_str(), value.c_str()).empty()) {
      *err = "bad value '" + value + "' for --" + name;
      return false;
    }
  }
  return true;
}

}  // namespace

int main(int argc, char** argv) {
  gflags::SetUsageMessage(kUsage);
  FLAGS_logtostderr = true;
  google::InitGoogleLogging(argv[0]);
  std::vector<std::string> args;
  std::string err;
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    if (a == "--help" || a == "-help" || a == "-h") {
      std::cout << "usage: " << kUsage << "\n";
      return 0;
    }
  }
  if (!ParseArgs(argc, argv, &args, &err)) return Usage(err);
  if (args.size() != 1) return Usage(args.empty() ? "no MODE given" : "one MODE expected");
  const std::string mode = args[0];
  std::string host;
  uint16_t port = 0;
  if (FLAGS_server.empty()) return Usage("--server=ADDR:PORT is required");
  if (Status s = rkv::ParseHostPort(FLAGS_server, &host, &port); !s.ok())
    return Usage("--server: " + s.message());
  if (FLAGS_timeout_ms < 1) return Usage("--timeout_ms must be positive");
  if (FLAGS_value_size > int(rkv::wire::kMaxValueSize) || FLAGS_value_size < -1)
    return Usage("--value_size must be 0..65536");
  if (FLAGS_hold < 0 || FLAGS_seconds < 0) return Usage("--hold and --seconds must be >= 0");
  std::signal(SIGPIPE, SIG_IGN);
  std::signal(SIGUSR1, ReleaseHold);

  if (mode == "auth") return RunAuth(host, port);
  if (mode == "vanish") {
    if (FLAGS_rounds < 1) return Usage("--rounds must be at least 1");
    if (FLAGS_puts < 0 || FLAGS_puts > kMaxVanishPuts)
      return Usage("--puts must be 0.." + std::to_string(kMaxVanishPuts));
    if (FLAGS_parallel < 1 || FLAGS_parallel > 64) return Usage("--parallel must be 1..64");
    return RunVanish(host, port);
  }
  if (mode == "flood") {
    if (FLAGS_depth < 1 || FLAGS_depth > 1024) return Usage("--depth must be 1..1024");
    return RunFlood(host, port);
  }
  if (mode == "halfopen") {
    if (FLAGS_count < 1 || FLAGS_count > 4096) return Usage("--count must be 1..4096");
    return RunHalfOpen(host, port);
  }
  if (mode == "tcp-half") return RunTcpHalf(host, port);
  if (mode == "tcp-noready") return RunTcpManual(mode, host, port, false);
  if (mode == "tcp-hold") return RunTcpManual(mode, host, port, true);
  if (mode == "hold") {
    rkv::Exchange e;
    if (!rkv::ParseExchange(FLAGS_exchange, &e) ||
        (e != rkv::Exchange::kRdmaCm && e != rkv::Exchange::kTcp))
      return Usage("--exchange must be cm or tcp");
    if (FLAGS_get_every_ms < 0) return Usage("--get_every_ms must be >= 0");
    return RunHold();
  }
  if (mode == "credits") {
    if (FLAGS_over_by < 1 || FLAGS_over_by > kMaxOverBy)
      return Usage("--over_by must be 1.." + std::to_string(kMaxOverBy));
    return RunCredits(host, port);
  }
  return Usage("unknown MODE '" + mode + "'");
}
