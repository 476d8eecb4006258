// SPDX-License-Identifier: Apache-2.0
// Harness: the manual-mode exchange messages (common/exchange/exchange.h), which a server reads
// from any client that reaches its TCP port, exchange directory or etcd prefix, and a client
// reads from the server. The input goes through the three ways it is received:
// - DecodeExchangeMsg on the bytes as one message (what MailboxChannel does with a file's or
//   etcd key's contents), and MailboxChannel::Receive itself on an in-memory mailbox;
// - TcpChannel::Receive on a stream (a socketpair holding the input, then EOF): the 16-byte
//   header framing (ExchangePayloadLength) and the message decoder, message after message.
// Invariants: an accepted message has a known type; record-carrying types (PARAMS, CHECK,
// CHECK_REPLY) carry a valid record and, when flagged, a valid ServerHello; its text is the rest
// of the bytes; re-encoding it gives a message of the input's length that decodes to the same
// encoding. A stream never yields more messages than it has headers for.
// The input's lines are also used as the entry names a MailboxListener lists: it accepts only
// "<16 hex digits>.c.1", each id once.
#include "common/exchange/exchange.h"

#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <map>
#include <memory>

#include "common/exchange/mailbox_channel.h"
#include "common/exchange/tcp_exchange.h"
#include "fuzz/fuzz_util.h"

namespace {
using namespace rkv;

bool HasRecord(MsgType t) {
  return t == MsgType::kParams || t == MsgType::kCheck || t == MsgType::kCheckReply;
}

// Checks one decoded message; returns its re-encoding.
std::string CheckMsg(const ExchangeMsg& m) {
  const uint16_t type = static_cast<uint16_t>(m.type);
  FUZZ_CHECK(type >= 1 && type <= 5);
  if (!HasRecord(m.type)) FUZZ_CHECK(!m.has_hello);
  const std::string enc = EncodeExchangeMsg(m);
  FUZZ_CHECK(enc.size() <= kMaxExchangeMessage);
  ExchangeMsg again;
  FUZZ_CHECK(
      DecodeExchangeMsg(reinterpret_cast<const uint8_t*>(enc.data()), enc.size(), &again).ok());
  FUZZ_CHECK(again.type == m.type && again.code == m.code && again.has_hello == m.has_hello &&
             again.text == m.text);
  FUZZ_CHECK(EncodeExchangeMsg(again) == enc);
  return enc;
}

void CheckOneMessage(const uint8_t* data, size_t size) {
  if (size >= kExchangeHeaderSize) {
    uint32_t len = 0;
    if (ExchangePayloadLength(data, &len).ok())
      FUZZ_CHECK(len <= kMaxExchangeMessage - kExchangeHeaderSize);
  }
  ExchangeMsg m;
  Status s = DecodeExchangeMsg(data, size, &m);
  if (!s.ok()) {
    FUZZ_CHECK(s.code() == Code::kProtocolError && !s.message().empty());
    return;
  }
  FUZZ_CHECK(size >= kExchangeHeaderSize && size <= kMaxExchangeMessage);
  const size_t fixed = kExchangeHeaderSize + (HasRecord(m.type) ? kConnParamsSize : 0) +
                       (m.has_hello ? sizeof(wire::ServerHello) : 0);
  FUZZ_CHECK(fixed + m.text.size() == size);
  FUZZ_CHECK(std::memcmp(m.text.data(), data + fixed, m.text.size()) == 0);
  if (m.has_hello)
    FUZZ_CHECK(
        std::memcmp(&m.hello, data + kExchangeHeaderSize + kConnParamsSize, sizeof m.hello) == 0);
  FUZZ_CHECK(CheckMsg(m).size() == size);
}

// The input as a TCP stream: framed messages until the stream ends or a frame is refused.
void CheckStream(const uint8_t* data, size_t size) {
  int fds[2];
  FUZZ_CHECK(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, fds) == 0);
  int buf = int(size) + 4096;
  setsockopt(fds[0], SOL_SOCKET, SO_SNDBUF, &buf, sizeof buf);
  size_t off = 0;
  while (off < size) {
    ssize_t n = write(fds[0], data + off, size - off);
    FUZZ_CHECK(n > 0);
    off += size_t(n);
  }
  close(fds[0]);  // EOF after the input: Receive never waits for more
  sockaddr_in peer_addr{};
  peer_addr.sin_family = AF_INET;
  TcpChannel ch(fds[1], "fuzz", peer_addr);
  size_t messages = 0, consumed = 0;
  for (;;) {
    ExchangeMsg m;
    // A generous deadline: the whole input and EOF are there, so it never runs out (1 s did on a
    // loaded machine, which is time, not the decoder).
    Status s = ch.Receive(&m, 60000);
    if (!s.ok()) {
      FUZZ_CHECK(s.code() != Code::kTimeout);  // the whole input is there: never a wait
      break;
    }
    ++messages;
    consumed += CheckMsg(m).size();
    FUZZ_CHECK(consumed <= size);
  }
  FUZZ_CHECK(messages <= size / kExchangeHeaderSize);
  FUZZ_CHECK(ch.PeerGone() || consumed < size);
}

// A mailbox holding the input as a client's first message.
class MemMailbox : public Mailbox {
 public:
  Status Put(const std::string& name, const std::string& bytes) override {
    entries_[name] = bytes;
    return Status::Ok();
  }
  Status WaitFor(const std::string& name, std::string* bytes, int) override {
    auto it = entries_.find(name);
    if (it == entries_.end()) return Status(Code::kTimeout, "no " + name);
    *bytes = it->second;
    return Status::Ok();
  }
  Status List(const std::string& suffix, std::vector<std::string>* out) override {
    out->clear();
    for (const auto& [name, bytes] : entries_)
      if (name.size() > suffix.size() &&
          name.compare(name.size() - suffix.size(), suffix.size(), suffix) == 0)
        out->push_back(name);
    return Status::Ok();
  }
  bool Alive(const std::string& name) override { return entries_.count(name) > 0; }
  void Remove(const std::string& name) override { entries_.erase(name); }
  void Heartbeat() override {}
  std::string Describe(const std::string& name) const override { return "mem " + name; }

 private:
  std::map<std::string, std::string> entries_;
};

void CheckMailbox(const uint8_t* data, size_t size) {
  auto mb = std::make_shared<MemMailbox>();
  (void)mb->Put("0123456789abcdef.c.1", std::string(fuzz::AsText(data, size)));
  MailboxChannel ch(mb, "0123456789abcdef", /*client=*/false);
  ExchangeMsg m;
  Status s = ch.Receive(&m, 0);
  if (s.ok()) FUZZ_CHECK(CheckMsg(m).size() == size);
  FUZZ_CHECK(!ch.PeerGone());
}

// The input's lines as entry names a listener finds in its mailbox (a shared directory or etcd
// prefix anyone may write): only "<16 hex digits>.c.1" may become a client, each once.
void CheckListener(const uint8_t* data, size_t size) {
  auto mb = std::make_unique<MemMailbox>();
  std::string_view text = fuzz::AsText(data, size);
  for (int i = 0; i < 16 && !text.empty(); ++i) {
    const size_t nl = std::min(text.find('\n'), text.size());
    (void)mb->Put(std::string(text.substr(0, nl)), "");
    text.remove_prefix(std::min(nl + 1, text.size()));
  }
  std::unique_ptr<ExchangeListener> listener;
  FUZZ_CHECK(MailboxListener::Create(std::move(mb), &listener).ok());
  for (int accepted = 0;; ++accepted) {
    FUZZ_CHECK(accepted <= 16);
    std::unique_ptr<ExchangeChannel> ch;
    FUZZ_CHECK(listener->Accept(&ch, 0).ok());
    if (ch == nullptr) break;
    const std::string where = ch->Describe();  // "mem <id>.*"
    FUZZ_CHECK(where.size() == 4 + 16 + 2 && where.compare(0, 4, "mem ") == 0);
    FUZZ_CHECK(where.find_first_not_of("0123456789abcdef", 4) == 4 + 16);
  }
}

void Seeds(const fuzz::SeedWriter& w) {
  ConnParams p;
  p.qp_num = 0x42;
  p.psn = 0x1234;
  ExchangeMsg m;
  m.type = MsgType::kParams;
  m.params = p;
  const std::string client_params = EncodeExchangeMsg(m);
  w.Write("client-params", client_params);
  m.has_hello = true;
  m.hello.magic = wire::kHelloMagic;
  m.hello.version = wire::kProtocolVersion;
  m.hello.credits = 8;
  w.Write("server-params", EncodeExchangeMsg(m));
  m.type = MsgType::kCheckReply;
  m.text = "path_mtu: client 4096 > server port's active MTU 1024";
  w.Write("check-reply", EncodeExchangeMsg(m));
  ExchangeMsg e;
  e.type = MsgType::kError;
  e.code = Code::kParamMismatch;
  e.text = "server: PSN mismatch";
  const std::string error = EncodeExchangeMsg(e);
  w.Write("error", error);
  ExchangeMsg ready;
  ready.type = MsgType::kReady;
  const std::string ready_bytes = EncodeExchangeMsg(ready);
  w.Write("ready", ready_bytes);
  // A TCP stream of a whole client handshake.
  w.Write("stream-params-ready", client_params + ready_bytes);
  w.Write("stream-error-then-garbage", error + "GARBAGE-GARBAGE!");
  w.Write("listener-names",
          "0123456789abcdef.c.1\n0123456789ABCDEF.c.1\n.c.1\nx.c.1\n"
          "fedcba9876543210.s.1\nfedcba9876543210.c.1\n");
}
}  // namespace

RKV_FUZZ_SEEDS(Seeds)

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  CheckOneMessage(data, size);
  CheckMailbox(data, size);
  CheckListener(data, size);
  CheckStream(data, size);
  return 0;
}
