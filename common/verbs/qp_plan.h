// SPDX-License-Identifier: Apache-2.0
// QP planning for manual connection mode: from this side's parameter record, the peer's record
// and the user's overrides, the attributes this side will program into its QP (QpPlan); the
// rules of ../shared/seeds/001_* checked on that plan before RTR (ValidatePlan); and the
// ibv_modify_qp attributes and masks of RESET->INIT->RTR->RTS (BuildTransitions).
//
// All three are pure (no device access), so both link layers are unit-tested here even where
// only one can run: RoCE/Ethernet routes with a GRH (is_global=1, dgid, sgid_index, hop limit,
// traffic class); InfiniBand routes by LID (dlid, sl, src_path_bits) and adds a GRH only when
// either side asks for one.
// Thread safety: pure functions.
#ifndef RKV_COMMON_VERBS_QP_PLAN_H_
#define RKV_COMMON_VERBS_QP_PLAN_H_

#include <infiniband/verbs.h>

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "common/verbs/conn_params.h"

namespace rkv {

// Values a user (or a test that breaks a rule on purpose) forces instead of the derived ones.
struct QpOverrides {
  std::optional<uint32_t> rq_psn;
  std::optional<uint32_t> dest_qp_num;
  std::optional<uint16_t> dlid;
};

struct QpPlan {
  Transport transport = Transport::kRC;
  uint8_t link_layer = kLinkEthernet;
  uint8_t port_num = 1;
  uint8_t pkey_index = 0;
  uint16_t pkey = 0;  // value at pkey_index (for the validator)
  uint32_t qkey = 0;
  int access_flags = 0;  // RC/UC: remote access this QP grants (server: IBV_ACCESS_REMOTE_READ)
  uint8_t path_mtu = 0;  // enum ibv_mtu
  std::string mtu_note;  // set when the path MTU was negotiated down
  uint32_t dest_qp_num = 0;
  uint32_t rq_psn = 0;
  uint32_t sq_psn = 0;
  uint8_t max_rd_atomic = 0;
  uint8_t max_dest_rd_atomic = 0;
  uint8_t min_rnr_timer = 0;
  uint8_t timeout = 0;
  uint8_t retry_cnt = 0;
  uint8_t rnr_retry = 0;
  ibv_ah_attr ah{};
};

QpPlan PlanQp(const ConnParams& self, const ConnParams& peer, const QpOverrides& overrides,
              int access_flags);

// One broken rule: `rule` is a short name (pkey, psn, qpn, path_mtu, rd_atomic, port, lid,
// gid, qkey, transport, link_layer); `message` names the rule and both values.
struct Violation {
  std::string rule;
  std::string message;
};
std::vector<Violation> ValidatePlan(const QpPlan& plan, const ConnParams& self,
                                    const ConnParams& peer);
// "rule: message; rule: message" for an error Status.
std::string JoinViolations(const std::vector<Violation>& v);

struct QpTransition {
  ibv_qp_attr attr{};
  int mask = 0;
};
struct QpTransitions {
  QpTransition init, rtr, rts;
};
QpTransitions BuildTransitions(const QpPlan& plan);

}  // namespace rkv

#endif  // RKV_COMMON_VERBS_QP_PLAN_H_
