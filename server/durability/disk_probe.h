// SPDX-License-Identifier: Apache-2.0
// ProbeDisk: whether a data directory takes writes again (a server that stepped down for a
// failing log asks before it offers itself for replicas again: server/cluster/
// disk_step_down.h). It creates DIR/disk-probe (removing one a crash left first), appends
// `bytes` zero bytes in 64 KiB writes, syncs the file and removes it again, through the Env (so
// a test's full disk fails it as it fails the log). OK only if every step succeeded; the error
// names the step, the path and the errno text. A probe file left by a crash is skipped by
// recovery (an unknown name) and removed by the next probe. Passing says the directory took
// `bytes` more, not that the log has room for long.
// Thread safety: any thread; two probes of one directory at once are not supported (one
// caller: the step-down thread).
#ifndef RKV_SERVER_DURABILITY_DISK_PROBE_H_
#define RKV_SERVER_DURABILITY_DISK_PROBE_H_

#include <cstdint>
#include <string>

#include "rkv/status.h"
#include "server/durability/env.h"

namespace rkv::wal {

inline constexpr char kDiskProbeName[] = "disk-probe";
inline constexpr uint64_t kDiskProbeBytes = 4 << 20;  // what kvserver writes

[[nodiscard]] Status ProbeDisk(Env* env, const std::string& dir, uint64_t bytes);

}  // namespace rkv::wal

#endif  // RKV_SERVER_DURABILITY_DISK_PROBE_H_
