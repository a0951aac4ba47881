// HttpServer: gpushare-scheduler's HTTP/1.1 endpoints, in front of an Extender.
//
//   POST <prefix>/filter, <prefix>/prioritize, <prefix>/bind   the extender verbs
//   GET  /healthz    200 while the process serves
//   GET  /readyz     200 once the cache is synced (informers listed nodes and pods), else 503
//                    with the reason
//   GET  /metrics    Prometheus text: request counters, bind latency, cache size
//
// Every refusal has a JSON body {"Error": "..."} that says why: 400 for malformed requests, 404
// for unknown paths (listing the served ones), 405 for a verb path used with another method,
// 413 for a body over the limit, 415 for a Content-Type other than JSON, 431 for oversized
// headers. Handlers never let an exception out. Bodies are capped
// (HttpServerOptions::max_body_bytes) before they are read. Replies are never compressed.
//
// The server is our own (message syntax in http_wire.h): `threads` workers, each serving one
// keep-alive connection at a time with blocking reads as large as the data that has arrived;
// further connections wait for a worker, and a worker gives up an idle keep-alive connection
// when another is waiting. A connection that stalls in the middle of a request is closed after
// read_timeout_seconds; an idle one after keep_alive_seconds.
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <thread>

#include "core/status.h"
#include "scheduler/extender.h"

namespace gpushare::scheduler {

namespace http {
struct RequestHead;
struct Reply;
}  // namespace http

struct HttpServerOptions {
  std::string host = "0.0.0.0";
  int port = 12345;                     // 0: any free port (see port())
  std::string url_prefix = "/gpushare-scheduler";
  size_t max_body_bytes = 8u << 20;     // larger requests get 413
  int threads = 16;                     // connections served at once (the rest wait)
  int read_timeout_seconds = 30;        // a request that stalls this long is dropped
  int keep_alive_seconds = 60;          // an idle connection is closed after this
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
  // Serves one connection until it closes, idles out, or `others_waiting` says to give it up.
  void Serve(int fd, const std::function<bool()>& others_waiting);
  http::Reply Route(const http::RequestHead& head, std::string_view body, const std::string& served);
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
