// SPDX-License-Identifier: Apache-2.0
#include "server/conn/conn.h"

#include <glog/logging.h>

#include <cstring>

#include "common/verbs/rdma.h"
#include "server/conn/worker.h"

namespace rkv {

Conn::Conn(Kind k, uint64_t serial_no, int slot_index, int worker_idx, Worker* worker,
           ConnOwner* owner, rdma_cm_id* id, ibv_qp* qp, const uint8_t* nonce, uint32_t peer_qp_num,
           std::unique_ptr<PrivateDomain> domain)
    : kind(k),
      serial(serial_no),
      slot(slot_index),
      worker_index(worker_idx),
      qpn(qp->qp_num),
      qp_handle(qp),
      created(Clock::now()),
      peer_qpn(peer_qp_num),
      worker_(worker),
      owner_(owner),
      id_(id),
      qp_(qp),
      domain_(std::move(domain)) {
  std::memcpy(server_nonce, nonce, sizeof server_nonce);
}

Conn::~Conn() {
  if (qp_ != nullptr) {
    MoveQpToError(qp_);
    DestroyVerbs(false);
  } else if (id_ != nullptr) {
    DestroyVerbs(false);
  }
  ReleaseGrant();
}

bool Conn::MarkEstablished(bool* counted) {
  *counted = false;
  State expected = State::kSetup;
  if (state_.compare_exchange_strong(expected, State::kEstablished)) {
    *counted = true;
    return true;
  }
  return expected == State::kOpen;
}

bool Conn::MarkOpen(bool* from_setup) {
  *from_setup = false;
  State s = state_.load();
  while (s == State::kSetup || s == State::kEstablished) {
    State was = s;
    if (state_.compare_exchange_weak(s, State::kOpen)) {
      *from_setup = was == State::kSetup;
      source_lease.Opened();  // no longer counts against --max_pending_per_source
      return true;
    }
  }
  return s == State::kOpen;
}

bool Conn::RequestClose(const std::string& reason) {
  State s = state_.load();
  while (s == State::kSetup || s == State::kEstablished || s == State::kOpen) {
    State was = s;
    if (state_.compare_exchange_weak(s, State::kClosing)) {
      closed_established_.store(was == State::kEstablished || was == State::kOpen);
      {
        MutexLock l(&mu_);
        close_reason_ = reason;
      }
      // Still counted against its source until destroyed, but refusals name it closing from
      // now on (before the worker gets to it: the acceptor may meet the same host's next
      // connect first). Exactly once: only the winner of this exchange gets here.
      source_lease.Closing();
      worker_->Close(shared_from_this());
      return true;
    }
  }
  return false;
}

void Conn::NotifyLastWqe() { worker_->LastWqe(shared_from_this()); }

std::string Conn::close_reason() const {
  MutexLock l(&mu_);
  return close_reason_;
}

void Conn::DestroyVerbs(bool leak_qp) {
  if (id_ != nullptr) rdma_disconnect(id_);  // DREQ (or DREP); fails harmlessly if gone
  // The QP is in ERR and drained (or leaked): revoke the rkey now, before the QP is destroyed. A
  // bound type-2 window holds a reference on its QP (rxe), so destroying the QP first would
  // wait for the window forever.
  ReleaseGrant();
  if (qp_ != nullptr && !leak_qp) {
    // ibv_destroy_qp also for rdma_cm's QP (what rdma_destroy_qp does, but with its result).
    if (int rc = ibv_destroy_qp(qp_); rc != 0) {
      LOG(ERROR) << "ibv_destroy_qp(qp " << qpn << ") failed: " << std::strerror(rc);
      if (domain_) (void)domain_.release();  // the QP may still use its PD and buffers
    }
    if (id_ != nullptr) id_->qp = nullptr;  // rdma_destroy_id must not see it
  } else if (qp_ != nullptr) {
    LOG(ERROR) << "qp " << qpn << " did not drain; leaking it (its number stays allocated)";
    if (id_ != nullptr) id_->qp = nullptr;  // rdma_destroy_id must not see it
    // Its receives may still complete into the domain's buffers, and its PD cannot go while
    // it exists: the domain is leaked with it.
    if (domain_) (void)domain_.release();
  }
  qp_ = nullptr;
  domain_.reset();  // after the QP: deregisters its buffers, deallocates its PD
  if (id_ != nullptr) {
    if (rdma_destroy_id(id_) != 0)
      LOG(ERROR) << "rdma_destroy_id(qp " << qpn << ") failed: " << std::strerror(errno);
    id_ = nullptr;
  }
}

void Conn::ReleaseGrant() {
  if (mw_ != nullptr) {
    if (int rc = ibv_dealloc_mw(mw_); rc != 0)
      LOG(ERROR) << "ibv_dealloc_mw(qp " << qpn << ") failed: " << std::strerror(rc);
    mw_ = nullptr;
  }
  if (client_mr_ != nullptr) {
    if (int rc = ibv_dereg_mr(client_mr_); rc != 0)
      LOG(ERROR) << "ibv_dereg_mr(qp " << qpn << " region) failed: " << std::strerror(rc);
    client_mr_ = nullptr;
  }
}

const char* Conn::StateName(State s) {
  switch (s) {
    case State::kSetup:
      return "setup";
    case State::kEstablished:
      return "established";
    case State::kOpen:
      return "open";
    case State::kClosing:
      return "closing";
    case State::kDrained:
      return "drained";
  }
  return "?";
}

}  // namespace rkv
