// SPDX-License-Identifier: Apache-2.0
// CheckLimitOptions (server/conn/limit_options.h): Server::Start refuses limit options out of
// range.
#include "server/conn/limit_options.h"

#include <gtest/gtest.h>

#include <cmath>
#include <string>

namespace rkv {
namespace {

// Review 12, finding 9: Server::Start checks the limit options as kvserver's flags are checked
// (a library user's negative or NaN rate must not mean "no limit").
TEST(LimitOptions, OutOfRangeIsRefusedNamingTheOption) {
  ServerOptions o;
  EXPECT_TRUE(CheckLimitOptions(o).ok());
  EXPECT_EQ(EffectivePendingPerSource(o), 8) << "max(1, 64 / 8)";
  o.max_pending = 4;
  EXPECT_EQ(EffectivePendingPerSource(o), 1);
  o.max_pending_per_source = 0;
  EXPECT_EQ(EffectivePendingPerSource(o), 0) << "0: no cap";
  struct Case {
    void (*set)(ServerOptions*);
    const char* name;
  };
  const Case cases[] = {
      {[](ServerOptions* x) { x->connects_per_source_per_s = -1; }, "connects_per_source_per_s"},
      {[](ServerOptions* x) { x->connects_per_source_per_s = std::nan(""); },
       "--max_connects_per_source_per_s"},
      {[](ServerOptions* x) { x->connects_per_source_per_s = 1e300; }, "connects_per_source_per_s"},
      {[](ServerOptions* x) { x->max_conns_per_source = -1; }, "--max_conns_per_source"},
      {[](ServerOptions* x) { x->max_pending_per_source = -2; }, "--max_pending_per_source"},
      {[](ServerOptions* x) { x->connect_burst_per_source = 0; }, "--connect_burst_per_source"},
      {[](ServerOptions* x) { x->max_pending = 0; }, "--max_pending"},
      {[](ServerOptions* x) { x->max_connections = -5; }, "--max_connections"},
      {[](ServerOptions* x) { x->accept_timeout_ms = 0; }, "--accept_timeout"},
  };
  for (const Case& c : cases) {
    ServerOptions bad;
    c.set(&bad);
    Status s = CheckLimitOptions(bad);
    EXPECT_EQ(s.code(), Code::kInvalidArgument) << c.name;
    EXPECT_NE(s.message().find(c.name), std::string::npos) << s.message();
  }
}

}  // namespace
}  // namespace rkv
