// SPDX-License-Identifier: Apache-2.0
// Harness: the cluster's coordinator records in etcd (common/cluster/cluster_request.h,
// migration_record.h): ClusterRequest::Decode (NAME/request, put by kvctl: anyone with write
// access to the cluster's etcd prefix), ClusterResult::Decode (NAME/result, read by kvctl) and
// MigrationRecord::Decode (NAME/migration, read by every server). Each decoder gets the input as
// it is and, since an XXH3-64 checksum gates every field check, a copy with the checksum field
// recomputed (so mutations reach the field checks instead of stopping at the checksum).
// Invariants: a refusal is PROTOCOL_ERROR with a message. An accepted request re-encodes to the
// input, is a rebalance without a server or a remove naming one. An accepted migration record
// re-encodes to the input, has 1..kMaxMigrationSlots ascending slots filling the input, a known
// state and two different servers. An accepted result is 32..32+kMaxResultMessage bytes, its
// message printable (no control bytes) and at most 4 x kMaxResultMessage bytes; its re-encoding
// decodes to the same fields and is the input itself when the stored message is plain printable
// text without a backslash. (Not the input in general: Decode escapes the stored message again,
// so "\xNN" escapes double at every trip; tests/cluster_formats_test.cc,
// ClusterResult.DISABLED_EscapedMessagesRoundTripOnce.)
#include <xxhash.h>

#include <cstring>
#include <string>
#include <vector>

#include "common/cluster/cluster_request.h"
#include "common/cluster/migration_record.h"
#include "fuzz/fuzz_util.h"

namespace {
using namespace rkv;
using cluster::ClusterRequest;
using cluster::ClusterResult;
using cluster::MigrationRecord;

constexpr size_t kRequestSumAt = 24, kMigrationSumAt = 32;

void Seeds(const fuzz::SeedWriter& w) {
  w.Write("request-rebalance",
          ClusterRequest{ClusterRequest::kRebalance, 0x1122334455667788, 0}.Encode());
  w.Write("request-remove", ClusterRequest{ClusterRequest::kRemove, 42, 3}.Encode());
  ClusterResult r;
  r.nonce = 42;
  r.assigned = 16384;
  r.moved = 0;
  r.message = "16384 unassigned slot(s) given, 0 slot(s) moved; 3 live server(s)";
  w.Write("result-ok", r.Encode());
  r.code = Code::kTimeout;
  r.message = "";
  w.Write("result-empty", r.Encode());
  r.code = Code::kUnavailable;
  r.message = std::string(cluster::kMaxResultMessage, 'x');
  w.Write("result-longest", r.Encode());
  MigrationRecord m;
  m.nonce = 7;
  m.from_id = 1;
  m.to_id = 2;
  m.slots = {4};
  w.Write("migration-one", m.Encode());
  m.state = MigrationRecord::kDone;
  m.slots = {0, 1, 2, 100, 65535};
  w.Write("migration-done", m.Encode());
  m.state = MigrationRecord::kFailed;
  m.slots.clear();
  for (uint32_t s = 0; s < 256; ++s) m.slots.push_back(s * 64);
  w.Write("migration-batch", m.Encode());
}

// The input with its checksum field (8 bytes at `at`) set to what the decoders compute.
std::string Sealed(std::string_view in, size_t at) {
  std::string out(in);
  if (out.size() < at + 8) return out;
  std::memset(&out[at], 0, 8);
  const uint64_t sum = XXH3_64bits(out.data(), out.size());
  for (int i = 0; i < 8; ++i) out[at + i] = char((sum >> (8 * i)) & 0xff);
  return out;
}

bool IsPrintable(std::string_view s) {
  for (char c : s)
    if (uint8_t(c) < 0x20 || uint8_t(c) >= 0x7f) return false;
  return true;
}

void CheckRequest(std::string_view in) {
  ClusterRequest q;
  Status s = ClusterRequest::Decode(in, &q);
  if (!s.ok()) {
    FUZZ_CHECK(s.code() == Code::kProtocolError && !s.message().empty());
    return;
  }
  FUZZ_CHECK(in.size() == cluster::kRequestBytes);
  FUZZ_CHECK(q.kind == ClusterRequest::kRebalance || q.kind == ClusterRequest::kRemove);
  FUZZ_CHECK((q.kind == ClusterRequest::kRemove) == (q.server_id != 0));
  FUZZ_CHECK(q.Encode() == in);
}

void CheckResult(std::string_view in) {
  ClusterResult r;
  Status s = ClusterResult::Decode(in, &r);
  if (!s.ok()) {
    FUZZ_CHECK(s.code() == Code::kProtocolError && !s.message().empty());
    return;
  }
  FUZZ_CHECK(in.size() >= cluster::kRequestBytes &&
             in.size() <= cluster::kRequestBytes + cluster::kMaxResultMessage);
  FUZZ_CHECK(IsPrintable(r.message));
  FUZZ_CHECK(r.message.size() <= cluster::kMaxResultMessage);
  const std::string again = r.Encode();
  ClusterResult d;
  FUZZ_CHECK(ClusterResult::Decode(again, &d).ok());
  FUZZ_CHECK(d.code == r.code && d.nonce == r.nonce && d.assigned == r.assigned &&
             d.moved == r.moved);
  FUZZ_CHECK(r.message == in.substr(cluster::kRequestBytes));
  FUZZ_CHECK(again == in);
}

void CheckMigration(std::string_view in) {
  MigrationRecord m;
  Status s = MigrationRecord::Decode(in, &m);
  if (!s.ok()) {
    FUZZ_CHECK(s.code() == Code::kProtocolError && !s.message().empty());
    return;
  }
  FUZZ_CHECK(m.state >= MigrationRecord::kCopy && m.state <= MigrationRecord::kFailed);
  FUZZ_CHECK(m.from_id != m.to_id);
  FUZZ_CHECK(!m.slots.empty() && m.slots.size() <= cluster::kMaxMigrationSlots);
  // Version 1 (MOVE, ADD_REPLICA): a 40-byte header; version 2 (REPLACE_BACKUP, HANDOVER): 48.
  FUZZ_CHECK(in.size() == (m.kind > MigrationRecord::kAddReplica ? 48 : 40) + 4 * m.slots.size());
  for (size_t i = 1; i < m.slots.size(); ++i) FUZZ_CHECK(m.slots[i - 1] < m.slots[i]);
  FUZZ_CHECK(m.Encode() == in);
}

}  // namespace

RKV_FUZZ_SEEDS(Seeds)

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view in = fuzz::AsText(data, size);
  CheckRequest(in);
  CheckRequest(Sealed(in, kRequestSumAt));
  CheckResult(in);
  CheckResult(Sealed(in, kRequestSumAt));
  CheckMigration(in);
  CheckMigration(Sealed(in, kMigrationSumAt));
  return 0;
}
