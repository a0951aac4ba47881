// gpushare-scheduler's HTTP/1.1 server over real sockets, with raw clients that send exactly
// the bytes under test: keep-alive and pipelining, what Go's client sends (Accept-Encoding:
// gzip, never answered compressed), curl's "Expect: 100-continue", bodies over the limit
// (answered 413 and still readable), stalled and idle connections (never holding every
// worker), HTTP/1.0, HEAD, malformed requests, and a prompt Stop().
#include "scheduler/http_server.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <memory>
#include <thread>
#include <vector>

#include "scheduler/cache.h"
#include "scheduler/extender.h"

namespace gpushare::scheduler {
namespace {

using Clock = std::chrono::steady_clock;

// One raw TCP connection to the server.
class Raw {
 public:
  // `rcvbuf` > 0: a small receive buffer (set before connecting, so the window stays small).
  explicit Raw(int port, int rcvbuf = 0) {
    fd_ = ::socket(AF_INET, SOCK_STREAM, 0);
    if (rcvbuf > 0) ::setsockopt(fd_, SOL_SOCKET, SO_RCVBUF, &rcvbuf, sizeof rcvbuf);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_port = htons(static_cast<uint16_t>(port));
    ::inet_pton(AF_INET, "127.0.0.1", &a.sin_addr);
    connected_ = ::connect(fd_, reinterpret_cast<sockaddr*>(&a), sizeof a) == 0;
  }
  ~Raw() { ::close(fd_); }
  bool connected() const { return connected_; }
  int fd() const { return fd_; }
  bool Send(std::string_view s) {
    while (!s.empty()) {
      const ssize_t n = ::send(fd_, s.data(), s.size(), MSG_NOSIGNAL);
      if (n <= 0) return false;
      s.remove_prefix(static_cast<size_t>(n));
    }
    return true;
  }
  struct Response {
    int status = 0;  // 0: none (closed or timed out)
    std::string head;
    std::string body;
  };
  // Reads one response (Content-Length framed); HEAD responses have no body.
  Response Read(bool head_only = false, int timeout_ms = 5000) {
    Response r;
    size_t end;
    while ((end = buf_.find("\r\n\r\n")) == std::string::npos)
      if (!Fill(timeout_ms)) return r;
    r.head = buf_.substr(0, end + 2);
    r.status = std::atoi(r.head.c_str() + 9);
    size_t length = 0;
    const size_t cl = r.head.find("Content-Length: ");
    if (cl != std::string::npos && !head_only && r.status != 100) length = std::strtoull(r.head.c_str() + cl + 16, nullptr, 10);
    while (buf_.size() < end + 4 + length)
      if (!Fill(timeout_ms)) return Response{};
    r.body = buf_.substr(end + 4, length);
    buf_.erase(0, end + 4 + length);
    return r;
  }
  // True when the server closed the connection (EOF) within the timeout.
  bool Closed(int timeout_ms = 5000) {
    Got g;
    while ((g = Receive(timeout_ms)) == Got::kData) {
    }
    return g == Got::kClosed;
  }

 private:
  enum class Got { kData, kClosed, kTimeout };
  // Appends what arrives within the timeout to buf_.
  Got Receive(int timeout_ms) {
    pollfd p{fd_, POLLIN, 0};
    if (::poll(&p, 1, timeout_ms) <= 0) return Got::kTimeout;
    char c[65536];
    const ssize_t n = ::recv(fd_, c, sizeof c, 0);
    if (n <= 0) return Got::kClosed;
    buf_.append(c, static_cast<size_t>(n));
    return Got::kData;
  }
  bool Fill(int timeout_ms) { return Receive(timeout_ms) == Got::kData; }
  int fd_ = -1;
  bool connected_ = false;
  std::string buf_;
};

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
  void Start(int threads = 4, int read_timeout = 2, int keep_alive = 30, size_t max_body = 1 << 20) {
    StartWith(Options(threads, read_timeout, keep_alive, max_body));
  }
  void StartWith(const HttpServerOptions& o) {
    cache_.SetSynced(true);
    server_ = std::make_unique<HttpServer>(extender_, o, [] { return Readiness{false, "informers syncing"}; },
                                           [] { return std::string("m 1\n"); });
    ASSERT_TRUE(server_->Start().ok());
  }
  void TearDown() override {
    if (server_) server_->Stop();
  }
  static std::string Post(std::string_view path, std::string_view body, std::string_view extra = "") {
    return "POST " + std::string(path) + " HTTP/1.1\r\nHost: 127.0.0.1\r\nUser-Agent: Go-http-client/1.1\r\nContent-Length: " +
           std::to_string(body.size()) + "\r\nContent-Type: application/json\r\n" + std::string(extra) + "\r\n" +
           std::string(body);
  }

  GpuCache cache_;
  Extender extender_{cache_, nullptr};
  std::unique_ptr<HttpServer> server_;
};

const char* kFilter = R"({"Pod":{"metadata":{"name":"p","namespace":"d","uid":"u"},"spec":{"containers":[{"name":"c",)"
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
    EXPECT_NE(r.body.find("\"FailedAndUnresolvableNodes\":{\"ghost\""), std::string::npos) << r.body;
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
  ASSERT_TRUE(c.Send("GET /healthz HTTP/1.1\r\nHost: h\r\n\r\nGET /readyz HTTP/1.1\r\nHost: h\r\n\r\n" +
                     Post("/gpushare-scheduler/prioritize", kFilter) + "GET /metrics HTTP/1.1\r\nHost: h\r\n\r\n"));
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
  std::string chunked = "POST /gpushare-scheduler/filter HTTP/1.1\r\nHost: h\r\nTransfer-Encoding: chunked\r\n"
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
  const std::string head = "POST /gpushare-scheduler/filter HTTP/1.1\r\nHost: h\r\nContent-Type: application/json\r\n"
                           "Expect: 100-continue\r\nContent-Length: " + std::to_string(body.size()) + "\r\n\r\n";
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
    EXPECT_NE(r.body.find("larger than 4096 bytes (--max-body-bytes)"), std::string::npos) << r.body;
    EXPECT_NE(r.head.find("Connection: close"), std::string::npos);
  }
  {
    // With "Expect: 100-continue" the client has not sent the body: answered at once, no wait.
    Raw c(server_->port());
    const auto t0 = Clock::now();
    ASSERT_TRUE(c.Send("POST /gpushare-scheduler/filter HTTP/1.1\r\nHost: h\r\nContent-Length: 999999\r\n"
                       "Expect: 100-continue\r\n\r\n"));
    EXPECT_EQ(c.Read().status, 413);
    EXPECT_TRUE(c.Closed());
    EXPECT_LT(Clock::now() - t0, std::chrono::milliseconds(1500));
  }
  {
    Raw c(server_->port());
    std::string chunked = "POST /gpushare-scheduler/filter HTTP/1.1\r\nHost: h\r\nTransfer-Encoding: chunked\r\n\r\n";
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
      {"POST /gpushare-scheduler/filter HTTP/1.1\r\nHost: h\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n", 400, "chunk"},
      {"GET / HTTP/1.1\r\nHost: h\r\nX: " + std::string(70000, 'a') + "\r\n\r\n", 431, "larger than 65536"},
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
  ASSERT_TRUE(c.Send(Post("/gpushare-scheduler/preempt", "{}")));
  Raw::Response nf = c.Read();
  EXPECT_EQ(nf.status, 404);
  EXPECT_NE(nf.body.find("served: /gpushare-scheduler/filter"), std::string::npos) << nf.body;
  ASSERT_TRUE(c.Send("GET /gpushare-scheduler/bind HTTP/1.1\r\nHost: h\r\n\r\n"));
  Raw::Response na = c.Read();
  EXPECT_EQ(na.status, 405);
  EXPECT_NE(na.head.find("Allow: POST"), std::string::npos);
  ASSERT_TRUE(c.Send("POST /gpushare-scheduler/bind HTTP/1.1\r\nHost: h\r\nContent-Type: text/plain\r\nContent-Length: 2\r\n\r\n{}"));
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
  ASSERT_TRUE(short_body.Send("POST /gpushare-scheduler/filter HTTP/1.1\r\nHost: h\r\nContent-Length: 100\r\n\r\n{"));
  EXPECT_TRUE(short_body.Closed(4000));
}

TEST_F(HttpServerTest, StopIsPromptWithConnectionsOpen) {
  Start(2, 30, 60);
  Raw a(server_->port()), b(server_->port()), queued(server_->port());
  ASSERT_TRUE(a.Send("GET /healthz HTTP/1.1\r\nHost: h\r\n\r\n"));
  ASSERT_EQ(a.Read().status, 200);
  ASSERT_TRUE(b.Send("POST /gpushare-scheduler/filter HTTP/1.1\r\nHost: h\r\nContent-Length: 100\r\n\r\n{"));
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
  HttpServer second(extender_, o, nullptr);
  const Status s = second.Start();
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.message().find("127.0.0.1:" + std::to_string(server_->port())), std::string::npos) << s.message();
  o.host = "no-such-host.invalid";
  o.port = 0;
  HttpServer third(extender_, o, nullptr);
  EXPECT_FALSE(third.Start().ok());
}


// Raises this process's soft RLIMIT_NOFILE to the hard limit; returns the soft limit now.
rlim_t RaiseFdLimit() {
  rlimit r{};
  ::getrlimit(RLIMIT_NOFILE, &r);
  r.rlim_cur = r.rlim_max;
  ::setrlimit(RLIMIT_NOFILE, &r);
  ::getrlimit(RLIMIT_NOFILE, &r);
  return r.rlim_cur;
}

// One real filter request on a new connection: the status (0: none within 10 s) and the time
// from connect to the complete reply.
std::pair<int, double> TimedFilter(int port) {
  const auto t0 = Clock::now();
  Raw c(port);
  if (!c.connected()) return {0, 0};
  const std::string req = "POST /gpushare-scheduler/filter HTTP/1.1\r\nHost: h\r\nContent-Type: application/json\r\n"
                          "Content-Length: " + std::to_string(std::string_view(kFilter).size()) + "\r\n\r\n" + kFilter;
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
      for (int i = 0; i < 10 && !done.load(); ++i) std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
  });
  std::this_thread::sleep_for(std::chrono::milliseconds(300));
  std::vector<double> latencies;
  for (int i = 0; i < 5; ++i) {
    const auto [status, ms] = TimedFilter(server_->port());
    EXPECT_EQ(status, 200) << "real request " << i << " not answered while 24 slowloris connections trickle";
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
  if (idle_count < 1000) GTEST_SKIP() << "RLIMIT_NOFILE hard limit " << limit << " too low for 1,000 idle connections";
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
    EXPECT_EQ(status, 200) << "real request " << i << " not answered with " << idle_count << " idle connections";
    latencies.push_back(ms);
  }
  for (double ms : latencies) {
    std::printf("filter with %d idle connections open: %.2f ms\n", idle_count, ms);
    EXPECT_LT(ms, 2000.0);
  }
  for (int i = 0; i < idle_count; i += 10) EXPECT_EQ(idle[static_cast<size_t>(i)]->Read(false, 20000).status, 200) << i;
}

// The head deadline covers the whole head, not each read: a client that sends a byte every
// 100 ms is answered 408 and closed soon after the deadline (1 s here).
TEST_F(HttpServerTest, AHeadTrickledPastItsDeadlineGets408) {
  Start(/*threads=*/4, /*read_timeout=*/1, /*keep_alive=*/30);
  Raw c(server_->port());
  const std::string head = "POST /gpushare-scheduler/filter HTTP/1.1\r\nHost: h\r\nX-Long: " + std::string(200, 'a');
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
  ASSERT_TRUE(c.Send("POST /gpushare-scheduler/filter HTTP/1.1\r\nHost: h\r\nContent-Type: application/json\r\n"
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
// the oldest one still sending its head does.
TEST_F(HttpServerTest, AtTheConnectionLimitTheOldestIdleConnectionGoesFirst) {
  HttpServerOptions o = Options(4, 30, 60);
  o.max_connections = 16;
  StartWith(o);
  std::vector<std::unique_ptr<Raw>> idle;
  for (int i = 0; i < 16; ++i) {
    idle.push_back(std::make_unique<Raw>(server_->port()));
    ASSERT_TRUE(idle.back()->Send("GET /healthz HTTP/1.1\r\nHost: h\r\n\r\n"));
    ASSERT_EQ(idle.back()->Read().status, 200);
  }
  EXPECT_EQ(TimedFilter(server_->port()).first, 200);
  EXPECT_TRUE(idle[0]->Closed(2000));  // the oldest
  ASSERT_TRUE(idle[15]->Send("GET /healthz HTTP/1.1\r\nHost: h\r\n\r\n"));
  EXPECT_EQ(idle[15]->Read().status, 200);  // the newest is still served
  idle.clear();
  // Now 16 slow heads and no idle connection.
  std::vector<std::unique_ptr<Raw>> slow;
  for (int i = 0; i < 16; ++i) {
    slow.push_back(std::make_unique<Raw>(server_->port()));
    ASSERT_TRUE(slow.back()->Send("POST /gpushare-scheduler/filter HTTP/1.1\r\n"));
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  EXPECT_EQ(TimedFilter(server_->port()).first, 200);
  EXPECT_TRUE(slow[0]->Closed(2000));
  EXPECT_GE(server_->stats().evicted, 2u);
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
    ASSERT_TRUE(partial.back()->Send("POST /gpushare-scheduler/filter HTTP/1.1\r\nHost: h\r\n"
                                     "Content-Type: application/json\r\nContent-Length: 500000\r\n\r\n" +
                                     std::string(100000, ' ')));
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  EXPECT_EQ(TimedFilter(server_->port()).first, 200);
  EXPECT_TRUE(partial[0]->Closed(2000));  // the oldest gave way
  EXPECT_GE(server_->stats().evicted, 1u);
}

// A reply larger than the socket takes is finished by the I/O thread while the client is slow
// to read, without holding a worker; one that is never read is dropped after the read timeout.
TEST_F(HttpServerTest, LargeRepliesToSlowReadersHoldNoWorker) {
  Start(/*threads=*/1, /*read_timeout=*/2, /*keep_alive=*/30, /*max_body=*/8u << 20);
  std::string names;
  for (int i = 0; i < 60000; ++i) names += std::string(i ? "," : "") + "\"ghost-node-" + std::to_string(i) + "\"";
  const std::string body =
      R"({"Pod":{"metadata":{"name":"p","namespace":"d","uid":"u"},"spec":{"containers":[{"name":"c",)"
      R"("resources":{"limits":{"aliyun.com/gpu-mem":"3"}}}]}},"Nodes":null,"NodeNames":[)" + names + "]}";
  // Small receive windows: the ~5 MB reply cannot all sit in the socket buffers (the sender's
  // is at most net.ipv4.tcp_wmem's 4 MB here).
  Raw slow(server_->port(), 4096);
  ASSERT_TRUE(slow.Send(Post("/gpushare-scheduler/filter", body)));
  Raw never(server_->port(), 4096);
  ASSERT_TRUE(never.Send(Post("/gpushare-scheduler/filter", body)));
  std::this_thread::sleep_for(std::chrono::milliseconds(500));
  // The only worker is free again: another request is answered at once.
  EXPECT_EQ(TimedFilter(server_->port()).first, 200);
  Raw::Response r = slow.Read(false, 5000);
  EXPECT_EQ(r.status, 200);
  EXPECT_GE(r.body.size(), 4u << 20);
  EXPECT_NE(r.body.find("ghost-node-59999"), std::string::npos);
  // The reply nobody reads is given up after the read timeout (2 s): the connection ends
  // before its whole reply arrived.
  std::this_thread::sleep_for(std::chrono::milliseconds(3000));
  Raw::Response cut = never.Read(false, 2000);
  EXPECT_EQ(cut.status, 0) << "a reply of " << cut.body.size() << " bytes arrived whole";
  EXPECT_GE(server_->stats().timeouts, 1u);
}

}  // namespace
}  // namespace gpushare::scheduler
