// SPDX-License-Identifier: Apache-2.0
// Printable (common/printable.h): peer text made safe for logs and Status messages.
#include "common/printable.h"

#include <gtest/gtest.h>

#include <string>

#include "common/etcd/etcd_json.h"
#include "common/exchange/exchange.h"
#include "rkv/status.h"

namespace rkv {
namespace {

TEST(Printable, KeepsPrintableAsciiAndEscapesTheRest) {
  EXPECT_EQ(Printable("plain text: 42 (ok)"), "plain text: 42 (ok)");
  EXPECT_EQ(Printable(std::string("a\nb\r\x1b[2K\0z", 10)), "a\\x0ab\\x0d\\x1b[2K\\x00z");
  EXPECT_EQ(Printable("\xc3\xa9"), "\\xc3\\xa9");         // UTF-8 bytes too
  EXPECT_EQ(Printable("back\\slash"), "back\\x5cslash");  // unambiguous: a \x in the input
  EXPECT_EQ(Printable(""), "");
}

TEST(Printable, IsBounded) {
  EXPECT_EQ(Printable(std::string(300, 'a')), std::string(200, 'a') + "...");
  EXPECT_EQ(Printable("abcdef", 3), "abc...");
  EXPECT_EQ(Printable("abc", 3), "abc");
  const std::string worst = Printable(std::string(8192, '\n'));
  EXPECT_EQ(worst.size(), 4 * kPrintableDefaultMax + 3);
  for (char c : Printable(std::string("\x01\x7f\xff\n", 4)))
    EXPECT_TRUE(c >= 0x20 && c < 0x7f) << int(c);
}

// Review 12, finding 4: the text of a client's kError message (any bytes, up to 8 KiB) went into
// the server's log line raw; the manual acceptor now passes it through Printable.
TEST(Printable, PeerErrorTextCannotForgeALogLine) {
  ExchangeMsg e;
  e.type = MsgType::kError;
  e.code = Code::kIoError;
  e.text =
      "x\nI1123 12:00:00.000000  1 manual_acceptor.cc:258] connection established via "
      "tcp 10.0.0.66:1234\x1b[2K" +
      std::string(8000, 'y');
  const std::string b = EncodeExchangeMsg(e);
  ExchangeMsg got;
  ASSERT_TRUE(DecodeExchangeMsg(reinterpret_cast<const uint8_t*>(b.data()), b.size(), &got).ok());
  const std::string logged = "manual connection (tcp 10.0.0.5:4000) failed: " +
                             Status(got.code, "client: " + Printable(got.text)).ToString();
  EXPECT_EQ(logged.find('\n'), std::string::npos) << logged;
  EXPECT_EQ(logged.find('\x1b'), std::string::npos) << logged;
  EXPECT_LT(logged.size(), 1000u);
}

TEST(Printable, EtcdSnippetIsPrintable) {
  EXPECT_EQ(EtcdSnippet("a\nb", 10), Printable("a\nb", 10));
  EXPECT_EQ(EtcdSnippet(std::string(300, 'z')), Printable(std::string(300, 'z')));
}

}  // namespace
}  // namespace rkv
