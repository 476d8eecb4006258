// SPDX-License-Identifier: Apache-2.0
// abandon_probe: checks that a cluster client stops waiting for the reply of a primary that was
// failed over while it waited (client/cluster_router.h; tests/integration/replicas.sh, "a
// zombie primary"):
//   abandon_probe --cluster=etcd://H:P/NAME --stopped=HOST:PORT --go_file=F [--keys=N]
// Picks from the map a key whose primary is the server at --stopped (the target) and N other
// keys, PUTs them all (opening a connection to every server that is a primary of one), prints
// "abandon_probe: ready", waits until F exists (the script stops that server with SIGSTOP,
// then creates F), and PUTs every key again with an rpc timeout of 60 s, the target first: its
// wait at the stopped server must end, once the failover commits, CONNECTION_LOST naming the
// map (not TIMEOUT after 60 s); the keys after it go to their primaries, the new ones
// included. Then every key is read back: a key whose second PUT was acknowledged reads its
// second value; one refused its first; one of unknown outcome either.
// Prints `abandon_probe: ... abandoned N ...`; exit 0 when at least one wait was abandoned and
// every read was right, 1 otherwise, 2 on a setup failure.
//   abandon_probe --mode=get ... (tests/integration/replicas_partition.sh: the target's primary
// is cut off): the same first round (PUTs, then a GET of each: connections and the location
// cache warm), then, once F exists, GETs of the target (rpc and connect timeouts of 60 s) until
// the wait at the cut ended: each must return the first value. A cut-off server completes no
// READ (rxe fails it after its retries) and answers no connect: the GET at the cut returns the
// right value only if it reads again at the new primary once the map names it, and returns
// before its 60 s timeouts only if the wait it was in then (a READ, or a connect to the cut
// server after rxe failed the READ) was given up for the new map. Then the other keys are
// read. Exit 0 when every read was right, the GETs outlasted the failover (a wait was
// abandoned, or the map in etcd named the new primary) and none took as long as the 60 s
// timeouts (a GET that ran into one, then read at the new primary, would: its wait was not
// given up when the map moved).
#include <gflags/gflags.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <string>
#include <thread>
#include <vector>

#include "common/cluster/slot_map.h"
#include "rkv/client.h"
#include "tests/integration/read_slot_map.h"

DEFINE_string(cluster, "", "etcd://HOST:PORT/NAME of a replicated cluster");
DEFINE_string(stopped, "", "HOST:PORT of the server the script stops");
DEFINE_string(go_file, "", "the second round of PUTs starts once this file exists");
DEFINE_int32(keys, 32, "keys besides the target");
DEFINE_string(mode, "put", "put: the second round PUTs; get: it GETs (see the file's comment)");

namespace {
int Setup(const std::string& what, const rkv::Status& s) {
  std::fprintf(stderr, "abandon_probe: %s: %s\n", what.c_str(), s.ToString().c_str());
  return 2;
}
// --mode=get's second round: GETs of the target, one every 5 ms, each of which must return its
// value, until the wait at the cut primary ended, or 120 s passed; then every other key once.
// The wait at the cut ends one of two ways, both right: the map names the new primary while a
// GET waits (the wait is abandoned and the GET reads again there), or the cut connection fails
// first (rxe gives up its retries) and the GET reads again under the map of that moment, the
// new one once the failover committed. So the loop ends at the first abandoned wait, or after
// the first GET issued once the probe's own read of the map in etcd (every 500 ms) saw
// another primary for the target's slot.
// The script creates F just before it pulls the cable, so the GETs straddle the cut whenever
// the script's `link off` returns (it waits for B's kernel to see the carrier drop, seconds
// under TCG: a single GET issued after it found the failover done).
int ReadAfterCut(rkv::Client* c, const std::vector<std::string>& keys, int timeout_ms) {
  using Clock = std::chrono::steady_clock;
  const auto start = Clock::now();
  auto next_map_read = start;
  std::string v;
  int bad = 0, gets = 0;
  double slowest = 0;
  bool moved = false;  // the map in etcd names another primary for the target's slot
  std::string how = "no GET straddled a failover within 120 s";
  while (Clock::now() - start < std::chrono::seconds(120)) {
    // Read before the GET: a GET issued after the probe saw the move ends the loop.
    if (!moved && Clock::now() >= next_map_read) {
      next_map_read = Clock::now() + std::chrono::milliseconds(500);
      rkv::cluster::SlotMap map;
      if (rkv::integration::ReadSlotMap(FLAGS_cluster, &map).ok()) {
        const rkv::cluster::ServerEntry* p = map.Owner(map.SlotOf(keys[0]), 0);
        moved = p != nullptr && p->host + ":" + std::to_string(p->port) != FLAGS_stopped;
      }
    }
    const auto t0 = Clock::now();
    const rkv::ClientCounters before = c->counters();
    rkv::Status s = c->Get(keys[0], &v);
    const double took = std::chrono::duration<double>(Clock::now() - t0).count();
    slowest = std::max(slowest, took);
    ++gets;
    if (took > 2) {  // what the GET met on its way (a diagnosis, not an assertion)
      rkv::ClientCounters d = c->counters();
      d -= before;
      std::printf(
          "abandon_probe: GET %d, %.1f s after the signal, took %.1f s (%s): map refreshes %llu, "
          "redirects %llu, reads posted %llu, round trips %llu, reconnects %llu, abandoned %llu\n",
          gets, std::chrono::duration<double>(Clock::now() - start).count(), took,
          s.ToString().c_str(), static_cast<unsigned long long>(d.map_refreshes),
          static_cast<unsigned long long>(d.redirects),
          static_cast<unsigned long long>(d.reads_posted),
          static_cast<unsigned long long>(d.round_trips),
          static_cast<unsigned long long>(d.reconnects),
          static_cast<unsigned long long>(d.abandoned_waits));
      std::fflush(stdout);  // kept if the script's timeout kills the probe
    }
    if ((!s.ok() || v != "first") && ++bad <= 5)
      std::printf("abandon_probe: WRONG: the target %s read %s '%s'\n", keys[0].c_str(),
                  s.ToString().c_str(), v.c_str());
    if (c->counters().abandoned_waits > 0) {
      how = "a wait at the cut primary was abandoned when the map named the new one";
      break;
    }
    if (moved) {
      how =
          "the map named the new primary (no wait abandoned: the cut connection failed "
          "first, or no GET was waiting)";
      break;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  const auto others = Clock::now();
  for (size_t i = 1; i < keys.size(); ++i) {
    rkv::Status s = c->Get(keys[i], &v);
    if ((!s.ok() || v != "first") && ++bad <= 5)
      std::printf("abandon_probe: WRONG: %s read %s '%s'\n", keys[i].c_str(), s.ToString().c_str(),
                  v.c_str());
  }
  const uint64_t abandoned = c->counters().abandoned_waits;
  std::printf(
      "abandon_probe: the target's slowest GET (of %d) returned in %.1f s; abandoned %llu; wrong "
      "reads %d; %s; the other %zu keys read in %.1f s\n",
      gets, slowest, static_cast<unsigned long long>(abandoned), bad, how.c_str(), keys.size() - 1,
      std::chrono::duration<double>(Clock::now() - others).count());
  // Not a latency target: a GET as long as the timeouts had a wait end by one, not given up.
  const bool under_timeouts = slowest * 1000 < timeout_ms;
  if (!under_timeouts)
    std::printf(
        "abandon_probe: WRONG: a GET took %.1f s, as long as the %d ms timeouts: a wait "
        "at the cut server was not given up when the map moved\n",
        slowest, timeout_ms);
  return (abandoned >= 1 || moved) && bad == 0 && under_timeouts ? 0 : 1;
}
}  // namespace

int main(int argc, char** argv) {
  gflags::ParseCommandLineFlags(&argc, &argv, true);
  if (FLAGS_go_file.empty() || FLAGS_stopped.empty() || FLAGS_keys <= 0)
    return Setup("flags", rkv::Status(rkv::Code::kInvalidArgument, "see the file's comment"));
  rkv::cluster::SlotMap map;
  rkv::Status s = rkv::integration::ReadSlotMap(FLAGS_cluster, &map);
  if (!s.ok()) return Setup("setup", s);
  std::vector<std::string> keys;  // the target first
  for (int i = 0; i < 100000 && keys.empty(); ++i) {
    const std::string k = "abandon-target-" + std::to_string(i);
    const rkv::cluster::ServerEntry* p = map.Owner(map.SlotOf(k), 0);
    if (p != nullptr && p->host + ":" + std::to_string(p->port) == FLAGS_stopped) keys.push_back(k);
  }
  if (keys.empty())
    return Setup("no slot of " + FLAGS_stopped, rkv::Status(rkv::Code::kNotFound, "not a primary"));
  for (int i = 0; i < FLAGS_keys; ++i) keys.push_back("abandon-" + std::to_string(i));
  rkv::Options o;
  // Far longer than a failover: a wait at the stopped or cut server ends early only when it is
  // given up for the new map (or, cut, when rxe fails the connection first).
  o.rpc_timeout_ms = 60000;
  o.connect_timeout_ms = 60000;
  std::unique_ptr<rkv::Client> c;
  s = rkv::Client::Connect(FLAGS_cluster, o, &c);
  if (!s.ok()) return Setup("connect", s);
  const int n = int(keys.size());
  auto key = [&keys](int i) { return keys[size_t(i)]; };
  for (int i = 0; i < n; ++i) {
    if (!(s = c->Put(key(i), "first")).ok()) {
      std::fprintf(stderr, "abandon_probe: first PUT of %s: %s\n", key(i).c_str(),
                   s.ToString().c_str());
      return 2;
    }
  }
  if (FLAGS_mode == "get") {
    std::string v;
    for (int i = 0; i < n; ++i)
      if (!(s = c->Get(key(i), &v)).ok() || v != "first") return Setup("first GET of " + key(i), s);
  }
  std::printf("abandon_probe: ready\n");
  std::fflush(stdout);
  for (int waited = 0; access(FLAGS_go_file.c_str(), F_OK) != 0; ++waited) {
    if (waited > 12000) {  // 600 s
      std::fprintf(stderr, "abandon_probe: %s never appeared\n", FLAGS_go_file.c_str());
      return 2;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  if (FLAGS_mode == "get") return ReadAfterCut(c.get(), keys, o.rpc_timeout_ms);
  std::vector<int> outcome(size_t(n), 0);  // 1 acknowledged, 0 unknown, -1 refused
  int ok = 0, unknown = 0, refused = 0, bad = 0;
  std::string first_abandon;
  for (int i = 0; i < n; ++i) {
    s = c->Put(key(i), "second");
    if (s.ok()) {
      outcome[size_t(i)] = 1;
      ++ok;
    } else if (s.code() == rkv::Code::kConnectionLost || s.code() == rkv::Code::kTimeout) {
      ++unknown;
      if (first_abandon.empty() && s.message().find("cluster map") != std::string::npos)
        first_abandon = s.ToString();
    } else {
      outcome[size_t(i)] = -1;  // refused: not applied
      ++refused;
    }
  }
  for (int i = 0; i < n; ++i) {
    std::string v;
    s = c->Get(key(i), &v);
    const int k = outcome[size_t(i)];
    const bool right = s.ok() && (k == 1    ? v == "second"
                                  : k == -1 ? v == "first"
                                            : v == "first" || v == "second");
    if (!right && ++bad <= 5)
      std::printf("abandon_probe: WRONG: %s read %s '%s' (second PUT %s)\n", key(i).c_str(),
                  s.ToString().c_str(), v.c_str(),
                  k == 1    ? "acknowledged"
                  : k == -1 ? "refused"
                            : "of unknown outcome");
  }
  const uint64_t abandoned = c->counters().abandoned_waits;
  std::printf(
      "abandon_probe: second PUTs: %d acknowledged, %d of unknown outcome, %d refused; "
      "abandoned %llu; wrong reads %d%s%s\n",
      ok, unknown, refused, static_cast<unsigned long long>(abandoned), bad,
      first_abandon.empty() ? "" : "; first: ", first_abandon.c_str());
  return abandoned >= 1 && bad == 0 ? 0 : 1;
}
