// SPDX-License-Identifier: Apache-2.0
// kvctl's --help and manual page text (common/cli/usage.h): synopsis, commands, flag groups.
// Thread safety: a pure function.
#ifndef RKV_TOOLS_KVCTL_USAGE_H_
#define RKV_TOOLS_KVCTL_USAGE_H_

#include "common/cli/usage.h"

namespace rkv::kvctl {
cli::Usage KvctlUsage();
}  // namespace rkv::kvctl

#endif  // RKV_TOOLS_KVCTL_USAGE_H_
