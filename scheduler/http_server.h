// HttpServer: gpushare-scheduler's HTTP/1.1 endpoints, in front of an Extender.
//
//   POST <prefix>/filter, <prefix>/prioritize, <prefix>/bind   the extender verbs
//   GET  /healthz    200 while the process serves
//   GET  /readyz     200 once the cache is synced (informers listed nodes and pods), else 503
//                    with the reason
//   GET  /metrics    Prometheus text (scheduler/metrics.h)
//   GET  <route>     HttpServerOptions::get_routes (PREFIX/inspect and PREFIX/debug/cache on the
//                    extender listener; served by a worker, never by the connection leader)
//   POST <route>     HttpServerOptions::routes (the admission webhook's /mutate-pods, on its own
//                    listener that serves nothing else)
//
// Every refusal has a JSON body {"Error": "..."} that says why: 400 for malformed requests, 404
// for unknown paths (listing the served ones), 405 for a verb path used with another method,
// 413 for a body over the limit, 415 for a Content-Type other than JSON, 431 for oversized
// headers. Handlers never let an exception out. Bodies are capped
// (HttpServerOptions::max_body_bytes) before they are read. Replies are never compressed.
//
// The server is our own (message syntax in http_wire.h), built so that no number of idle, slow
// or hostile connections can starve a real request (issue 10 §3):
//
//   - every connection is non-blocking and multiplexed with epoll by one thread at a time, the
//     leader of the pool (`threads`, leader/followers): it accepts, does the TLS handshakes
//     (tls.h), reads request heads and bodies as far as they have arrived, answers the refusals
//     of the HTTP layer itself, and acts only on COMPLETE requests: a quick one (anything but
//     a bind, body up to 1 MiB) it serves itself and goes on leading; for a large body it
//     hands the lead to a follower first; more than one complete at once, the followers take
//     the others. A bind (API calls) goes to a thread of its own (bind_threads), so no number
//     of binds in flight holds a thread of the pool. Replies are written straight to the socket
//     (what the socket does not take is finished by the leader). So an idle keep-alive connection,
//     or one that trickles its head, costs a little memory and no thread, and a request is not
//     passed between threads (one wake-up per exchange, as with a thread blocked in recv());
//   - every request has deadlines for the whole of it, not per read: its head must arrive
//     within header_timeout of its first byte (408 otherwise; a new connection's TLS handshake
//     too), the head and body within read_timeout (408); a reply the client does not read
//     within read_timeout, and a connection idle for idle_timeout, are closed;
//   - at max_connections (default: from RLIMIT_NOFILE), the oldest idle connection is closed to
//     make room for a new one, then the oldest still sending its head; request bytes held in
//     memory are capped (max_buffered_bytes), the oldest unfinished request giving way first.
//
// Keep-alive, pipelining (answered in order), chunked bodies, "Expect: 100-continue", HEAD,
// 413 with a bounded drain of the body the client is still sending, 431/505/501/400 with the
// reason, and no compression, as before.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "core/status.h"
#include "scheduler/extender.h"
#include "scheduler/tls.h"

namespace gpushare::scheduler {

namespace http {
struct RequestHead;
struct Reply;
}  // namespace http

// An extra POST endpoint (the webhook's /mutate-pods): JSON in, a reply out. It runs on the
// server's threads like an extender verb and must not block for long.
struct PostRoute {
  std::string path;
  std::function<HttpReply(std::string_view body)> handle;
};

// An extra GET endpoint (PREFIX/inspect): serves `path` and every `path/...` below it; the
// handler gets what follows `path` ("" or "/..."). It runs on a worker thread (never the one
// that accepts connections), so a large reply delays no other request. HEAD is answered too;
// another method gets 405.
struct GetRoute {
  std::string path;
  std::function<HttpReply(std::string_view rest)> handle;
};

struct HttpServerOptions {
  std::string host = "127.0.0.1";  // loopback: beside kube-scheduler (docs/scheduler.md)
  int port = 12345;                // 0: any free port (see port())
  std::string url_prefix = "/gpushare-scheduler";
  // false: only GET /healthz, /readyz and /metrics (the health listener for kubelet's probes).
  bool serve_verbs = true;
  // false: no /healthz, /readyz or /metrics either (the webhook listener serves only its routes).
  bool serve_health = true;
  std::vector<PostRoute> routes;     // more POST endpoints (exact paths)
  std::vector<GetRoute> get_routes;  // more GET endpoints (a path and what is below it)
  // Who may GET /metrics: called with the request's Authorization header ("" when absent);
  // answers 200 to serve, else the status (401, 403, 503) and why. Unset: anyone.
  std::function<std::pair<int, std::string>(std::string_view authorization)> metrics_auth;
  size_t max_body_bytes = 8u << 20;  // larger requests get 413
  int threads = 16;                  // the pool (at least 2): one leads, the others serve requests
  // Binds never run on that pool: each runs on a thread of its own, started as needed up to
  // this many (more binds wait for one, holding only their connection), so that filter and
  // prioritize never wait behind binds however many are in flight.
  int bind_threads = 256;
  std::chrono::milliseconds bind_thread_idle{5000};  // a bind thread idle this long ends
  std::chrono::milliseconds header_timeout{
      10000};  // a request head, from its first byte (and a TLS handshake)
  std::chrono::milliseconds read_timeout{
      30000};  // a whole request, head and body; also a reply's write
  std::chrono::milliseconds idle_timeout{60000};  // an idle keep-alive connection
  int max_connections = 0;                        // 0: RLIMIT_NOFILE's soft limit less a reserve
  size_t max_buffered_bytes = 0;  // request bytes held at once; 0: max(64 MiB, 4 x max_body_bytes)
  TlsOptions tls;                 // cert_file empty: plain HTTP
};

// Counters of the transport (gpushare_scheduler_http_* in /metrics).
struct HttpServerStats {
  uint64_t connections = 0;     // open now
  uint64_t buffered_bytes = 0;  // request bytes held now (heads, bodies, pipelined input)
  uint64_t accepted = 0;
  uint64_t requests = 0;  // complete requests served
  uint64_t refused = 0;   // answered by the HTTP layer (400, 408, 413, 431, 501, 503, 505)
  uint64_t timeouts = 0;  // heads, bodies or replies past their deadline (408 or closed)
  uint64_t evicted = 0;   // closed to make room (connections or buffered bytes)
  uint64_t tls_handshake_errors = 0;
  uint64_t tls_reloads = 0;           // certificate files re-read after a change
  uint64_t binds_in_flight = 0;       // binds being served now (on the bind threads)
  uint64_t binds_in_flight_peak = 0;  // the most at once since the start
  uint64_t bind_threads = 0;          // bind threads alive now (busy or idle)
  uint64_t tls_reload_errors = 0;
};

struct Readiness {
  bool ready = false;
  std::string reason;  // why not (for /readyz)
};

class HttpServer {
 public:
  HttpServer(Extender& extender, HttpServerOptions options, std::function<Readiness()> readiness,
             std::function<std::string()> metrics = {});
  // A server without the extender verbs (options.serve_verbs is ignored): only options.routes
  // and, with serve_health, the health paths.
  HttpServer(HttpServerOptions options, std::function<Readiness()> readiness,
             std::function<std::string()> metrics = {});
  ~HttpServer();
  HttpServer(const HttpServer&) = delete;
  HttpServer& operator=(const HttpServer&) = delete;

  // Loads the TLS files (if any), binds and starts serving on background threads.
  Status Start();
  // Closes every connection; a handler already running finishes first.
  void Stop();
  int port() const { return port_; }
  // The normalised prefix ("" or "/a/b", no trailing slash).
  const std::string& url_prefix() const { return prefix_; }
  HttpServerStats stats() const;

 private:
  struct Impl;
  struct Conn;
  HttpServer(Extender* extender, HttpServerOptions options, std::function<Readiness()> readiness,
             std::function<std::string()> metrics);
  http::Reply Route(const http::RequestHead& head, std::string_view body);
  Extender* extender_;  // nullptr: no verbs
  HttpServerOptions options_;
  std::function<Readiness()> readiness_;
  std::function<std::string()> metrics_;
  std::string prefix_;
  std::string served_;  // the served paths, for 404s
  int port_ = -1;
  std::unique_ptr<Impl> impl_;
};

// "/gpushare-scheduler/" -> "/gpushare-scheduler", "ext" -> "/ext", "/" -> "".
std::string NormalizePrefix(const std::string& prefix);

}  // namespace gpushare::scheduler
