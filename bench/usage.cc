// SPDX-License-Identifier: Apache-2.0
#include "bench/usage.h"

#include "common/verbs/conn_flags.h"

namespace rkv::bench {

cli::Usage KvbenchUsage() {
  return WithConnFlagGroups(cli::Usage{
      "kvbench",
      "kvbench load --server=ADDR:PORT --records=N [FLAGS]\n"
      "kvbench run --server=ADDR:PORT --workload=a|b|c|d|f --operations=N [FLAGS]",
      "A YCSB-like load generator for rkv. 'load' inserts --records keys; 'run' runs a YCSB\n"
      "core workload (or a custom mix) over them and prints YCSB-style summary lines on stdout\n"
      "and a status line every second on stderr. Flags accept dashes or underscores\n"
      "(--value-size or --value_size). Failed operations never stop a run: each is counted by\n"
      "status code; with --reconnect a run survives a server restart.",
      {{"Server", {"server", "auth_token_file", "reconnect"}},
       {"Workload",
        {"workload", "read_proportion", "update_proportion", "insert_proportion", "rmw_proportion",
         "delete_proportion", "distribution", "zipf_theta", "hotspot_data_fraction",
         "hotspot_opn_fraction", "records", "key_size", "value_size"}},
       {"Run",
        {"operations", "duration", "threads", "connections", "depth", "target", "verify",
         "location_cache", "warm_cache"}},
       {"Output", {"json", "hw_counters"}}},
      "Exit status: 0 OK; 1 operations failed or --verify found a wrong value; 2 bad options or\n"
      "no connection at the start.\n"
      "\n"
      "See also: kvserver(1), kvctl(1); docs/performance.md in the rkv sources.",
      ""});
}

}  // namespace rkv::bench
