// SPDX-License-Identifier: Apache-2.0
#include "server/metrics/metrics_http_server.h"

#include <dirent.h>
#include <glog/logging.h>
#include <httplib.h>
#include <netdb.h>
#include <netinet/in.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <exception>

#include "server/metrics/bounded_task_queue.h"
#include "server/metrics/guarded_http_server.h"
#include "server/metrics/prometheus_text.h"

namespace rkv::metrics {
namespace {

void ListenSocketOptions(int sock) {
  int yes = 1;
  setsockopt(sock, SOL_SOCKET, SO_REUSEADDR, &yes, sizeof yes);  // no SO_REUSEPORT
}

}  // namespace

MetricsHttpServer::MetricsHttpServer(std::function<std::string()> page)
    : MetricsHttpServer(std::move(page), Limits()) {}

MetricsHttpServer::MetricsHttpServer(std::function<std::string()> page, Limits limits)
    : gate_(std::make_shared<PageGate>()), limits_(limits) {
  gate_->page = std::move(page);
}

MetricsHttpServer::~MetricsHttpServer() { Stop(); }

Status MetricsHttpServer::Start(const std::string& host_in, uint16_t port) {
  if (http_) return Status(Code::kInvalidArgument, "metrics endpoint already started");
  std::string host = host_in;
  if (host.size() >= 2 && host.front() == '[' && host.back() == ']')
    host = host.substr(1, host.size() - 2);
  const std::string where = host_in + ":" + std::to_string(port);

  const Limits lim = limits_;
  GuardedHttpServer::Bounds bounds;
  bounds.head_max = lim.head_max;
  bounds.io_timeout_ms = lim.io_timeout_ms;
  bounds.connection_deadline_ms = lim.connection_deadline_ms;
  bounds.keepalive_timeout_ms = lim.keepalive_timeout_s * 1000;
  bounds.keepalive_max = lim.keepalive_max;
  auto http = std::make_unique<GuardedHttpServer>(bounds);
  http->new_task_queue = [lim] { return new BoundedTaskQueue(lim.threads, lim.max_queued); };
  http->set_socket_options(ListenSocketOptions);
  http->set_read_timeout(lim.io_timeout_ms / 1000, (lim.io_timeout_ms % 1000) * 1000);
  http->set_write_timeout(lim.io_timeout_ms / 1000, (lim.io_timeout_ms % 1000) * 1000);
  http->set_keep_alive_timeout(lim.keepalive_timeout_s);
  http->set_keep_alive_max_count(lim.keepalive_max);
  http->set_payload_max_length(0);  // GET only: any body is refused (413) before it is read
  http->set_pre_routing_handler([](const httplib::Request& req, httplib::Response& res) {
    if (req.method == "GET" || req.method == "HEAD")
      return httplib::Server::HandlerResponse::Unhandled;
    res.status = 405;
    res.set_header("Allow", "GET, HEAD");
    res.set_content("only GET /metrics\n", "text/plain");
    return httplib::Server::HandlerResponse::Handled;
  });
  // Through the gate: once Stop has closed it, a late request gets 503 and never reaches the
  // page callback (whose sources the owner destroys after Stop).
  http->Get("/metrics", [gate = gate_](const httplib::Request&, httplib::Response& res) {
    std::lock_guard<std::mutex> l(gate->mu);
    if (!gate->open) {
      res.status = 503;
      res.set_content("stopping\n", "text/plain");
      return;
    }
    res.set_content(gate->page(), kContentType);
  });
  http->set_error_handler([](const httplib::Request&, httplib::Response& res) {
    if (res.body.empty()) {
      res.set_content(res.status == 404 ? "not found: the metrics are at /metrics\n"
                                        : "error " + std::to_string(res.status) + "\n",
                      "text/plain");
    }
  });
  http->set_exception_handler(
      [](const httplib::Request&, httplib::Response& res, std::exception_ptr ep) {
        try {
          if (ep) std::rethrow_exception(ep);
        } catch (const std::exception& e) {
          LOG(ERROR) << "metrics endpoint: " << e.what();
        } catch (...) {
          LOG(ERROR) << "metrics endpoint: unknown exception";
        }
        res.status = 500;
        res.set_content("internal error\n", "text/plain");
      });

  errno = 0;
  int bound_port = -1;
  if (port == 0) {
    bound_port = http->bind_to_any_port(host);
  } else if (http->bind_to_port(host, port)) {
    bound_port = port;
  }
  if (bound_port <= 0) {
    int e = errno;
    return Status(
        Code::kInvalidArgument,
        "cannot listen on " + where + ": " +
            (e != 0 ? std::string(std::strerror(e)) : std::string("not an address of this host")));
  }
  port_ = uint16_t(bound_port);
  http_ = std::move(http);
  done_.store(false);
  thread_ = std::thread([this] {
    try {
      if (!http_->listen_after_bind()) LOG(ERROR) << "metrics endpoint: accept loop failed";
    } catch (const std::exception& e) {
      LOG(ERROR) << "metrics endpoint: " << e.what();
    } catch (...) {
      LOG(ERROR) << "metrics endpoint: unknown exception";
    }
    done_.store(true);
  });
  return Status::Ok();
}

void MetricsHttpServer::Stop() {
  if (!http_) return;
  {
    std::lock_guard<std::mutex> l(gate_->mu);  // waits for a page being rendered
    gate_->open = false;
  }
  const auto deadline =
      std::chrono::steady_clock::now() + std::chrono::milliseconds(limits_.stop_deadline_ms);
  while (!done_.load()) {
    // Again each round: stop() does nothing until the accept loop has marked itself running.
    http_->stop();
    http_->ShutdownClients();
    if (std::chrono::steady_clock::now() > deadline) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  if (done_.load()) {
    thread_.join();
    http_.reset();
  } else {
    LOG(ERROR) << "metrics endpoint: its threads did not stop within " << limits_.stop_deadline_ms
               << " ms; left to end on their own";
    thread_.detach();
    (void)http_.release();  // still used by those threads (which no longer reach the page)
  }
}

}  // namespace rkv::metrics
