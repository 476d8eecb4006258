// SPDX-License-Identifier: Apache-2.0
// BoundedTaskQueue: the thread pool cpp-httplib runs the metrics endpoint's connections on
// (httplib::Server::new_task_queue). `threads` threads; at most `max_queued` accepted
// connections wait for one. Beyond that the task runs on the caller, httplib's accept thread,
// with GuardedHttpServer::RunRejecting: it closes its socket unserved at once, so the accept
// thread is never held by a client. A task is never dropped: it owns its socket and closes it.
// No exception escapes a thread: each task runs inside a catch-all (logged).
// Thread safety: enqueue() from httplib's accept thread, shutdown() once (httplib calls it when
// its accept loop ends; it runs what is queued, whose sockets then close at once since the
// server is stopped, and joins the threads); every wait has a deadline.
// Ownership: owned by httplib::Server (it deletes the queue after shutdown()).
#ifndef RKV_SERVER_METRICS_BOUNDED_TASK_QUEUE_H_
#define RKV_SERVER_METRICS_BOUNDED_TASK_QUEUE_H_

#include <httplib.h>

#include <condition_variable>
#include <cstddef>
#include <deque>
#include <functional>
#include <mutex>
#include <thread>
#include <vector>

namespace rkv::metrics {

class BoundedTaskQueue : public httplib::TaskQueue {
 public:
  BoundedTaskQueue(size_t threads, size_t max_queued);
  ~BoundedTaskQueue() override;
  BoundedTaskQueue(const BoundedTaskQueue&) = delete;
  BoundedTaskQueue& operator=(const BoundedTaskQueue&) = delete;

  void enqueue(std::function<void()> fn) override;
  void shutdown() override;

 private:
  static void Run(const std::function<void()>& fn);
  void Loop();

  const size_t max_queued_;
  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<std::function<void()>> tasks_;  // guarded by mu_
  bool stop_ = false;                        // guarded by mu_
  std::vector<std::thread> threads_;
};

}  // namespace rkv::metrics

#endif  // RKV_SERVER_METRICS_BOUNDED_TASK_QUEUE_H_
