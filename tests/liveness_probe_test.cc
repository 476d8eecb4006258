// SPDX-License-Identifier: Apache-2.0
// LivenessProbe's verdicts that need no server (server/cluster/liveness_probe.h): only a
// connect that nothing listens for proves a server dead; the probe of a server that never
// answers proves nothing, and dropped targets forget their verdicts.
#include "server/cluster/liveness_probe.h"

#include <gtest/gtest.h>

#include <chrono>
#include <thread>

namespace rkv::cluster {
namespace {

TEST(LivenessProbe, OnlyNoListenerProvesAServerGone) {
  const std::string pre = "connecting to 10.0.0.1:7000: expected RDMA_CM_EVENT_ESTABLISHED, got ";
  EXPECT_TRUE(LivenessProbe::NoListener(
      Status(Code::kConnectionLost, pre + "RDMA_CM_EVENT_REJECTED (status 8): ")));
  // The server's own refusal (consumer reject: BUSY, a full table of pending connections).
  EXPECT_FALSE(LivenessProbe::NoListener(
      Status(Code::kBusy, pre + "RDMA_CM_EVENT_REJECTED (status 28): BUSY: too many")));
  EXPECT_FALSE(LivenessProbe::NoListener(
      Status(Code::kConnectionLost, pre + "RDMA_CM_EVENT_REJECTED (status 28): refused")));
  // A cut link or a stopped process: no answer at all.
  EXPECT_FALSE(
      LivenessProbe::NoListener(Status(Code::kConnectionLost, pre + "RDMA_CM_EVENT_UNREACHABLE")));
  EXPECT_FALSE(LivenessProbe::NoListener(Status(
      Code::kTimeout, "no rdma_cm event within 1000 ms waiting for RDMA_CM_EVENT_ESTABLISHED")));
  EXPECT_FALSE(LivenessProbe::NoListener(
      Status(Code::kConnectionLost, pre + "RDMA_CM_EVENT_REJECTED (status 80): ")));
  EXPECT_FALSE(LivenessProbe::NoListener(Status::Ok()));
}

TEST(LivenessProbe, AnUnresolvableServerIsNeverFoundDead) {
  LivenessProbe probe("");
  // No RDMA device, or an address nobody answers: every probe fails without proof.
  probe.SetTargets({{7, 42, "192.0.2.1", 9}});
  std::this_thread::sleep_for(std::chrono::milliseconds(3 * LivenessProbe::kProbeMs));
  EXPECT_FALSE(probe.FoundDead(7, 42));
  probe.SetTargets({});
  EXPECT_FALSE(probe.FoundDead(7, 42));
  EXPECT_EQ(probe.found_dead(), 0u);
}

}  // namespace
}  // namespace rkv::cluster
