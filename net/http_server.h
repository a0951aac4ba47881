// HttpServer: gpushare's HTTP/1.1 server, for every listener of both programs: the scheduler's
// extender, health and webhook listeners (scheduler/routes.h) and the node's metrics listener
// (node/metrics_server.h). It knows no endpoint of its own: its owner hands it a table of
// routes (method, path, lane, handler), and it answers every path outside that table with 404
// (listing the served ones) and a route's path used with another method with 405 (and Allow).
//
// Every refusal of the HTTP layer has a JSON body {"Error": "..."} that says why: 400 for
// malformed requests, 404, 405, 413 for a body over the limit, 431 for oversized headers. A
// handler's exception becomes a 500 and never leaves the server. Bodies are capped
// (HttpServerOptions::max_body_bytes) before they are read. Replies are never compressed.
//
// The server is our own (message syntax in http_wire.h), built so that no number of idle, slow
// or hostile connections can starve a real request (issue 10 §3):
//
//   - every connection is non-blocking and multiplexed with epoll by one thread at a time, the
//     leader of the pool (`threads`, leader/followers): it accepts, does the TLS handshakes
//     (tls.h), reads request heads and bodies as far as they have arrived, answers the refusals
//     of the HTTP layer itself, and acts only on COMPLETE requests: a quick one (a route on
//     Lane::kLeader, or no route at all, body up to 1 MiB) it serves itself and goes on
//     leading; for any other it hands the lead to a follower first; more than one complete at
//     once, the followers take the others. A route on Lane::kOwnThread (the extender's bind:
//     API calls) goes to a thread of its own (bind_threads), so no number of them in flight
//     holds a thread of the pool. Replies are written straight to the socket
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
#include "net/http_wire.h"
#include "net/tls.h"

namespace gpushare::net {

using http::Reply;

// Where a route's requests are served (see above).
enum class Lane {
  kLeader,     // quick and CPU-bound: the leader serves it itself (probes, filter, prioritize)
  kWorker,     // may take long (a large reply, a call out): a follower serves it
  kOwnThread,  // waits on others for long (a bind): a thread of its own, never the pool's
};

struct Request {
  const http::RequestHead& head;
  std::string_view body;
  std::string_view rest;  // a subtree route: what follows its path ("" or "/..."); else ""
};

struct Route {
  std::string method;    // "GET" (HEAD is answered too) or "POST"
  std::string path;      // exact, or with `subtree` that path and every path/... below it
  bool subtree = false;  // listed as "path[/...]" in 404s
  Lane lane = Lane::kLeader;
  std::function<Reply(const Request&)> handle;  // may throw: 500
};

using http::ErrorJson;  // the body of every refusal: {"Error": why}

// Replies: a JSON body, a text body.
Reply JsonReply(int status, std::string body);
Reply TextReply(int status, std::string body, std::string content_type = "text/plain");
// A POST route that takes JSON: a request with another Content-Type gets 415 and why.
Route JsonPost(std::string path, Lane lane, std::function<Reply(std::string_view body)> handle);
// A GET route (HEAD answered too); `subtree`: also every path/... below `path`.
Route GetRoute(std::string path, Lane lane, std::function<Reply(const Request&)> handle,
               bool subtree = false);

struct HttpServerOptions {
  std::string host = "127.0.0.1";     // "": every interface
  int port = 12345;                   // 0: any free port (see port())
  size_t max_body_bytes = 8u << 20;   // larger requests get 413
  size_t max_head_bytes = 64 * 1024;  // a larger request line and headers get 431
  int threads = 16;                   // the pool (at least 2): one leads, the others serve requests
  // Lane::kOwnThread routes never run on that pool: each request runs on a thread of its own,
  // started as needed up to this many (more wait for one, holding only their connection), so
  // that the other routes never wait behind them however many are in flight.
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

// Counters of the transport (gpushare_scheduler_http_* in the scheduler's /metrics). "bind" is
// Lane::kOwnThread.
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

class HttpServer {
 public:
  HttpServer(HttpServerOptions options, std::vector<Route> routes);
  ~HttpServer();
  HttpServer(const HttpServer&) = delete;
  HttpServer& operator=(const HttpServer&) = delete;

  // Loads the TLS files (if any), binds and starts serving on background threads.
  Status Start();
  // Closes every connection; a handler already running finishes first.
  void Stop();
  int port() const { return port_; }
  HttpServerStats stats() const;

 private:
  struct Impl;
  struct Conn;
  // The route of `path` (nullptr when none), and what follows its path. Found once per request,
  // when its head has been read.
  const Route* Find(std::string_view path, std::string_view* rest) const;
  // Runs `route`'s handler (404 without one, 405 for another method).
  Reply Serve(const http::RequestHead& head, const Route* route, std::string_view rest,
              std::string_view body);
  HttpServerOptions options_;
  std::vector<Route> routes_;
  std::string served_;  // the served paths, for 404s
  int port_ = -1;
  std::unique_ptr<Impl> impl_;
};

}  // namespace gpushare::net
