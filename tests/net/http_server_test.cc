// net/'s HTTP/1.1 server over real sockets, serving gpushare-scheduler's routes
// (scheduler/routes.h), tested with raw clients that send exactly
// the bytes under test: keep-alive and pipelining, what Go's client sends (Accept-Encoding:
// gzip, never answered compressed), curl's "Expect: 100-continue", bodies over the limit
// (answered 413 and still readable), stalled and idle connections (never holding every
// worker), HTTP/1.0, HEAD, malformed requests, and a prompt Stop().
#include "net/http_server.h"

#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <iterator>
#include <memory>
#include <thread>
#include <vector>

#include "kube/client.h"
#include "scheduler/cache.h"
#include "scheduler/extender.h"
#include "scheduler/routes.h"
#include "tests/kube/test_util.h"
#include "tests/net/raw_http.h"

namespace gpushare::scheduler {
namespace {

using Clock = std::chrono::steady_clock;

using net::HttpServer;
using net::HttpServerOptions;
using net::HttpServerStats;
using net::testing::RaiseFdLimit;
using net::testing::Raw;
using net::testing::TlsClientOptions;

// The extender listener's routes (scheduler/service.cc), with fixed health answers.
std::vector<net::Route> Routes(Extender& extender, Readiness ready, std::string metrics) {
  std::vector<net::Route> routes = ExtenderRoutes(extender, "/gpushare-scheduler");
  HealthHandlers h;
  h.readiness = [ready] { return ready; };
  h.metrics = [metrics] { return metrics; };
  for (net::Route& r : HealthRoutes(h)) routes.push_back(std::move(r));
  return routes;
}

class HttpServerTest : public ::testing::Test {
 protected:
  static HttpServerOptions Options(int threads = 4, int read_timeout = 2, int keep_alive = 30,
                                   size_t max_body = 1 << 20) {
    HttpServerOptions o;
    o.host = "127.0.0.1";
    o.port = 0;
    o.threads = threads;
    o.header_timeout = std::chrono::seconds(read_timeout);
    o.read_timeout = std::chrono::seconds(read_timeout);
    o.idle_timeout = std::chrono::seconds(keep_alive);
    o.max_body_bytes = max_body;
    return o;
  }
  void Start(int threads = 4, int read_timeout = 2, int keep_alive = 30,
             size_t max_body = 1 << 20) {
    StartWith(Options(threads, read_timeout, keep_alive, max_body));
  }
  void StartWith(const HttpServerOptions& o) {
    cache_.SetSynced(true);
    server_ = std::make_unique<HttpServer>(
        o, Routes(extender_, Readiness{false, "informers syncing"}, "m 1\n"));
    ASSERT_TRUE(server_->Start().ok());
  }
  void TearDown() override {
    if (server_) server_->Stop();
  }
  static std::string Post(std::string_view path, std::string_view body,
                          std::string_view extra = "") {
    return "POST " + std::string(path) +
           " HTTP/1.1\r\nHost: 127.0.0.1\r\nUser-Agent: Go-http-client/1.1\r\nContent-Length: " +
           std::to_string(body.size()) + "\r\nContent-Type: application/json\r\n" +
           std::string(extra) + "\r\n" + std::string(body);
  }

  GpuCache cache_;
  Extender extender_{cache_, nullptr};
  std::unique_ptr<HttpServer> server_;
};

const char* kFilter =
    R"({"Pod":{"metadata":{"name":"p","namespace":"d","uid":"u"},"spec":{"containers":[{"name":"c",)"
    R"("resources":{"limits":{"aliyun.com/gpu-mem":"3"}}}]}},"Nodes":null,"NodeNames":["ghost"]})";

TEST_F(HttpServerTest, GoClientRequestsAreAnsweredUncompressedOnOneConnection) {
  Start();
  Raw c(server_->port());
  ASSERT_TRUE(c.connected());
  for (int i = 0; i < 3; ++i) {
    ASSERT_TRUE(c.Send(Post("/gpushare-scheduler/filter", kFilter, "Accept-Encoding: gzip\r\n")));
    Raw::Response r = c.Read();
    ASSERT_EQ(r.status, 200) << r.head << r.body;
    EXPECT_EQ(r.head.find("Content-Encoding"), std::string::npos) << r.head;
    EXPECT_NE(r.head.find("Content-Type: application/json\r\n"), std::string::npos) << r.head;
    EXPECT_NE(r.head.find("Date: "), std::string::npos) << r.head;
    EXPECT_EQ(r.head.find("Connection: close"), std::string::npos) << r.head;
    EXPECT_NE(r.body.find("\"FailedAndUnresolvableNodes\":{\"ghost\""), std::string::npos)
        << r.body;
  }
}

TEST_F(HttpServerTest, ARequestArrivingAByteAtATime) {
  Start();
  Raw c(server_->port());
  const std::string request = "\r\n" + Post("/gpushare-scheduler/filter", kFilter);
  for (char ch : request) {
    ASSERT_TRUE(c.Send(std::string(1, ch)));
    std::this_thread::sleep_for(std::chrono::microseconds(50));
  }
  Raw::Response r = c.Read();
  EXPECT_EQ(r.status, 200) << r.body;
  EXPECT_NE(r.body.find("ghost"), std::string::npos) << r.body;
}

TEST_F(HttpServerTest, PipelinedRequestsAreAnsweredInOrder) {
  Start();
  Raw c(server_->port());
  ASSERT_TRUE(
      c.Send("GET /healthz HTTP/1.1\r\nHost: h\r\n\r\nGET /readyz HTTP/1.1\r\nHost: h\r\n\r\n" +
             Post("/gpushare-scheduler/prioritize", kFilter) +
             "GET /metrics HTTP/1.1\r\nHost: h\r\n\r\n"));
  Raw::Response a = c.Read(), b = c.Read(), p = c.Read(), m = c.Read();
  EXPECT_EQ(a.status, 200);
  EXPECT_EQ(a.body, "ok\n");
  EXPECT_EQ(b.status, 503);
  EXPECT_EQ(b.body, "not ready: informers syncing\n");
  EXPECT_EQ(p.status, 200);
  EXPECT_EQ(p.body, R"([{"Host":"ghost","Score":0}])");  // unknown to the cache: the lowest score
  EXPECT_EQ(m.status, 200);
  EXPECT_NE(m.head.find("text/plain; version=0.0.4"), std::string::npos);
}

TEST_F(HttpServerTest, ChunkedBodiesAndExpectContinue) {
  Start();
  Raw c(server_->port());
  const std::string body = kFilter;
  std::string chunked =
      "POST /gpushare-scheduler/filter HTTP/1.1\r\nHost: h\r\nTransfer-Encoding: chunked\r\n"
      "Content-Type: application/json\r\n\r\n";
  for (size_t i = 0; i < body.size(); i += 10) {
    const std::string piece = body.substr(i, 10);
    char size[16];
    std::snprintf(size, sizeof size, "%zx", piece.size());
    chunked += std::string(size) + "\r\n" + piece + "\r\n";
  }
  ASSERT_TRUE(c.Send(chunked + "0\r\n\r\n"));
  Raw::Response r = c.Read();
  EXPECT_EQ(r.status, 200) << r.body;
  EXPECT_NE(r.body.find("ghost"), std::string::npos) << r.body;
  // curl: headers first, the body only after "100 Continue".
  const std::string head =
      "POST /gpushare-scheduler/filter HTTP/1.1\r\nHost: h\r\nContent-Type: application/json\r\n"
      "Expect: 100-continue\r\nContent-Length: " +
      std::to_string(body.size()) + "\r\n\r\n";
  ASSERT_TRUE(c.Send(head));
  Raw::Response cont = c.Read();
  EXPECT_EQ(cont.status, 100);
  ASSERT_TRUE(c.Send(body));
  EXPECT_EQ(c.Read().status, 200);
}

TEST_F(HttpServerTest, BodiesOverTheLimitGet413AndTheClientCanReadIt) {
  Start(4, 2, 30, 4096);
  {
    Raw c(server_->port());
    // The client writes the whole body before it reads (as cpp-httplib and many clients do):
    // the server drains it after answering, so the answer is not lost to a reset.
    ASSERT_TRUE(c.Send(Post("/gpushare-scheduler/filter", std::string(1 << 20, ' '))));
    Raw::Response r = c.Read();
    EXPECT_EQ(r.status, 413);
    EXPECT_NE(r.body.find("larger than 4096 bytes (--max-body-bytes)"), std::string::npos)
        << r.body;
    EXPECT_NE(r.head.find("Connection: close"), std::string::npos);
  }
  {
    // With "Expect: 100-continue" the client has not sent the body: answered at once, no wait.
    Raw c(server_->port());
    const auto t0 = Clock::now();
    ASSERT_TRUE(
        c.Send("POST /gpushare-scheduler/filter HTTP/1.1\r\nHost: h\r\nContent-Length: 999999\r\n"
               "Expect: 100-continue\r\n\r\n"));
    EXPECT_EQ(c.Read().status, 413);
    EXPECT_TRUE(c.Closed());
    EXPECT_LT(Clock::now() - t0, std::chrono::milliseconds(1500));
  }
  {
    Raw c(server_->port());
    std::string chunked =
        "POST /gpushare-scheduler/filter HTTP/1.1\r\nHost: h\r\nTransfer-Encoding: chunked\r\n\r\n";
    for (int i = 0; i < 20; ++i) chunked += "400\r\n" + std::string(1024, ' ') + "\r\n";
    ASSERT_TRUE(c.Send(chunked + "0\r\n\r\n"));
    EXPECT_EQ(c.Read().status, 413);
  }
  Raw after(server_->port());
  ASSERT_TRUE(after.Send("GET /healthz HTTP/1.1\r\nHost: h\r\n\r\n"));
  EXPECT_EQ(after.Read().status, 200);
}

TEST_F(HttpServerTest, MalformedRequestsGetAReasonAndTheConnectionCloses) {
  Start();
  struct Case {
    std::string bytes;
    int status;
    std::string words;
  };
  const std::vector<Case> cases = {
      {"GARBAGE\r\n\r\n", 400, "request line"},
      {"POST /gpushare-scheduler/filter HTTP/1.1\r\nContent-Length: 2\r\n\r\n{}", 400, "Host"},
      {"POST /gpushare-scheduler/filter HTTP/1.1\r\nHost: h\r\nTransfer-Encoding: "
       "chunked\r\n\r\nzz\r\n",
       400, "chunk"},
      {"GET / HTTP/1.1\r\nHost: h\r\nX: " + std::string(70000, 'a') + "\r\n\r\n", 431,
       "larger than 65536"},
      {"GET / HTTP/3.0\r\nHost: h\r\n\r\n", 505, "HTTP/1.x"},
  };
  for (const Case& k : cases) {
    Raw c(server_->port());
    ASSERT_TRUE(c.Send(k.bytes));
    Raw::Response r = c.Read();
    EXPECT_EQ(r.status, k.status) << k.bytes.substr(0, 60);
    EXPECT_NE(r.body.find(k.words), std::string::npos) << r.body;
    EXPECT_TRUE(c.Closed()) << k.bytes.substr(0, 60);
  }
  // Routing refusals keep the connection: 404 lists what is served, 405 says Allow, 415.
  Raw c(server_->port());
  ASSERT_TRUE(c.Send(Post("/gpushare-scheduler/unreserve", "{}")));
  Raw::Response nf = c.Read();
  EXPECT_EQ(nf.status, 404);
  EXPECT_NE(nf.body.find("served: /gpushare-scheduler/filter"), std::string::npos) << nf.body;
  ASSERT_TRUE(c.Send("GET /gpushare-scheduler/bind HTTP/1.1\r\nHost: h\r\n\r\n"));
  Raw::Response na = c.Read();
  EXPECT_EQ(na.status, 405);
  EXPECT_NE(na.head.find("Allow: POST"), std::string::npos);
  ASSERT_TRUE(
      c.Send("POST /gpushare-scheduler/bind HTTP/1.1\r\nHost: h\r\nContent-Type: "
             "text/plain\r\nContent-Length: 2\r\n\r\n{}"));
  EXPECT_EQ(c.Read().status, 415);
  ASSERT_TRUE(c.Send(Post("/gpushare-scheduler/filter", "{\"Pod\":")));
  Raw::Response bad = c.Read();
  EXPECT_EQ(bad.status, 400);
  EXPECT_NE(bad.body.find("malformed JSON"), std::string::npos);
}

TEST_F(HttpServerTest, Http10AndHead) {
  Start();
  Raw c(server_->port());
  ASSERT_TRUE(c.Send("HEAD /healthz HTTP/1.1\r\nHost: h\r\n\r\n"));
  Raw::Response h = c.Read(/*head_only=*/true);
  EXPECT_EQ(h.status, 200);
  EXPECT_NE(h.head.find("Content-Length: 3"), std::string::npos);
  ASSERT_TRUE(c.Send("GET /healthz HTTP/1.0\r\n\r\n"));
  Raw::Response r = c.Read();
  EXPECT_EQ(r.body, "ok\n");
  EXPECT_NE(r.head.find("Connection: close"), std::string::npos);
  EXPECT_TRUE(c.Closed());
}

TEST_F(HttpServerTest, StalledAndIdleConnectionsNeverHoldEveryWorker) {
  Start(/*threads=*/2, /*read_timeout=*/1, /*keep_alive=*/30);
  // A client that stops in the middle of its headers is cut off after the read timeout.
  Raw stalled(server_->port());
  ASSERT_TRUE(stalled.Send("POST /gpushare-scheduler/filter HTTP/1.1\r\nHost: h\r\nContent-Le"));
  // Two idle keep-alive connections (each had one request) and then a third client: the
  // workers give the idle ones up for it.
  Raw idle1(server_->port()), idle2(server_->port());
  for (Raw* r : {&idle1, &idle2}) {
    ASSERT_TRUE(r->Send("GET /healthz HTTP/1.1\r\nHost: h\r\n\r\n"));
    ASSERT_EQ(r->Read().status, 200);
  }
  const auto t0 = Clock::now();
  Raw third(server_->port());
  ASSERT_TRUE(third.Send("GET /healthz HTTP/1.1\r\nHost: h\r\n\r\n"));
  EXPECT_EQ(third.Read(false, 5000).status, 200);
  EXPECT_LT(Clock::now() - t0, std::chrono::milliseconds(3000));
  EXPECT_TRUE(stalled.Closed(4000));  // read timeout: 1 s
  // A body that stops short is cut off too.
  Raw short_body(server_->port());
  ASSERT_TRUE(short_body.Send(
      "POST /gpushare-scheduler/filter HTTP/1.1\r\nHost: h\r\nContent-Length: 100\r\n\r\n{"));
  EXPECT_TRUE(short_body.Closed(4000));
}

TEST_F(HttpServerTest, StopIsPromptWithConnectionsOpen) {
  Start(2, 30, 60);
  Raw a(server_->port()), b(server_->port()), queued(server_->port());
  ASSERT_TRUE(a.Send("GET /healthz HTTP/1.1\r\nHost: h\r\n\r\n"));
  ASSERT_EQ(a.Read().status, 200);
  ASSERT_TRUE(b.Send(
      "POST /gpushare-scheduler/filter HTTP/1.1\r\nHost: h\r\nContent-Length: 100\r\n\r\n{"));
  std::this_thread::sleep_for(std::chrono::milliseconds(100));
  const auto t0 = Clock::now();
  server_->Stop();
  EXPECT_LT(Clock::now() - t0, std::chrono::milliseconds(2000));
  EXPECT_TRUE(a.Closed(1000));
  server_.reset();
}

TEST_F(HttpServerTest, ListenErrorsNameTheAddress) {
  Start();
  HttpServerOptions o;
  o.host = "127.0.0.1";
  o.port = server_->port();  // taken
  HttpServer second(o, Routes(extender_, Readiness{true, ""}, ""));
  const Status s = second.Start();
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.message().find("127.0.0.1:" + std::to_string(server_->port())), std::string::npos)
      << s.message();
  o.host = "no-such-host.invalid";
  o.port = 0;
  HttpServer third(o, Routes(extender_, Readiness{true, ""}, ""));
  EXPECT_FALSE(third.Start().ok());
}

// The number of descriptors this process has open (one of them the directory being read).
size_t OpenFds() {
  return static_cast<size_t>(std::distance(std::filesystem::directory_iterator("/proc/self/fd"),
                                           std::filesystem::directory_iterator()));
}

// Every descriptor the server opens (listener, epoll set, eventfd, spare, connections) is
// closed by Stop(), and by a Start() that fails half-way.
TEST_F(HttpServerTest, StopAndFailedStartsCloseEveryDescriptor) {
  const size_t before = OpenFds();
  Start(2, 30, 60);
  {
    Raw idle(server_->port()), served(server_->port()), half(server_->port());
    ASSERT_TRUE(served.Send("GET /healthz HTTP/1.1\r\nHost: h\r\n\r\n"));
    ASSERT_EQ(served.Read().status, 200);
    ASSERT_TRUE(half.Send("POST /gpushare-scheduler/filter HTTP/1.1\r\n"));
    ASSERT_TRUE(kube::testing::WaitUntil([&] { return server_->stats().connections == 3; }));
    server_->Stop();
    server_.reset();
  }
  EXPECT_EQ(OpenFds(), before);

  // Room for the listening socket and nothing more: the epoll set cannot be made, and the
  // listener must not stay open.
  const int lowest_free = ::dup(0);
  ASSERT_GE(lowest_free, 0);
  ::close(lowest_free);
  rlimit saved{};
  ASSERT_EQ(::getrlimit(RLIMIT_NOFILE, &saved), 0);
  rlimit low = saved;
  low.rlim_cur = static_cast<rlim_t>(lowest_free) + 1;
  ASSERT_EQ(::setrlimit(RLIMIT_NOFILE, &low), 0);
  HttpServer failing(Options(), Routes(extender_, Readiness{true, ""}, ""));
  const Status s = failing.Start();
  ::setrlimit(RLIMIT_NOFILE, &saved);
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.message().find("cannot serve on 127.0.0.1:0"), std::string::npos) << s.message();
  EXPECT_EQ(OpenFds(), before);
}

// One real filter request on a new connection: the status (0: none within 10 s) and the time
// from connect to the complete reply.
std::pair<int, double> TimedFilter(int port) {
  const auto t0 = Clock::now();
  Raw c(port);
  if (!c.connected()) return {0, 0};
  const std::string req =
      "POST /gpushare-scheduler/filter HTTP/1.1\r\nHost: h\r\nContent-Type: application/json\r\n"
      "Content-Length: " +
      std::to_string(std::string_view(kFilter).size()) + "\r\n\r\n" + kFilter;
  if (!c.Send(req)) return {0, 0};
  const int status = c.Read(false, 10000).status;
  return {status, std::chrono::duration<double, std::milli>(Clock::now() - t0).count()};
}

// Slowloris (issue 10 §3): more connections than workers, each sending one more header line
// every so often and never finishing its head. Real requests are answered meanwhile.
TEST_F(HttpServerTest, SlowlorisConnectionsDoNotDelayRealRequests) {
  Start(/*threads=*/16, /*read_timeout=*/30, /*keep_alive=*/60);
  std::vector<std::unique_ptr<Raw>> slow;
  for (int i = 0; i < 24; ++i) {
    slow.push_back(std::make_unique<Raw>(server_->port()));
    ASSERT_TRUE(slow.back()->connected());
    ASSERT_TRUE(slow.back()->Send("POST /gpushare-scheduler/filter HTTP/1.1\r\nHost: h\r\n"));
  }
  std::atomic<bool> done{false};
  std::thread trickle([&] {
    for (int line = 0; !done.load(); ++line) {
      for (auto& c : slow) c->Send("X-Slow-" + std::to_string(line) + ": 1\r\n");
      for (int i = 0; i < 10 && !done.load(); ++i)
        std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
  });
  std::this_thread::sleep_for(std::chrono::milliseconds(300));
  std::vector<double> latencies;
  for (int i = 0; i < 5; ++i) {
    const auto [status, ms] = TimedFilter(server_->port());
    EXPECT_EQ(status, 200) << "real request " << i
                           << " not answered while 24 slowloris connections trickle";
    latencies.push_back(ms);
  }
  done = true;
  trickle.join();
  for (double ms : latencies) {
    std::printf("filter with 24 slowloris connections open: %.2f ms\n", ms);
    EXPECT_LT(ms, 2000.0);  // a liveness bound; the figure itself is in docs/benchmarks.md
  }
}

// 1,000+ idle connections (some fresh, some after a keep-alive request) do not delay a real one.
TEST_F(HttpServerTest, ThousandsOfIdleConnectionsDoNotDelayRealRequests) {
  const rlim_t limit = RaiseFdLimit();
  const int idle_count = static_cast<int>(std::min<rlim_t>(1500, limit > 200 ? limit - 200 : 0));
  if (idle_count < 1000)
    GTEST_SKIP() << "RLIMIT_NOFILE hard limit " << limit << " too low for 1,000 idle connections";
  Start(/*threads=*/16, /*read_timeout=*/30, /*keep_alive=*/60);
  // All opened at once, a tenth sending a request (they stay open after it: keep-alive); the
  // real requests come right after, while the server still has all of them to look at.
  std::vector<std::unique_ptr<Raw>> idle;
  for (int i = 0; i < idle_count; ++i) {
    idle.push_back(std::make_unique<Raw>(server_->port()));
    ASSERT_TRUE(idle.back()->connected()) << i;
    if (i % 10 == 0) {
      ASSERT_TRUE(idle.back()->Send("GET /healthz HTTP/1.1\r\nHost: h\r\n\r\n"));
    }
  }
  std::vector<double> latencies;
  for (int i = 0; i < 5; ++i) {
    const auto [status, ms] = TimedFilter(server_->port());
    EXPECT_EQ(status, 200) << "real request " << i << " not answered with " << idle_count
                           << " idle connections";
    latencies.push_back(ms);
  }
  for (double ms : latencies) {
    std::printf("filter with %d idle connections open: %.2f ms\n", idle_count, ms);
    EXPECT_LT(ms, 2000.0);
  }
  for (int i = 0; i < idle_count; i += 10)
    EXPECT_EQ(idle[static_cast<size_t>(i)]->Read(false, 20000).status, 200) << i;
}

// The head deadline covers the whole head, not each read: a client that sends a byte every
// 100 ms is answered 408 and closed soon after the deadline (1 s here).
TEST_F(HttpServerTest, AHeadTrickledPastItsDeadlineGets408) {
  Start(/*threads=*/4, /*read_timeout=*/1, /*keep_alive=*/30);
  Raw c(server_->port());
  const std::string head =
      "POST /gpushare-scheduler/filter HTTP/1.1\r\nHost: h\r\nX-Long: " + std::string(200, 'a');
  const auto t0 = Clock::now();
  std::atomic<bool> stop{false};
  std::thread trickle([&] {
    for (size_t i = 0; i < head.size() && !stop.load(); ++i) {
      if (!c.Send(std::string(1, head[i]))) break;
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
    }
  });
  Raw::Response r = c.Read(false, 6000);
  stop = true;
  trickle.join();
  EXPECT_EQ(r.status, 408) << r.head << r.body;
  EXPECT_NE(r.body.find("request head not received within"), std::string::npos) << r.body;
  EXPECT_LT(Clock::now() - t0, std::chrono::milliseconds(4000));
  EXPECT_TRUE(c.Closed(2000));
}

// The same for a body: the head arrives, the body trickles a byte every 100 ms.
TEST_F(HttpServerTest, ABodyTrickledPastItsDeadlineIsClosed) {
  Start(/*threads=*/4, /*read_timeout=*/1, /*keep_alive=*/30);
  Raw c(server_->port());
  ASSERT_TRUE(c.Send(
      "POST /gpushare-scheduler/filter HTTP/1.1\r\nHost: h\r\nContent-Type: application/json\r\n"
      "Content-Length: 200\r\n\r\n"));
  const auto t0 = Clock::now();
  std::atomic<bool> stop{false};
  std::thread trickle([&] {
    for (int i = 0; i < 200 && !stop.load(); ++i) {
      if (!c.Send(" ")) break;
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
    }
  });
  Raw::Response r = c.Read(false, 6000);
  stop = true;
  trickle.join();
  EXPECT_EQ(r.status, 408) << r.head << r.body;
  EXPECT_NE(r.body.find("request body not received within"), std::string::npos) << r.body;
  EXPECT_LT(Clock::now() - t0, std::chrono::milliseconds(4000));
  EXPECT_TRUE(c.Closed(2000));
}

// At the connection limit the oldest idle connection makes room for a new one; with none idle,
// one still sending its head does.
TEST_F(HttpServerTest, AtTheConnectionLimitTheOldestIdleConnectionGoesFirst) {
  HttpServerOptions o = Options(4, 30, 60);
  o.max_connections = 16;
  StartWith(o);
  auto connections = [&](uint64_t n) {
    return kube::testing::WaitUntil([&] { return server_->stats().connections == n; });
  };
  // The oldest: connected first, never sent anything. Then 15 that had a request each and
  // stay open (keep-alive).
  std::vector<std::unique_ptr<Raw>> idle;
  idle.push_back(std::make_unique<Raw>(server_->port()));
  ASSERT_TRUE(connections(1));
  for (int i = 1; i < 16; ++i) {
    idle.push_back(std::make_unique<Raw>(server_->port()));
    ASSERT_TRUE(idle.back()->Send("GET /healthz HTTP/1.1\r\nHost: h\r\n\r\n"));
    ASSERT_EQ(idle.back()->Read().status, 200);
  }
  EXPECT_EQ(TimedFilter(server_->port()).first, 200);
  EXPECT_TRUE(idle[0]->Closed(2000));  // the oldest
  for (int i = 1; i < 16; ++i) {
    ASSERT_TRUE(idle[static_cast<size_t>(i)]->Send("GET /healthz HTTP/1.1\r\nHost: h\r\n\r\n"));
    EXPECT_EQ(idle[static_cast<size_t>(i)]->Read().status, 200)
        << i;  // the others are still served
  }
  idle.clear();
  ASSERT_TRUE(connections(0));
  // Now 16 connections in the middle of a head, and none idle: one of them makes room.
  std::vector<std::unique_ptr<Raw>> slow;
  for (int i = 0; i < 16; ++i) {
    slow.push_back(std::make_unique<Raw>(server_->port()));
    ASSERT_TRUE(slow.back()->Send("POST /gpushare-scheduler/filter HTTP/1.1\r\n"));
  }
  ASSERT_TRUE(connections(16));
  EXPECT_EQ(TimedFilter(server_->port()).first, 200);
  int closed = 0;
  for (auto& c : slow) closed += c->Closed(100) ? 1 : 0;
  EXPECT_EQ(closed, 1);
  EXPECT_EQ(server_->stats().evicted, 2u);
}

// Request bytes held at once are capped: the oldest unfinished request gives way, and a real
// request is still answered.
TEST_F(HttpServerTest, BufferedRequestBytesAreCappedOldestFirst) {
  HttpServerOptions o = Options(4, 30, 60);
  o.max_buffered_bytes = 256 * 1024;
  StartWith(o);
  std::vector<std::unique_ptr<Raw>> partial;
  for (int i = 0; i < 4; ++i) {
    partial.push_back(std::make_unique<Raw>(server_->port()));
    ASSERT_TRUE(
        partial.back()->Send("POST /gpushare-scheduler/filter HTTP/1.1\r\nHost: h\r\n"
                             "Content-Type: application/json\r\nContent-Length: 120000\r\n\r\n" +
                             std::string(100000, ' ')));
    // Each one held before the next (100 KB each; the third and fourth go over 256 KiB).
    ASSERT_TRUE(kube::testing::WaitUntil([&] {
      const HttpServerStats st = server_->stats();
      return st.buffered_bytes >= 100000u * static_cast<uint64_t>(std::min(i + 1, 2)) &&
             st.evicted == static_cast<uint64_t>(std::max(0, i - 1));
    })) << i;
  }
  EXPECT_TRUE(partial[0]->Closed(2000));  // the oldest gave way first, then the next oldest
  EXPECT_TRUE(partial[1]->Closed(2000));
  EXPECT_LE(server_->stats().buffered_bytes, 256u * 1024);
  EXPECT_EQ(TimedFilter(server_->port()).first, 200);
  // The newest completes its request within the cap (a body of spaces is no JSON: 400).
  ASSERT_TRUE(partial[3]->Send(std::string(20000, ' ')));
  EXPECT_EQ(partial[3]->Read().status, 400);
  EXPECT_EQ(server_->stats().evicted, 2u);
}

// A reply larger than the socket takes is finished by the I/O thread while the client is slow
// to read, without holding a worker; one that is never read is dropped after the read timeout.
TEST_F(HttpServerTest, LargeRepliesToSlowReadersHoldNoWorker) {
  Start(/*threads=*/1, /*read_timeout=*/2, /*keep_alive=*/30, /*max_body=*/8u << 20);
  std::string names;
  for (int i = 0; i < 60000; ++i)
    names += std::string(i ? "," : "") + "\"ghost-node-" + std::to_string(i) + "\"";
  const std::string body =
      R"({"Pod":{"metadata":{"name":"p","namespace":"d","uid":"u"},"spec":{"containers":[{"name":"c",)"
      R"("resources":{"limits":{"aliyun.com/gpu-mem":"3"}}}]}},"Nodes":null,"NodeNames":[)" +
      names + "]}";
  // Small receive windows: the ~5 MB reply cannot all sit in the socket buffers (the sender's
  // is at most net.ipv4.tcp_wmem's 4 MB here).
  Raw slow(server_->port(), 4096);
  ASSERT_TRUE(slow.Send(Post("/gpushare-scheduler/filter", body)));
  Raw never(server_->port(), 4096);
  ASSERT_TRUE(never.Send(Post("/gpushare-scheduler/filter", body)));
  // Both handlers have run once both replies have begun to arrive (how long the two large filters
  // take depends on the build and the machine's load: waited for, not slept for).
  auto replying = [](const Raw& c) {
    pollfd p{c.fd(), POLLIN, 0};
    return ::poll(&p, 1, 0) == 1 && (p.revents & POLLIN) != 0;
  };
  ASSERT_TRUE(kube::testing::WaitUntil([&] { return replying(slow) && replying(never); },
                                       std::chrono::milliseconds(120000)));
  // The only worker is free again while neither reply is read: another request is answered.
  EXPECT_EQ(TimedFilter(server_->port()).first, 200);
  Raw::Response r = slow.Read(false, 5000);
  EXPECT_EQ(r.status, 200);
  EXPECT_GE(r.body.size(), 4u << 20);
  EXPECT_NE(r.body.find("ghost-node-59999"), std::string::npos);
  // The reply nobody reads is given up after the read timeout (2 s): the connection ends
  // before its whole reply arrived.
  ASSERT_TRUE(kube::testing::WaitUntil([&] { return server_->stats().timeouts >= 1u; },
                                       std::chrono::milliseconds(120000)));
  Raw::Response cut = never.Read(false, 2000);
  EXPECT_EQ(cut.status, 0) << "a reply of " << cut.body.size() << " bytes arrived whole";
}

// An API server that takes connections and never answers: every bind waits in its first API
// call until the listener closes (issue 25: binds in flight must hold no thread of the pool).
class SilentApi {
 public:
  SilentApi() {
    fd_ = ::socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    socklen_t len = sizeof a;
    if (::bind(fd_, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0 || ::listen(fd_, 4096) != 0 ||
        ::getsockname(fd_, reinterpret_cast<sockaddr*>(&a), &len) != 0)
      ADD_FAILURE() << "cannot listen";
    port_ = ntohs(a.sin_port);
  }
  ~SilentApi() { Close(); }
  // Resets every connection waiting in the backlog: the calls fail at once.
  void Close() {
    if (fd_ >= 0) ::close(fd_);
    fd_ = -1;
  }
  std::shared_ptr<kube::Client> Client() const {
    kube::ClientConfig c;
    c.server = "http://127.0.0.1:" + std::to_string(port_);
    kube::ClientOptions o;
    o.qps = 0;
    auto client = kube::Client::Create(c, o);
    EXPECT_TRUE(client.ok()) << client.status().ToString();
    return client.ok() ? *client : nullptr;
  }

 private:
  int fd_ = -1;
  int port_ = 0;
};

class BindThreadsTest : public HttpServerTest {
 protected:
  void StartBinds(int threads, int bind_threads) {
    bind_extender_ = std::make_unique<Extender>(cache_, api_.Client());
    HttpServerOptions o = Options(threads, /*read_timeout=*/30);
    o.bind_threads = bind_threads;
    o.bind_thread_idle = std::chrono::milliseconds(200);
    cache_.SetSynced(true);
    server_ = std::make_unique<HttpServer>(o, Routes(*bind_extender_, Readiness{true, ""}, ""));
    ASSERT_TRUE(server_->Start().ok());
  }
  // `n` binds, each on its own connection; none can finish while the API is silent.
  void SendBinds(int n) {
    for (int i = 0; i < n; ++i) {
      const std::string body = R"({"PodName":"p)" + std::to_string(i) +
                               R"(","PodNamespace":"d","PodUID":"u)" + std::to_string(i) +
                               R"(","Node":"n"})";
      binds_.push_back(std::make_unique<Raw>(server_->port()));
      ASSERT_TRUE(binds_.back()->Send(Post("/gpushare-scheduler/bind", body)));
    }
  }
  void TearDown() override {
    api_.Close();  // the binds fail now, and Stop does not wait for them
    if (server_) server_->Stop();
  }
  SilentApi api_;
  std::unique_ptr<Extender> bind_extender_;
  std::vector<std::unique_ptr<Raw>> binds_;
};

TEST_F(BindThreadsTest, BindsInFlightHoldNoThreadOfThePool) {
  // Two threads: one leads, one serves. Before binds had threads of their own, two binds
  // waiting on the API held both and nothing else was answered.
  StartBinds(/*threads=*/2, /*bind_threads=*/256);
  SendBinds(100);
  ASSERT_TRUE(kube::testing::WaitUntil([&] { return server_->stats().binds_in_flight == 100u; },
                                       std::chrono::milliseconds(60000)))
      << server_->stats().binds_in_flight << " binds in flight";
  for (int i = 0; i < 5; ++i) EXPECT_EQ(TimedFilter(server_->port()).first, 200) << i;
  EXPECT_EQ(server_->stats().binds_in_flight, 100u);  // still waiting on the API
  // The API answers (here: refuses): every bind gets its reply.
  api_.Close();
  for (auto& c : binds_) {
    Raw::Response r = c->Read(false, 30000);
    EXPECT_EQ(r.status, 200);
    EXPECT_NE(r.body.find("Error"), std::string::npos) << r.body;
  }
  // (a thread counts its bind until just after the reply is written)
  EXPECT_TRUE(kube::testing::WaitUntil([&] { return server_->stats().binds_in_flight == 0u; },
                                       std::chrono::milliseconds(60000)));
  // Idle bind threads end (here after 200 ms).
  EXPECT_TRUE(kube::testing::WaitUntil([&] { return server_->stats().bind_threads == 0u; },
                                       std::chrono::milliseconds(60000)))
      << server_->stats().bind_threads << " bind threads left";
}

TEST_F(BindThreadsTest, BindsBeyondTheBindThreadsWaitForOneAndFilterStillAnswers) {
  StartBinds(/*threads=*/2, /*bind_threads=*/4);
  SendBinds(12);
  ASSERT_TRUE(kube::testing::WaitUntil([&] { return server_->stats().binds_in_flight == 4u; },
                                       std::chrono::milliseconds(60000)));
  EXPECT_EQ(TimedFilter(server_->port()).first, 200);
  EXPECT_EQ(server_->stats().binds_in_flight_peak, 4u);  // the other 8 wait for a thread
  EXPECT_LE(server_->stats().bind_threads, 4u);
  api_.Close();
  for (auto& c : binds_) EXPECT_EQ(c->Read(false, 30000).status, 200);
  EXPECT_EQ(server_->stats().binds_in_flight_peak, 4u);
}

// --- TLS ---------------------------------------------------------------------------------------
// Certificates are made at test time with the openssl command-line tool (tests/kube/test_util.h):
// a CA with a server certificate for 127.0.0.1 and a client certificate, and a second, unrelated
// set for the "wrong CA" cases and the rotation.

class TlsServerTest : public HttpServerTest {
 protected:
  void SetUp() override {
    a_ = kube::testing::MakeTls(dir_a_);
    b_ = kube::testing::MakeTls(dir_b_);
    if (!a_.ok || !b_.ok) GTEST_SKIP() << "SKIPPED: the openssl command-line tool is missing";
    // The files the server reads, so that a test can replace them (rotation).
    kube::testing::WriteFile(Serving("crt"), a_.Pem(a_.server_crt));
    kube::testing::WriteFile(Serving("key"), a_.Pem(a_.server_key));
  }
  std::string Serving(const std::string& ext) const { return serving_.File("serving." + ext); }
  void StartTls(const std::string& client_ca, int read_timeout = 2) {
    HttpServerOptions o = Options(4, read_timeout, 30);
    o.tls = {Serving("crt"), Serving("key"), client_ca};
    StartWith(o);
  }
  // A client of set `t` (its CA checks the server, its certificate is presented).
  static TlsClientOptions Client(const kube::testing::TlsMaterial& t, bool with_cert = true) {
    TlsClientOptions c;
    c.ca_file = t.ca_crt;
    if (with_cert) {
      c.cert_file = t.client_crt;
      c.key_file = t.client_key;
    }
    return c;
  }
  // A filter request over TLS on a new connection: the status (0: none) and the handshake's
  // error, if any.
  std::pair<int, std::string> Filter(const TlsClientOptions& c) {
    Raw r(server_->port());
    const std::string error = r.StartTls(c);
    if (!error.empty()) return {0, error};
    if (!r.Send(Post("/gpushare-scheduler/filter", kFilter))) return {0, "send failed"};
    return {r.Read().status, ""};
  }

  kube::testing::TempDir dir_a_, dir_b_, serving_;
  kube::testing::TlsMaterial a_, b_;
};

TEST_F(TlsServerTest, MutualTlsNeedsAClientCertificateFromTheConfiguredCa) {
  StartTls(a_.ca_crt);
  EXPECT_EQ(Filter(Client(a_)).first, 200);
  // Keep-alive works over TLS, pipelining too.
  {
    Raw c(server_->port());
    ASSERT_EQ(c.StartTls(Client(a_)), "");
    ASSERT_TRUE(
        c.Send("GET /healthz HTTP/1.1\r\nHost: h\r\n\r\nGET /readyz HTTP/1.1\r\nHost: h\r\n\r\n"));
    EXPECT_EQ(c.Read().status, 200);
    EXPECT_EQ(c.Read().status, 503);
    ASSERT_TRUE(c.Send(Post("/gpushare-scheduler/filter", kFilter)));
    EXPECT_EQ(c.Read().status, 200);
  }
  // No client certificate: refused (at the handshake, or with TLS 1.3 at the first read).
  EXPECT_EQ(Filter(Client(a_, /*with_cert=*/false)).first, 0);
  // A client certificate from another CA: refused.
  TlsClientOptions other = Client(a_);
  other.cert_file = b_.client_crt;
  other.key_file = b_.client_key;
  EXPECT_EQ(Filter(other).first, 0);
  // The client does not trust the server's CA: its handshake fails.
  const auto [status, error] = Filter(Client(b_));
  EXPECT_EQ(status, 0);
  EXPECT_NE(error.find("certificate verify failed"), std::string::npos) << error;
  // Only TLS 1.2 and later.
  TlsClientOptions old = Client(a_);
  old.max_version = TLS1_1_VERSION;
  EXPECT_EQ(Filter(old).first, 0);
  EXPECT_GE(server_->stats().tls_handshake_errors, 3u);
  // Still serving.
  EXPECT_EQ(Filter(Client(a_)).first, 200);
}

TEST_F(TlsServerTest, WithoutAClientCaAnyClientMayConnect) {
  StartTls("");
  EXPECT_EQ(Filter(Client(a_, /*with_cert=*/false)).first, 200);
  EXPECT_EQ(Filter(Client(a_)).first, 200);
}

TEST_F(TlsServerTest, PlainHttpToTheTlsPortIsRefusedInPlainWords) {
  StartTls(a_.ca_crt);
  Raw plain(server_->port());
  ASSERT_TRUE(plain.Send(Post("/gpushare-scheduler/filter", kFilter)));
  Raw::Response r = plain.Read();
  EXPECT_EQ(r.status, 400);
  EXPECT_NE(r.body.find("client sent an HTTP request to an HTTPS server"), std::string::npos)
      << r.body;
  EXPECT_TRUE(plain.Closed());
  // Garbage that is neither: closed.
  Raw garbage(server_->port());
  ASSERT_TRUE(garbage.Send(std::string("\x01\x02\x03\x04garbage\r\n\r\n", 15)));
  EXPECT_TRUE(garbage.Closed());
  // TLS records that are garbage inside: closed.
  Raw bad(server_->port());
  ASSERT_TRUE(bad.Send(std::string("\x16\x03\x01\x00\x05hello", 10)));
  EXPECT_TRUE(bad.Closed());
  EXPECT_EQ(Filter(Client(a_)).first, 200);
}

// Handshakes that never finish hold no worker and no real request waits for them; they are
// closed at the head deadline.
TEST_F(TlsServerTest, StalledHandshakesDoNotDelayRealRequests) {
  StartTls(a_.ca_crt, /*read_timeout=*/1);
  std::vector<std::unique_ptr<Raw>> stalled;
  for (int i = 0; i < 32; ++i) {
    stalled.push_back(std::make_unique<Raw>(server_->port()));
    if (i % 2 == 0) {
      ASSERT_TRUE(stalled.back()->Send(
          std::string("\x16\x03\x01\x02\x00\x01", 6)));  // a ClientHello's first bytes
    }
  }
  const auto t0 = Clock::now();
  EXPECT_EQ(Filter(Client(a_)).first, 200);
  std::printf("TLS filter with 32 stalled handshakes open: %.2f ms\n",
              std::chrono::duration<double, std::milli>(Clock::now() - t0).count());
  EXPECT_LT(Clock::now() - t0, std::chrono::milliseconds(2000));
  for (auto& s : stalled) EXPECT_TRUE(s->Closed(4000));
}

// A rotated certificate is used for new connections without a restart; connections made
// before keep working; files that do not load keep the previous certificate.
TEST_F(TlsServerTest, CertificateFilesAreReloadedWhenTheyChange) {
  StartTls("");
  Raw before(server_->port());
  ASSERT_EQ(before.StartTls(Client(a_, false)), "");
  EXPECT_NE(Filter(Client(b_, false)).second, "");  // set b's CA does not trust the current one
  // Rotate to set b's server certificate (as a Secret update does: new files, new inodes).
  kube::testing::ReplaceFile(Serving("key"), b_.Pem(b_.server_key));
  kube::testing::ReplaceFile(Serving("crt"), b_.Pem(b_.server_crt));
  ASSERT_TRUE(kube::testing::WaitUntil([&] { return Filter(Client(b_, false)).first == 200; },
                                       std::chrono::milliseconds(10000)));
  EXPECT_NE(Filter(Client(a_, false)).second, "");
  EXPECT_GE(server_->stats().tls_reloads, 1u);
  ASSERT_TRUE(before.Send("GET /healthz HTTP/1.1\r\nHost: h\r\n\r\n"));
  EXPECT_EQ(before.Read().status, 200);
  // A broken certificate file: the previous certificate stays.
  kube::testing::ReplaceFile(Serving("crt"), "not a certificate\n");
  ASSERT_TRUE(kube::testing::WaitUntil([&] { return server_->stats().tls_reload_errors >= 1; },
                                       std::chrono::milliseconds(10000)));
  EXPECT_EQ(Filter(Client(b_, false)).first, 200);
}

TEST_F(TlsServerTest, StartRefusesFilesThatDoNotLoadNamingTheFlag) {
  HttpServerOptions o = Options();
  o.tls = {Serving("crt"), a_.client_key, ""};
  HttpServer mismatched(o, Routes(extender_, Readiness{true, ""}, ""));
  const Status s = mismatched.Start();
  EXPECT_NE(s.message().find("--tls-private-key-file " + a_.client_key +
                             ": does not match the certificate"),
            std::string::npos)
      << s.message();
  o.tls = {dir_a_.path(), Serving("key"), ""};
  HttpServer directory(o, Routes(extender_, Readiness{true, ""}, ""));
  EXPECT_NE(
      directory.Start().message().find("--tls-cert-file " + dir_a_.path() + ": not a regular file"),
      std::string::npos);
  o.tls = {Serving("crt"), Serving("key"), Serving("key")};
  HttpServer bad_ca(o, Routes(extender_, Readiness{true, ""}, ""));
  EXPECT_NE(bad_ca.Start().message().find("--client-ca-file"), std::string::npos);
}

}  // namespace
}  // namespace gpushare::scheduler
