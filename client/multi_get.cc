// MultiGet: GETs of many keys with their READs posted together, on the same lean terms as the
// single-key path in get_path.cc (no locks, no system calls beyond posting and polling; the
// only allocation is in the caller's vectors). Per batch of up to kMaxBatch keys:
//   round 1: both candidate buckets of every key (one READ per key);
//   round 2: every heap block and overflow target those buckets point at, together, as many as
//            fit the buffer's block and overflow areas;
// then whatever is left (an entry torn or changed between the rounds, a target that did not
// fit) finishes through the single-key attempt loop.
#include "client/client_impl.h"

namespace rkv {

using layout::kBucketSize;
using layout::kSlotSize;
using layout::Probe;

namespace {
constexpr int kMaxOps = 4 * Connection::kMaxBatch;  // READs in one post (PostReads' limit)
constexpr uint64_t kBlockAreaSize = Connection::kSendArea - Connection::kBlockArea;
constexpr uint64_t kOverflowAreaSize = Connection::kBlockArea - Connection::kOverflowArea;
}  // namespace

Status ClientImpl::MultiGet(const std::vector<std::string_view>& keys,
                            std::vector<std::string>* values, std::vector<Status>* statuses) {
  values->resize(keys.size());
  statuses->assign(keys.size(), Status::Ok());
  Status s = Usable();
  if (!s.ok()) return s;
  const wire::ServerHello& h = conn_->hello();
  for (size_t start = 0; start < keys.size(); start += Connection::kMaxBatch) {
    const size_t n = std::min<size_t>(Connection::kMaxBatch, keys.size() - start);
    Connection::ReadOp ops[kMaxOps];
    layout::KeyHash kh[Connection::kMaxBatch];
    int nops = 0;
    for (size_t i = 0; i < n; ++i) {
      kh[i] = layout::HashKey(keys[start + i], h.hash_seed, h.num_buckets);
      ops[nops++] = {Connection::kBucketArea + i * 2 * kBucketSize,
                     uint64_t(kh[i].bucket[0]) * h.bucket_size, 2 * kBucketSize};
    }
    attempt_start_ = std::chrono::steady_clock::now();
    s = RoundTrip(ops, nops);
    if (!s.ok()) return s;

    // Decide from the buckets; plan the second round for heap and overflow entries.
    enum Next : uint8_t { kDone, kSecond, kSingle };
    Next next[Connection::kMaxBatch];
    Probe probe[Connection::kMaxBatch];
    int first_op[Connection::kMaxBatch] = {}, op_count[Connection::kMaxBatch] = {};
    nops = 0;
    uint64_t block_used = 0, overflow_used = 0;
    for (size_t i = 0; i < n; ++i) {
      std::string_view key = keys[start + i];
      Status& st = (*statuses)[start + i];
      next[i] = kDone;
      st = CheckKey(key);
      if (!st.ok()) continue;
      ++counters_.gets;
      const uint8_t* b = conn_->buf() + Connection::kBucketArea + 2 * i * kBucketSize;
      Probe& p = probe[i];
      p = layout::ProbeBuckets(b, b + kBucketSize, key, kh[i], h.hash_seed);
      if (p.outcome == Probe::kFound) {
        (*values)[start + i].assign(p.value);
        continue;
      }
      if (p.outcome == Probe::kAbsent) {
        st = Status(Code::kNotFound, "");
        continue;
      }
      next[i] = kSingle;
      if (p.outcome == Probe::kTorn) continue;
      // kIndirect: the block; kOverflow: every matching ref's target.
      const int saved_ops = nops;
      const uint64_t saved_block = block_used, saved_overflow = overflow_used;
      bool planned = true;
      auto plan = [&](bool block, uint64_t remote, uint32_t len) {
        uint64_t& used = block ? block_used : overflow_used;
        uint64_t area = block ? kBlockAreaSize : kOverflowAreaSize;
        if (nops == kMaxOps || used + len > area || remote + len > h.region_size) {
          planned = false;
          return;
        }
        ops[nops++] = {(block ? Connection::kBlockArea : Connection::kOverflowArea) + used, remote,
                       len};
        used += (len + 7) & ~uint64_t{7};
      };
      if (p.outcome == Probe::kIndirect) {
        plan(true, p.slot.block_offset, layout::BlockBytes(p.slot.key_size, p.slot.value_size));
      } else {
        for (int r = 0; r < p.ref_count && planned; ++r) {
          const layout::Ref& ref = p.refs[r];
          bool block = ref.type == layout::Ref::kBlock;
          plan(block, ref.offset, block ? ref.length : kSlotSize);
        }
      }
      if (!planned) {  // the single-key loop reads it (and reports what is wrong, if anything)
        nops = saved_ops;
        block_used = saved_block;
        overflow_used = saved_overflow;
        continue;
      }
      next[i] = kSecond;
      first_op[i] = saved_ops;
      op_count[i] = nops - saved_ops;
    }

    if (nops > 0) {
      s = RoundTrip(ops, nops);
      if (!s.ok()) return s;
      // Refs carry 32-bit versions: see ReadRefs in get_path.cc.
      const bool refs_fresh =
          std::chrono::steady_clock::now() - attempt_start_ <= std::chrono::seconds(1);
      for (size_t i = 0; i < n; ++i) {
        if (next[i] != kSecond) continue;
        std::string_view key = keys[start + i];
        const Probe& p = probe[i];
        bool found = false, retry = false;
        if (p.outcome == Probe::kIndirect) {
          const Connection::ReadOp& op = ops[first_op[i]];
          std::string_view k, v;
          if (!layout::DecodeBlock(conn_->buf() + op.local_offset, op.length, h.hash_seed, p.slot,
                                   &k, &v)) {
            retry = true;  // block rewritten or reused since round 1
          } else if (k == key) {
            (*values)[start + i].assign(v);
            found = true;
          }
        } else if (!refs_fresh) {
          retry = true;
        } else {
          for (int r = 0; r < op_count[i] && !found; ++r) {
            const Connection::ReadOp& op = ops[first_op[i] + r];
            Probe t = layout::ProbeRef(conn_->buf() + op.local_offset, p.refs[r], key, kh[i],
                                       h.hash_seed);
            if (t.outcome == Probe::kFound) {
              (*values)[start + i].assign(t.value);
              found = true;
            }
            retry |= t.outcome == Probe::kTorn || t.outcome == Probe::kIndirect;
          }
        }
        if (found) {
          next[i] = kDone;
        } else if (retry) {
          ++counters_.checksum_retries;
          next[i] = kSingle;
        } else {
          (*statuses)[start + i] = Status(Code::kNotFound, "");
          next[i] = kDone;
        }
      }
    }
    for (size_t i = 0; i < n; ++i) {
      if (next[i] != kSingle) continue;
      Status& st = (*statuses)[start + i];
      st = ReadKey(keys[start + i], &(*values)[start + i]);
      if (st.code() == Code::kConnectionLost || st.code() == Code::kTimeout) return st;
    }
  }
  return Status::Ok();
}

}  // namespace rkv
