// SPDX-License-Identifier: Apache-2.0
// WritePool: runs PUT and DELETE requests on threads of their own when they may block, that is
// on a durable server, where each waits for its log record's group commit
// (server/durability/durable_log.h). A worker hands the request over and goes on serving its
// other connections; the pool thread executes it (RpcExecutor) and gives the reply back to the
// connection's worker (Worker::Reply), which alone posts on the QP. Concurrent writes from all
// clients therefore share syncs: the group grows with the number of clients, up to the number
// of pool threads.
// Bounds: at most `max_jobs` requests queued (the workers' credit accounting already bounds them
// by max_connections x request credits; Submit returns false beyond, and the worker then
// executes the request itself).
// Thread safety: Submit from any thread. Stop() drops queued jobs (their connections are being
// torn down with the server) and joins the threads; a running job finishes first (bounded by
// the log's commit timeout).
// Ownership: a job holds a reference to its Conn until its reply is handed to the worker; the
// executor and the workers must outlive the pool (the Server stops it before either goes).
#ifndef RKV_SERVER_WRITE_POOL_H_
#define RKV_SERVER_WRITE_POOL_H_

#include <condition_variable>
#include <cstddef>
#include <deque>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "server/conn/conn.h"
#include "server/rpc_executor.h"

namespace rkv {

class Worker;

class WritePool {
 public:
  struct Job {
    std::shared_ptr<Conn> conn;
    Worker* worker = nullptr;  // the connection's worker: it posts the reply
    std::string request;       // the received bytes (a decoded PUT or DELETE)
  };
  WritePool(RpcExecutor* exec, int threads, size_t max_jobs);
  ~WritePool();
  WritePool(const WritePool&) = delete;
  WritePool& operator=(const WritePool&) = delete;

  void Start();
  void Stop();
  // Takes the job (moves it out) only when it returns true; false leaves it untouched.
  [[nodiscard]] bool Submit(Job* job);

 private:
  void Loop();

  RpcExecutor* const exec_;
  const int threads_;
  const size_t max_jobs_;
  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<Job> jobs_;  // guarded by mu_
  bool stop_ = false;     // guarded by mu_
  std::vector<std::thread> pool_;
};

}  // namespace rkv

#endif  // RKV_SERVER_WRITE_POOL_H_
