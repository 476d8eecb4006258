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
#include "server/metrics/prometheus_text.h"

namespace rkv::metrics {
namespace {

void ListenSocketOptions(int sock) {
  int yes = 1;
  setsockopt(sock, SOL_SOCKET, SO_REUSEADDR, &yes, sizeof yes);  // no SO_REUSEPORT
}

uint16_t PortOf(const sockaddr_storage& a) {
  if (a.ss_family == AF_INET) return ntohs(reinterpret_cast<const sockaddr_in&>(a).sin_port);
  if (a.ss_family == AF_INET6) return ntohs(reinterpret_cast<const sockaddr_in6&>(a).sin6_port);
  return 0;
}

bool SameAddress(const sockaddr_storage& a, const sockaddr_storage& b) {
  if (a.ss_family != b.ss_family) return false;
  if (a.ss_family == AF_INET)
    return reinterpret_cast<const sockaddr_in&>(a).sin_addr.s_addr ==
           reinterpret_cast<const sockaddr_in&>(b).sin_addr.s_addr;
  if (a.ss_family == AF_INET6)
    return std::memcmp(&reinterpret_cast<const sockaddr_in6&>(a).sin6_addr,
                       &reinterpret_cast<const sockaddr_in6&>(b).sin6_addr, sizeof(in6_addr)) == 0;
  return false;
}

}  // namespace

MetricsHttpServer::MetricsHttpServer(std::function<std::string()> page)
    : MetricsHttpServer(std::move(page), Limits()) {}

MetricsHttpServer::MetricsHttpServer(std::function<std::string()> page, Limits limits)
    : page_(std::move(page)), limits_(limits) {}

MetricsHttpServer::~MetricsHttpServer() { Stop(); }

Status MetricsHttpServer::Start(const std::string& host_in, uint16_t port) {
  if (http_) return Status(Code::kInvalidArgument, "metrics endpoint already started");
  std::string host = host_in;
  if (host.size() >= 2 && host.front() == '[' && host.back() == ']')
    host = host.substr(1, host.size() - 2);
  const std::string where = host_in + ":" + std::to_string(port);

  // The address the accepted sockets will have (for Stop); the bind below decides validity.
  addrinfo hints{}, *res = nullptr;
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  hints.ai_flags = AI_PASSIVE;
  int gai = getaddrinfo(host.c_str(), "0", &hints, &res);
  if (gai != 0)
    return Status(Code::kInvalidArgument,
                  "cannot resolve '" + host_in + "': " + std::string(gai_strerror(gai)));
  std::memcpy(&bound_, res->ai_addr, std::min<size_t>(res->ai_addrlen, sizeof bound_));
  freeaddrinfo(res);
  if (bound_.ss_family == AF_INET) {
    wildcard_ = reinterpret_cast<sockaddr_in&>(bound_).sin_addr.s_addr == htonl(INADDR_ANY);
  } else if (bound_.ss_family == AF_INET6) {
    wildcard_ = IN6_IS_ADDR_UNSPECIFIED(&reinterpret_cast<sockaddr_in6&>(bound_).sin6_addr);
  }

  auto http = std::make_unique<httplib::Server>();
  const Limits lim = limits_;
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
  http->Get("/metrics", [this](const httplib::Request&, httplib::Response& res) {
    res.set_content(page_(), kContentType);
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

void MetricsHttpServer::ShutdownClientSockets() const {
  DIR* d = opendir("/proc/self/fd");
  if (d == nullptr) return;
  const int self = dirfd(d);
  while (dirent* e = readdir(d)) {
    if (e->d_name[0] < '0' || e->d_name[0] > '9') continue;
    int fd = std::atoi(e->d_name);
    if (fd == self) continue;
    struct stat st;
    if (fstat(fd, &st) != 0 || !S_ISSOCK(st.st_mode)) continue;
    sockaddr_storage local{}, peer{};
    socklen_t len = sizeof local, plen = sizeof peer;
    if (getsockname(fd, reinterpret_cast<sockaddr*>(&local), &len) != 0) continue;
    if (PortOf(local) != port_) continue;
    if (!wildcard_ && !SameAddress(local, bound_)) continue;
    if (getpeername(fd, reinterpret_cast<sockaddr*>(&peer), &plen) != 0) continue;  // not accepted
    shutdown(fd, SHUT_RDWR);  // wakes its reader; cpp-httplib still closes it
  }
  closedir(d);
}

void MetricsHttpServer::Stop() {
  if (!http_) return;
  const auto deadline =
      std::chrono::steady_clock::now() + std::chrono::milliseconds(limits_.stop_deadline_ms);
  while (!done_.load()) {
    // Again each round: stop() does nothing until the accept loop has marked itself running.
    http_->stop();
    ShutdownClientSockets();
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
    (void)http_.release();  // still used by those threads
  }
}

}  // namespace rkv::metrics
