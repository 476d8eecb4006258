// SPDX-License-Identifier: Apache-2.0
// kvbench's --help and manual page text (common/cli/usage.h): synopsis, phases, flag groups.
// Thread safety: a pure function.
#ifndef RKV_BENCH_USAGE_H_
#define RKV_BENCH_USAGE_H_

#include "common/cli/usage.h"

namespace rkv::bench {
cli::Usage KvbenchUsage();
}  // namespace rkv::bench

#endif  // RKV_BENCH_USAGE_H_
