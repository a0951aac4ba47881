// HttpServer: gpushare-scheduler's HTTP endpoints (cpp-httplib), in front of an Extender.
//
//   POST <prefix>/filter, <prefix>/prioritize, <prefix>/bind   the extender verbs
//   GET  /healthz    200 while the process serves
//   GET  /readyz     200 once the cache is synced (informers listed nodes and pods), else 503
//                    with the reason
//   GET  /metrics    Prometheus text: request counters, bind latency, cache size
//
// Every refusal has a JSON body {"Error": "..."} that says why: 400 for malformed requests, 404
// for unknown paths (listing the served ones), 405 for a verb path used with another method,
// 413 for a body over the limit, 415 for a Content-Type other than JSON. Handlers never let an
// exception out. Bodies are capped (HttpServerOptions::max_body_bytes) before they are read.
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <thread>

#include "core/status.h"
#include "scheduler/extender.h"

namespace gpushare::scheduler {

struct HttpServerOptions {
  std::string host = "0.0.0.0";
  int port = 12345;                     // 0: any free port (see port())
  std::string url_prefix = "/gpushare-scheduler";
  size_t max_body_bytes = 8u << 20;     // larger requests get 413
  int threads = 16;                     // concurrent requests
  int read_timeout_seconds = 30;
};

struct Readiness {
  bool ready = false;
  std::string reason;  // why not (for /readyz)
};

class HttpServer {
 public:
  HttpServer(Extender& extender, HttpServerOptions options, std::function<Readiness()> readiness,
             std::function<std::string()> metrics = {});
  ~HttpServer();
  HttpServer(const HttpServer&) = delete;
  HttpServer& operator=(const HttpServer&) = delete;

  // Binds and starts serving on a background thread.
  Status Start();
  void Stop();
  int port() const { return port_; }
  // The normalised prefix ("" or "/a/b", no trailing slash).
  const std::string& url_prefix() const { return prefix_; }

 private:
  struct Impl;
  Extender& extender_;
  HttpServerOptions options_;
  std::function<Readiness()> readiness_;
  std::function<std::string()> metrics_;
  std::string prefix_;
  int port_ = -1;
  std::unique_ptr<Impl> impl_;
};

// "/gpushare-scheduler/" -> "/gpushare-scheduler", "ext" -> "/ext", "/" -> "".
std::string NormalizePrefix(const std::string& prefix);

}  // namespace gpushare::scheduler
