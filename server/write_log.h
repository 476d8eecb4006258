// SPDX-License-Identifier: Apache-2.0
// WriteLog: where a Table records each write before it publishes it (the write-ahead log of
// server/durability/, or nothing for a memory-only server).
//
// Contract: the Table calls LogPut/LogDelete while it holds the key's stripe locks, after the
// write is sure to succeed (its room is reserved, its block written but unpublished) and before
// readers can see it. The call returns once the record is as durable as the configured fsync
// mode promises, or with the failure: then the Table undoes the reservation and the write is
// neither published nor acknowledged. Because the key's writers serialize on those locks, the
// log holds each key's writes in the order they were applied.
// Thread safety: implementations are called from many threads at once (one per write in
// flight) and may block (group commit); they must not call back into the Table.
// Ownership: the Table does not own its WriteLog, which must outlive every write.
#ifndef RKV_SERVER_WRITE_LOG_H_
#define RKV_SERVER_WRITE_LOG_H_

#include <string_view>

#include "rkv/status.h"

namespace rkv {

class WriteLog {
 public:
  virtual ~WriteLog() = default;
  [[nodiscard]] virtual Status LogPut(std::string_view key, std::string_view value) = 0;
  [[nodiscard]] virtual Status LogDelete(std::string_view key) = 0;
  // OK, or why every record would be refused now (checked before a write takes any lock, so
  // that writes fail fast instead of queueing behind a log that cannot take them).
  [[nodiscard]] virtual Status Ready() const = 0;
  // True if a write may be logged by the thread that received it (a worker) rather than handed to
  // a thread that may block: the log does not wait for the disk on the common path (no
  // fsync per record) and is not stalled (docs/design.md, "Durability").
  virtual bool WriteInline() const { return false; }
};

}  // namespace rkv

#endif  // RKV_SERVER_WRITE_LOG_H_
