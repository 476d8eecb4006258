// SPDX-License-Identifier: Apache-2.0
// Verbs-side connection setup shared by client and server: opening a device, filling this
// side's parameter record from the port and the user's settings, moving a manually created QP
// through INIT/RTR/RTS (validator first), and reading back what a QP really uses.
//
// The decisions (attributes, masks, rules) are made by the pure functions of qp_plan.h; this
// file only queries and programs the device, and reports each failed call with its errno text.
// Thread safety: stateless functions; a QP must not be modified concurrently by two threads.
#ifndef RKV_COMMON_VERBS_QP_SETUP_H_
#define RKV_COMMON_VERBS_QP_SETUP_H_

#include <infiniband/verbs.h>

#include <string>

#include "common/verbs/conn_params.h"
#include "common/verbs/rdma.h"
#include "rkv/connection_params.h"
#include "rkv/status.h"

namespace rkv {

// Opens the RDMA device called `name`, or the first one if empty.
[[nodiscard]] Status OpenDevice(const std::string& name, ContextPtr* out);
// Opens the device whose GID table holds the IPv4 address `ipv4` (network order) as an
// IPv4-mapped RoCE GID; *port and *gid_index say where. NOT_FOUND if no device has it.
[[nodiscard]] Status OpenDeviceByAddress(uint32_t ipv4, ContextPtr* out, int* port, int* gid_index);

// The device a manual-mode side uses: s->device if set; else the one whose GID table holds
// `local_ipv4` (non-zero: the exchange's TCP address), which also fills s->port and
// s->gid_index when unset; else the first device.
[[nodiscard]] Status OpenDeviceFor(uint32_t local_ipv4, QpSettings* s, ContextPtr* out);

// A 24-bit PSN from the kernel's CSPRNG (SecureRandom::Psn), never 0: independent of every
// other PSN, so one disclosed (a CHECK reply carries the server's record) predicts nothing.
[[nodiscard]] Status RandomPsn(uint32_t* out);

// Fills everything of *p that comes from the port and the settings: link layer, LID, GID and
// its index, active/path MTU, P_Key index and value, SL, rd_atomic depths (device max capped
// at 16 when unset), timers, PSN. qp_num and the memory parameters are left to the caller.
[[nodiscard]] Status FillLocalParams(ibv_context* ctx, const QpSettings& s, ConnParams* p);

// rd_atomic depths: `want` if set (>= 0), else the device maximum capped at 16.
uint8_t RdAtomicDepth(int want, int dev_max);
// kInvalidArgument if the settings ask for more READs in flight than the device allows.
[[nodiscard]] Status CheckRdAtomicLimits(const ibv_device_attr& da, const QpSettings& s);

// RESET -> INIT with this side's port, P_Key index and access flags.
[[nodiscard]] Status ModifyQpToInit(ibv_qp* qp, const ConnParams& self, int access_flags);

// Plans the QP from both records (PlanQp), runs the validator, and on success moves the QP
// INIT -> RTR -> RTS. A broken rule returns kParamMismatch naming every violated rule with
// both values; nothing is programmed then. *note gets the MTU negotiation remark, if any.
[[nodiscard]] Status ConnectQp(ibv_qp* qp, const ConnParams& self, const ConnParams& peer,
                               const QpSettings& s, int access_flags, std::string* note);
// The validator alone (no device access): empty if the records are compatible.
std::string CheckParams(const ConnParams& self, const ConnParams& peer, const QpSettings& s);

// Reads back what `qp` really uses (ibv_query_qp, ibv_query_port, ibv_query_gid/pkey):
// *local gets this side's values, *peer the peer's as this QP addresses it (dest QP number,
// rq_psn, dlid/dgid, its path MTU). Memory parameters are left untouched.
[[nodiscard]] Status ReadBackParams(ibv_qp* qp, ConnParams* local, ConnParams* peer);

}  // namespace rkv

#endif  // RKV_COMMON_VERBS_QP_SETUP_H_
