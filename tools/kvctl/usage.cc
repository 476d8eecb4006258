// SPDX-License-Identifier: Apache-2.0
#include "tools/kvctl/usage.h"

#include "common/verbs/conn_flags.h"

namespace rkv::kvctl {

cli::Usage KvctlUsage() {
  return WithConnFlagGroups(cli::Usage{
      "kvctl",
      "kvctl [-v] [--server=ADDR:PORT] [FLAGS] get KEY\n"
      "kvctl [-v] [--server=ADDR:PORT] [FLAGS] put KEY [VALUE]\n"
      "kvctl [-v] [--server=ADDR:PORT] [FLAGS] del KEY\n"
      "kvctl [-v] [--server=ADDR:PORT] [FLAGS] stats|info [--json]\n"
      "kvctl [-v] [--server=ADDR:PORT] [FLAGS] check|snapshot\n"
      "kvctl [-v] --server=etcd://HOST:PORT[,HOST:PORT]/NAME get|put|del|stats ...\n"
      "kvctl [-v] --server=etcd://HOST:PORT[,HOST:PORT]/NAME cluster "
      "init|status|rebalance|remove ADDR:PORT",
      "Shell access to a kvserver: quiet on success, values byte-exact both ways, errors one\n"
      "line on stderr.\n"
      "  get KEY          write the value to stdout (a newline only when stdout is a terminal)\n"
      "  put KEY [VALUE]  store VALUE, or stdin's bytes when VALUE is absent\n"
      "  del KEY          delete the key\n"
      "  stats            the server's counters (--json: one JSON object)\n"
      "  info             every connection parameter of both queue pairs, and the memory\n"
      "                   parameters this connection was granted (--json: one JSON object)\n"
      "  check            run both sides' parameter validators without connecting a data QP\n"
      "  snapshot         ask a durable server for a snapshot and wait for it\n"
      "  cluster init     create cluster NAME's slot map in etcd (--slots, --replicas); refused\n"
      "                   if the cluster exists\n"
      "  cluster status   the cluster's epoch, servers (live or down) and their slots (--json)\n"
      "  cluster rebalance  spread the slots evenly over the live servers; waits for the\n"
      "                   coordinator (--wait_ms)\n"
      "  cluster remove ADDR:PORT  move every slot of that server to the others; waits\n"
      "After get, put and del every word is taken literally (a value may start with '-').",
      {{"Server", {"server", "auth_token_file", "timeout_ms", "snapshot_wait_s"}},
       {"Cluster", {"slots", "replicas", "wait_ms"}},
       {"Output", {"json", "verbose"}}},
      "Exit status: 0 OK; 1 NOT_FOUND (get, del) or a broken rule (check); 2 any other error\n"
      "(bad usage, cannot connect, refused by the server, reading stdin or writing stdout).\n"
      "\n"
      "See also: kvserver(1), kvbench(1); docs/kvctl.md in the rkv sources.",
      ""});
}

}  // namespace rkv::kvctl
