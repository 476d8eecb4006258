// SPDX-License-Identifier: Apache-2.0
#include "server/metrics/bounded_task_queue.h"

#include <glog/logging.h>

#include <chrono>
#include <exception>

#include "server/metrics/guarded_http_server.h"

namespace rkv::metrics {

BoundedTaskQueue::BoundedTaskQueue(size_t threads, size_t max_queued) : max_queued_(max_queued) {
  try {
    for (size_t i = 0; i < threads; ++i) threads_.emplace_back([this] { Loop(); });
  } catch (...) {
    shutdown();  // joins the threads already started (a joinable std::thread must not unwind)
    throw;
  }
}

BoundedTaskQueue::~BoundedTaskQueue() { shutdown(); }

void BoundedTaskQueue::Run(const std::function<void()>& fn) {
  try {
    fn();
  } catch (const std::exception& e) {
    LOG(ERROR) << "metrics endpoint: " << e.what();
  } catch (...) {
    LOG(ERROR) << "metrics endpoint: unknown exception";
  }
}

void BoundedTaskQueue::enqueue(std::function<void()> fn) {
  {
    std::lock_guard<std::mutex> l(mu_);
    if (!stop_ && tasks_.size() < max_queued_ && !threads_.empty()) {
      tasks_.push_back(std::move(fn));
      cv_.notify_one();
      return;
    }
  }
  LOG_EVERY_N(WARNING, 100) << "metrics endpoint: more connections than it serves at once; "
                               "closing the new one unserved";
  Run([&fn] { GuardedHttpServer::RunRejecting(fn); });
}

void BoundedTaskQueue::Loop() {
  for (;;) {
    std::function<void()> fn;
    {
      std::unique_lock<std::mutex> l(mu_);
      while (!stop_ && tasks_.empty()) cv_.wait_for(l, std::chrono::seconds(1));
      if (tasks_.empty()) return;  // stopping, nothing left
      fn = std::move(tasks_.front());
      tasks_.pop_front();
    }
    Run(fn);
  }
}

void BoundedTaskQueue::shutdown() {
  {
    std::lock_guard<std::mutex> l(mu_);
    stop_ = true;
  }
  cv_.notify_all();
  for (auto& t : threads_)
    if (t.joinable()) t.join();
  threads_.clear();
}

}  // namespace rkv::metrics
