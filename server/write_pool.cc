// SPDX-License-Identifier: Apache-2.0
#include "server/write_pool.h"

#include "server/conn/worker.h"

namespace rkv {

WritePool::WritePool(RpcExecutor* exec, int threads, size_t max_jobs)
    : exec_(exec), threads_(threads), max_jobs_(max_jobs) {}

WritePool::~WritePool() { Stop(); }

void WritePool::Start() {
  for (int i = 0; i < threads_; ++i) pool_.emplace_back([this] { Loop(); });
}

void WritePool::Stop() {
  {
    std::lock_guard<std::mutex> l(mu_);
    stop_ = true;
    jobs_.clear();
  }
  cv_.notify_all();
  for (auto& t : pool_) t.join();
  pool_.clear();
}

bool WritePool::Submit(Job* job) {
  {
    std::lock_guard<std::mutex> l(mu_);
    if (stop_ || jobs_.size() >= max_jobs_) return false;
    jobs_.push_back(std::move(*job));
  }
  cv_.notify_one();
  return true;
}

void WritePool::Loop() {
  for (;;) {
    Job job;
    {
      std::unique_lock<std::mutex> l(mu_);
      cv_.wait(l, [this] { return stop_ || !jobs_.empty(); });
      if (stop_) return;
      job = std::move(jobs_.front());
      jobs_.pop_front();
    }
    std::string reply(Worker::kSendSlotSize, '\0');
    bool malformed = false;
    size_t n = exec_->Execute(
        nullptr, job.conn->qpn, 0, reinterpret_cast<const uint8_t*>(job.request.data()),
        job.request.size(), reinterpret_cast<uint8_t*>(reply.data()), reply.size(), &malformed);
    reply.resize(n);
    job.worker->Reply(std::move(job.conn), std::move(reply));
  }
}

}  // namespace rkv
