// SPDX-License-Identifier: Apache-2.0
#include "common/cluster/ring_loss_record.h"

#include <utility>

#include "common/cluster/le_bytes.h"

namespace rkv::cluster {
namespace {

constexpr size_t kChecksumAt = 8, kServerAt = 16, kCountAt = 20, kEpochAt = 24;
static_assert(kEpochAt + 8 == kRingLossHeaderBytes, "ring loss record layout");

Status Bad(const std::string& why) {
  return Status(Code::kProtocolError, "ring loss record: " + why);
}

bool Ascending(const std::vector<uint32_t>& slots) {
  for (size_t i = 1; i < slots.size(); ++i)
    if (slots[i] <= slots[i - 1]) return false;
  return true;
}

}  // namespace

std::string RingLossRecord::KeySuffix() const { return "ringloss/" + std::to_string(server); }

Status RingLossRecord::Encode(std::string* out) const {
  if (server == 0 || slots.empty() || slots.size() > kRingLossMaxSlots || !Ascending(slots))
    return Status(Code::kInvalidArgument, "ring loss record: a server id > 0 and 1.." +
                                              std::to_string(kRingLossMaxSlots) +
                                              " slots in ascending order");
  out->assign(kRingLossHeaderBytes, '\0');
  PutLE(out, 0, kRingLossMagic, 4);
  PutLE(out, 4, kRingLossVersion, 2);
  PutLE(out, kServerAt, server, 4);
  PutLE(out, kCountAt, uint32_t(slots.size()), 4);
  PutLE(out, kEpochAt, map_epoch, 8);
  for (uint32_t s : slots) AppendLE(out, s, 4);
  PutLE(out, kChecksumAt, ChecksumWithFieldZeroed(*out, kChecksumAt), 8);
  return Status::Ok();
}

Status RingLossRecord::Decode(std::string_view key_suffix, std::string_view in,
                              RingLossRecord* out) {
  if (in.size() < kRingLossHeaderBytes) return Bad(std::to_string(in.size()) + " bytes");
  const uint64_t count = GetLE(in, kCountAt, 4);
  if (count == 0 || count > kRingLossMaxSlots) return Bad("a count of " + std::to_string(count));
  const std::string problem = FixedRecordProblem(in, kRingLossHeaderBytes + 4 * count,
                                                 kRingLossMagic, kRingLossVersion, kChecksumAt);
  if (!problem.empty()) return Bad(problem);
  RingLossRecord r;
  r.server = uint32_t(GetLE(in, kServerAt, 4));
  r.map_epoch = GetLE(in, kEpochAt, 8);
  r.slots.reserve(count);
  for (size_t i = 0; i < count; ++i)
    r.slots.push_back(uint32_t(GetLE(in, kRingLossHeaderBytes + 4 * i, 4)));
  if (GetLE(in, 6, 2) != 0 || r.server == 0 || !Ascending(r.slots)) return Bad("malformed fields");
  if (key_suffix != r.KeySuffix()) return Bad("the key does not name the record's server");
  *out = std::move(r);
  return Status::Ok();
}

}  // namespace rkv::cluster
