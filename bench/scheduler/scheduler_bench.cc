// gpushare-scheduler benchmarks (docs/benchmarks.md, "Scheduler extender"):
//
//   BM_FilterPrioritize/<nodes>   one pod's filter + prioritize through HTTP on loopback, in
//                                 node-cache mode (NodeNames), over <nodes> nodes x 8 GPUs x
//                                 24 GiB, with one bind changing one node between pods (as a
//                                 scheduling stream does). Counters: p50/p99 of the two round
//                                 trips together and of each, in ms. Target: p99 < 5 ms at 5000.
//   BM_FilterUnderAttack/5000/<attack>/<new connection>   a real filter request, quiet or
//                                 with 1,000 idle and 16 slowloris connections open (issue 10
//                                 §3; target: served within 100 ms whatever they are).
//   BM_Bind/<clients>             binds per second through HTTP against the API-server double
//                                 (merge patch + Binding per pod, informers running), with
//                                 <clients> concurrent kube-scheduler binding goroutines.
//                                 Target: 200+ binds/s.
//   BM_Preempt/<nodes>/<candidates>   the preempt verb (scheduler/preempt.h) on a full cluster of
//                                 <nodes> nodes x 8 GPUs x 24 GiB (eight confirmed 3 GiB pods
//                                 of priority 0 on every GPU), for a 24 GiB pod of priority
//                                 1000 with kube-scheduler's candidates on <candidates> nodes
//                                 (its default at 5,000 nodes: 10%, 500), 8 proposed victims
//                                 each: body in, reply out, the hold recorded. Bound:
//                                 kube-scheduler's extender httpTimeout (10 s in the shipped
//                                 configuration); target: milliseconds.
//   BM_GpuChoice/<nodes>/<mode>   one pod's GpuCache::Filter + Score in process over <nodes>
//                                 nodes x 8 GPUs of 80 GiB (4 A10, 4 A100 by model), each
//                                 GPU holding one 3 GiB pod; the pod chooses: 0 nothing, 1 not
//                                 one GPU of one node (nouse-gpuuuid: one mask), 2 the A100s
//                                 (use-gputype: four masks on every node), 3 a model no node
//                                 has (every node refused, no mask). What a GPU choice
//                                 (core/gpu_selector.h) costs a decision.
//   BM_Inspect/<nodes>/<mode>     PREFIX/inspect's handler (scheduler/inspect.h) over <nodes>
//                                 nodes x 8 GPUs, one confirmed 3 GiB pod per GPU, by part:
//                                 0 the informers' List copies (all that runs under their
//                                 locks), 1 + the objects' copies (InspectInput), 2 Build alone,
//                                 3 ToJson + dump alone, 4 the whole handler, 5 the whole handler
//                                 for one node, 6 PREFIX/debug/cache (the cache's view, copied
//                                 under the cache's lock, encoded outside it).
//
// The request bodies are built before timing (that is kube-scheduler's cost, not ours); what is
// timed is the HTTP exchange: the extender's decoding, decision and encoding, and loopback TCP.
#include <arpa/inet.h>
#include <benchmark/benchmark.h>
#include <httplib.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstring>
#include <nlohmann/json.hpp>
#include <optional>
#include <random>
#include <string_view>
#include <thread>
#include <unordered_map>

#include "core/memshare.h"
#include "kube/client.h"
#include "kube/memshare_pod.h"
#include "net/http_server.h"
#include "scheduler/cache.h"
#include "scheduler/extender.h"
#include "scheduler/inspect.h"
#include "scheduler/metrics.h"
#include "scheduler/preempt.h"
#include "scheduler/routes.h"
#include "scheduler/service.h"
#include "scheduler/wire.h"
#include "tests/fakes/apiserver/fake_apiserver.h"
#include "tests/scheduler/fixtures.h"

namespace gpushare::scheduler {
namespace {

using json = nlohmann::json;
namespace ms = memshare;

json NodeJson(const std::string& name, int gpus, int64_t units) {
  ms::NodeInventory inv;
  for (int i = 0; i < gpus; ++i) {
    ms::InventoryGpu g;
    g.index = i;
    g.uuid = "GPU-" + name + "-" + std::to_string(i);
    g.model = "NVIDIA A10";
    g.units = units;
    g.memory_mib = units * 1024;
    inv.gpus.push_back(g);
  }
  return {{"metadata",
           {{"name", name},
            {"annotations", {{std::string(ms::kInventoryAnnotation), ms::EncodeInventory(inv)}}}}},
          {"status", {{"allocatable", {{"aliyun.com/gpu-mem", std::to_string(gpus * units)}}}}}};
}

// A Knative-style pod as kube-scheduler would send it (the tests' seed-workload pod:
// user-container with `units` GiB, queue-proxy), named `name`.
json PodJson(const std::string& name, int64_t units) {
  json p = testing::KnativePod("helloworld-go", "default", 0, "user-container",
                               "registry.example/helloworld-go:latest", units);
  p["metadata"]["name"] = name;
  p["metadata"]["uid"] = "uid-" + name;
  return p;
}

// CPU time of the whole process (client and server threads), in ms.
double ProcessCpuMs() {
  rusage u{};
  getrusage(RUSAGE_SELF, &u);
  return (u.ru_utime.tv_sec + u.ru_stime.tv_sec) * 1e3 +
         (u.ru_utime.tv_usec + u.ru_stime.tv_usec) / 1e3;
}

double Percentile(std::vector<double> v, double q) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  const size_t i = std::min(v.size() - 1, static_cast<size_t>(q * static_cast<double>(v.size())));
  return v[i];
}

// GoLikeClient: one keep-alive HTTP/1.1 connection used the way kube-scheduler's extender
// client (Go net/http, http.Transport with SetTransportDefaults) uses its connection, so that
// the client's own cost in the timed exchange resembles kube-scheduler's rather than another
// library's:
//   - the request goes out as Go writes it: headers in Go's order, including the
//     `Accept-Encoding: gzip` the transport adds by itself, through a 4 KiB buffered writer
//     (the first 4 KiB in one write, the rest of the body in a second);
//   - the reply is read as bufio (4 KiB) + json.Decoder read it: one read for the headers,
//     then reads into a buffer that doubles, with no poll before a read (Go's netpoller only
//     parks when a read would block).
// TCP_NODELAY is set, as Go's net package does. Only what the extender sends is understood:
// a status line, headers, a Content-Length body. A compressed reply is reported, not inflated.
class GoLikeClient {
 public:
  explicit GoLikeClient(int port) : host_("127.0.0.1:" + std::to_string(port)) {
    fd_ = ::socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_port = htons(static_cast<uint16_t>(port));
    ::inet_pton(AF_INET, "127.0.0.1", &a.sin_addr);
    if (fd_ < 0 || ::connect(fd_, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0) {
      Close();
      return;
    }
    int one = 1;
    ::setsockopt(fd_, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
  }
  ~GoLikeClient() { Close(); }
  GoLikeClient(const GoLikeClient&) = delete;
  GoLikeClient& operator=(const GoLikeClient&) = delete;
  bool ok() const { return fd_ >= 0; }

  struct Reply {
    int status = 0;  // 0: transport error
    std::string body;
    bool compressed = false;  // the server sent Content-Encoding
  };
  Reply Post(const std::string& path, const std::string& body) {
    Reply r;
    const std::string head =
        "POST " + path + " HTTP/1.1\r\nHost: " + host_ +
        "\r\nUser-Agent: Go-http-client/1.1\r\nContent-Length: " + std::to_string(body.size()) +
        "\r\nContent-Type: application/json\r\nAccept-Encoding: gzip\r\n\r\n";
    std::string first = head;
    const size_t inline_body = head.size() < kBuf ? std::min(body.size(), kBuf - head.size()) : 0;
    first.append(body, 0, inline_body);
    if (!WriteAll(first.data(), first.size()) ||
        !WriteAll(body.data() + inline_body, body.size() - inline_body)) {
      Close();
      return r;
    }
    // Headers: read until the blank line (the first read is at most 4 KiB, like bufio's).
    size_t end = std::string::npos;
    while ((end = std::string_view(buf_.data(), have_).find("\r\n\r\n")) == std::string::npos) {
      if (have_ == buf_.size()) buf_.resize(buf_.size() * 2);
      if (!ReadSome(std::min(kBuf, buf_.size() - have_))) return r;
    }
    const std::string_view headers(buf_.data(), end + 2);
    if (headers.size() < 12 || headers.substr(0, 9) != "HTTP/1.1 ") return r;
    const int status = std::atoi(headers.data() + 9);
    size_t length = 0;
    bool have_length = false;
    for (size_t p = headers.find("\r\n") + 2; p < headers.size();) {
      const size_t eol = headers.find("\r\n", p);
      const std::string_view line = headers.substr(p, eol - p);
      const size_t colon = line.find(':');
      if (colon != std::string_view::npos) {
        std::string key(line.substr(0, colon));
        for (char& c : key) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
        const std::string_view value = line.substr(line.find_first_not_of(' ', colon + 1));
        if (key == "content-length") {
          length = std::strtoull(std::string(value).c_str(), nullptr, 10);
          have_length = true;
        } else if (key == "content-encoding" && value != "identity") {
          r.compressed = true;
        }
      }
      p = eol + 2;
    }
    if (!have_length) return r;
    // The body: reads into a doubling buffer, as json.Decoder's refill grows its own.
    const size_t body_start = end + 4;
    const size_t want = body_start + length;
    if (buf_.size() < want) buf_.resize(std::max(want, buf_.size() * 2));
    size_t chunk = kBuf;
    while (have_ < want) {
      if (!ReadSome(std::min(chunk, buf_.size() - have_))) return r;
      chunk *= 2;
    }
    r.status = status;
    r.body.assign(buf_.data() + body_start, length);
    // Anything after the reply would belong to the next one (never the case here).
    std::memmove(buf_.data(), buf_.data() + want, have_ - want);
    have_ -= want;
    return r;
  }

 private:
  static constexpr size_t kBuf = 4096;
  bool WriteAll(const char* p, size_t n) {
    while (n > 0) {
      const ssize_t w = ::write(fd_, p, n);
      if (w <= 0) return false;
      p += w;
      n -= static_cast<size_t>(w);
    }
    return true;
  }
  bool ReadSome(size_t max) {
    const ssize_t n = ::read(fd_, buf_.data() + have_, max);
    if (n <= 0) {
      Close();
      return false;
    }
    have_ += static_cast<size_t>(n);
    return true;
  }
  void Close() {
    if (fd_ >= 0) ::close(fd_);
    fd_ = -1;
  }

  std::string host_;
  int fd_ = -1;
  std::vector<char> buf_ = std::vector<char>(kBuf);
  size_t have_ = 0;
};

// Node names as EKS gives them ("ip-10-0-19-237.us-west-2.compute.internal", 41 characters;
// GKE's "gke-<cluster>-<pool>-<hash>-<id>" are as long): longer than std::string's 15-character
// inline buffer, so a copy of a name costs an allocation, as it would in production.
std::string NodeName(int n) {
  return "ip-10-" + std::to_string(n / 62500) + "-" + std::to_string(n / 250 % 250) + "-" +
         std::to_string(n % 250 + 1) + ".us-west-2.compute.internal";
}

// A cache over `nodes` nodes x 8 GPUs x 24 GiB, partly used: 0..39 pods of 3 GiB per node.
struct Cluster {
  GpuCache cache;
  std::vector<std::string> names;
  std::mt19937 rng{42};
  int64_t next = 0;

  explicit Cluster(int nodes) {
    for (int n = 0; n < nodes; ++n) {
      names.push_back(NodeName(n));
      cache.UpsertNode(*kube::DecodeNode(NodeJson(names.back(), 8, 24)));
    }
    cache.SetSynced(true);
    for (int n = 0; n < nodes; ++n) {
      const int pods = static_cast<int>(rng() % 40);
      for (int i = 0; i < pods; ++i) Place(names[n]);
    }
  }
  // Books one more 3 GiB pod on `node` (a bind).
  void Place(const std::string& node) {
    const json p = PodJson("pod-" + std::to_string(next++), 3);
    const kube::Pod pod = *kube::DecodePod(p);
    Result<Reservation> r = cache.Reserve(pod, *kube::PodMemRequest(pod), node, 1);
    if (r.ok()) cache.Commit(pod.metadata.uid, r->token);
  }
  void PlaceAnywhere() { Place(names[rng() % names.size()]); }
};

// The extender's HTTP server on a free loopback port (nullptr, and the benchmark skipped, if it
// cannot start).
using net::HttpServer;

std::unique_ptr<HttpServer> StartServer(Extender& extender, benchmark::State& state) {
  net::HttpServerOptions ho;
  ho.host = "127.0.0.1";
  ho.port = 0;
  ho.max_body_bytes = 64u << 20;
  auto server = std::make_unique<HttpServer>(ho, ExtenderRoutes(extender, "/gpushare-scheduler"));
  if (!server->Start().ok()) {
    state.SkipWithError("cannot start the HTTP server");
    return nullptr;
  }
  return server;
}

void BM_FilterPrioritize(benchmark::State& state) {
  const int nodes = static_cast<int>(state.range(0));
  const bool go_like = state.range(1) == 0;
  Cluster cluster(nodes);
  const std::vector<std::string>& names = cluster.names;
  Extender extender(cluster.cache, nullptr);
  std::unique_ptr<HttpServer> started = StartServer(extender, state);
  if (!started) return;
  HttpServer& server = *started;
  GoLikeClient go(server.port());
  httplib::Client http("127.0.0.1", server.port());
  http.set_keep_alive(true);
  http.set_tcp_nodelay(true);  // as Go's net/http (kube-scheduler) does
  int64_t compressed = 0;
  // One POST; the reply body, or nullopt on any failure.
  auto post = [&](const std::string& path, const std::string& body) -> std::optional<std::string> {
    if (go_like) {
      GoLikeClient::Reply r = go.Post(path, body);
      compressed += r.compressed ? 1 : 0;
      if (r.status != 200 || r.compressed) return std::nullopt;
      return std::move(r.body);
    }
    httplib::Result r = http.Post(path, body, "application/json");
    if (!r || r->status != 200) return std::nullopt;
    return std::move(r->body);
  };
  const json pod = PodJson("bench-pod", 3);
  const std::string filter_body =
      json{{"Pod", pod}, {"Nodes", nullptr}, {"NodeNames", names}}.dump();
  std::vector<double> total, filter, prioritize;
  double cpu = 0;
  size_t passed = 0;
  for (auto _ : state) {
    const double c0 = ProcessCpuMs();
    const auto t0 = std::chrono::steady_clock::now();
    std::optional<std::string> f = post("/gpushare-scheduler/filter", filter_body);
    const auto t1 = std::chrono::steady_clock::now();
    if (!f) {
      state.SkipWithError(compressed ? "the extender compressed its filter reply"
                                     : "filter failed");
      break;
    }
    state.PauseTiming();
    json reply = json::parse(*f);
    passed += reply["NodeNames"].size();
    const std::string prioritize_body =
        json{{"Pod", pod}, {"Nodes", nullptr}, {"NodeNames", reply["NodeNames"]}}.dump();
    state.ResumeTiming();
    const auto t2 = std::chrono::steady_clock::now();
    std::optional<std::string> p = post("/gpushare-scheduler/prioritize", prioritize_body);
    const auto t3 = std::chrono::steady_clock::now();
    if (!p) {
      state.SkipWithError(compressed ? "the extender compressed its prioritize reply"
                                     : "prioritize failed");
      break;
    }
    cpu += ProcessCpuMs() - c0;
    const double fm = std::chrono::duration<double, std::milli>(t1 - t0).count();
    const double pm = std::chrono::duration<double, std::milli>(t3 - t2).count();
    filter.push_back(fm);
    prioritize.push_back(pm);
    total.push_back(fm + pm);
    // The pod is bound somewhere: one node changes before the next pod, as in a stream.
    state.PauseTiming();
    cluster.PlaceAnywhere();
    state.ResumeTiming();
  }
  server.Stop();
  state.SetLabel(go_like ? "client:go-like" : "client:cpp-httplib");
  state.counters["p50_ms"] = Percentile(total, 0.50);
  state.counters["p99_ms"] = Percentile(total, 0.99);
  state.counters["max_ms"] = Percentile(total, 1.0);
  state.counters["filter_p50_ms"] = Percentile(filter, 0.50);
  state.counters["filter_p99_ms"] = Percentile(filter, 0.99);
  state.counters["prioritize_p50_ms"] = Percentile(prioritize, 0.50);
  state.counters["prioritize_p99_ms"] = Percentile(prioritize, 0.99);
  // Both round trips' CPU (client + server, including the client's parsing of the filter
  // reply and building the prioritize request): on a shared machine the wall-clock latency
  // also contains waiting for a core.
  state.counters["cpu_ms"] = total.empty() ? 0 : cpu / static_cast<double>(total.size());
  state.counters["request_kb"] = static_cast<double>(filter_body.size()) / 1024.0;
  state.counters["passed"] =
      total.empty() ? 0 : static_cast<double>(passed) / static_cast<double>(total.size());
}
// A fixed number of pods: the paused work (decoding the reply, the next bind) and the server's
// threads are not in the main thread's CPU time, so a MinTime would run for very long.
// Second argument: 0 = a client that reads and writes like kube-scheduler's Go client (the
// figure that counts), 1 = cpp-httplib's client (4 KiB reads with a poll before each).
BENCHMARK(BM_FilterPrioritize)
    ->ArgsProduct({{1000, 5000}, {0, 1}})
    ->Unit(benchmark::kMillisecond)
    ->UseRealTime()
    ->Iterations(2000);

// A real filter request while the server is under the attacks of issue 10 §3: 1,000 idle
// connections (a tenth after a keep-alive request) and 16 slowloris connections sending one
// header line a second, all opened before timing and kept open (slowloris ones cut off at the
// 10 s head deadline are replaced). Second argument: 0 = no attack (the same measurement on a
// quiet server), 1 = under attack. Third: 0 = on one keep-alive connection (as kube-scheduler
// does), 1 = on a new connection each time (connect included). Counters: p50/p99/max in ms.
void BM_FilterUnderAttack(benchmark::State& state) {
  const int nodes = static_cast<int>(state.range(0));
  const bool attack = state.range(1) == 1;
  const bool fresh = state.range(2) == 1;
  rlimit fds{};
  ::getrlimit(RLIMIT_NOFILE, &fds);
  fds.rlim_cur = fds.rlim_max;
  ::setrlimit(RLIMIT_NOFILE, &fds);
  if (attack && fds.rlim_cur < 1200) {
    state.SkipWithError("RLIMIT_NOFILE too low for 1,000 idle connections");
    return;
  }
  Cluster cluster(nodes);
  Extender extender(cluster.cache, nullptr);
  std::unique_ptr<HttpServer> started = StartServer(extender, state);
  if (!started) return;
  HttpServer& server = *started;
  auto connect = [&] {
    const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_port = htons(static_cast<uint16_t>(server.port()));
    ::inet_pton(AF_INET, "127.0.0.1", &a.sin_addr);
    if (::connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0) {
      ::close(fd);
      return -1;
    }
    return fd;
  };
  std::vector<int> idle;
  std::vector<int> slow(16, -1);
  std::atomic<bool> stop{false};
  std::thread slowloris;
  if (attack) {
    for (int i = 0; i < 1000; ++i) {
      idle.push_back(connect());
      if (i % 10 == 0) {
        const std::string req = "GET /healthz HTTP/1.1\r\nHost: h\r\n\r\n";
        (void)!::write(idle.back(), req.data(), req.size());
      }
    }
    slowloris = std::thread([&] {
      for (int line = 0; !stop.load(); ++line) {
        for (int& fd : slow) {
          const std::string bytes = fd < 0
                                        ? "POST /gpushare-scheduler/filter HTTP/1.1\r\nHost: h\r\n"
                                        : "X-Slow-" + std::to_string(line) + ": 1\r\n";
          if (fd < 0) fd = connect();
          if (fd >= 0 && ::send(fd, bytes.data(), bytes.size(), MSG_NOSIGNAL) <= 0) {
            ::close(fd);
            fd = -1;  // cut off at the head deadline: replaced at the next round
          }
        }
        for (int i = 0; i < 20 && !stop.load(); ++i)
          std::this_thread::sleep_for(std::chrono::milliseconds(50));
      }
    });
    std::this_thread::sleep_for(std::chrono::milliseconds(500));
  }
  const json pod = PodJson("bench-pod", 3);
  const std::string body =
      json{{"Pod", pod}, {"Nodes", nullptr}, {"NodeNames", cluster.names}}.dump();
  std::unique_ptr<GoLikeClient> kept = std::make_unique<GoLikeClient>(server.port());
  std::vector<double> ms;
  for (auto _ : state) {
    const auto t0 = std::chrono::steady_clock::now();
    std::unique_ptr<GoLikeClient> once =
        fresh ? std::make_unique<GoLikeClient>(server.port()) : nullptr;
    GoLikeClient& c = fresh ? *once : *kept;
    const GoLikeClient::Reply r = c.Post("/gpushare-scheduler/filter", body);
    if (r.status != 200) {
      state.SkipWithError("filter failed");
      break;
    }
    ms.push_back(
        std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count());
  }
  stop = true;
  if (slowloris.joinable()) slowloris.join();
  for (int fd : idle) ::close(fd);
  for (int fd : slow)
    if (fd >= 0) ::close(fd);
  server.Stop();
  state.SetLabel(std::string(attack ? "1000 idle + 16 slowloris" : "quiet") +
                 (fresh ? ", new connection" : ", keep-alive"));
  state.counters["p50_ms"] = Percentile(ms, 0.50);
  state.counters["p99_ms"] = Percentile(ms, 0.99);
  state.counters["max_ms"] = Percentile(ms, 1.0);
}
BENCHMARK(BM_FilterUnderAttack)
    ->ArgsProduct({{5000}, {0, 1}, {0, 1}})
    ->Unit(benchmark::kMillisecond)
    ->UseRealTime()
    ->Iterations(500);

// Where the time goes at 5000 nodes, without HTTP: the extender's verbs on a request body
// (decode + decide + encode), and the cache's decisions alone.
void BM_Verbs(benchmark::State& state) {
  Cluster cluster(static_cast<int>(state.range(0)));
  Extender extender(cluster.cache, nullptr);
  const json pod = PodJson("bench-pod", 3);
  const std::string body =
      json{{"Pod", pod}, {"Nodes", nullptr}, {"NodeNames", cluster.names}}.dump();
  const int verb = static_cast<int>(state.range(1));
  const ms::PodRequest req = *kube::PodMemRequest(*kube::DecodePod(pod));
  const std::vector<std::string_view> views(cluster.names.begin(), cluster.names.end());
  for (auto _ : state) {
    switch (verb) {
      case 0:
        benchmark::DoNotOptimize(extender.Filter(body));
        break;
      case 1:
        benchmark::DoNotOptimize(extender.Prioritize(body));
        break;
      case 2:
        benchmark::DoNotOptimize(cluster.cache.Filter(req, views));
        break;
      case 3:
        benchmark::DoNotOptimize(cluster.cache.Score(req, views));
        break;
      case 4:
        benchmark::DoNotOptimize(ParseExtenderArgs(body));
        break;
      default:
        benchmark::DoNotOptimize(ParseExtenderArgsGeneral(body));
        break;
    }
    state.PauseTiming();
    cluster.PlaceAnywhere();
    state.ResumeTiming();
  }
  static const char* kNames[] = {"Extender::Filter",  "Extender::Prioritize",
                                 "GpuCache::Filter",  "GpuCache::Score",
                                 "ParseExtenderArgs", "ParseExtenderArgsGeneral"};
  state.SetLabel(kNames[verb]);
}
BENCHMARK(BM_Verbs)->ArgsProduct({{5000}, {0, 1, 2, 3, 4, 5}})->Unit(benchmark::kMillisecond);

// --- preemption --------------------------------------------------------------------------------

void BM_Preempt(benchmark::State& state) {
  const int nodes = static_cast<int>(state.range(0));
  const int candidates = static_cast<int>(state.range(1));
  GpuCache cache;
  std::unordered_map<std::string, std::shared_ptr<const kube::Pod>> pods;
  std::vector<std::string> names;
  json meta = json::object();
  for (int n = 0; n < nodes; ++n) {
    names.push_back(NodeName(n));
    cache.UpsertNode(*kube::DecodeNode(NodeJson(names.back(), 8, 24)));
  }
  cache.SetSynced(true);
  for (int n = 0; n < nodes; ++n) {
    json victims = json::array();
    for (int g = 0; g < 8; ++g) {
      for (int k = 0; k < 8; ++k) {
        json p = testing::SimplePod(
            "p-" + std::to_string(n) + "-" + std::to_string(g) + "-" + std::to_string(k), 3);
        p["spec"]["nodeName"] = names[n];
        p["spec"]["priority"] = 0;
        p["status"]["phase"] = "Running";
        p["status"]["startTime"] = "2026-12-01T00:00:00Z";
        const ms::PodRequest req = *kube::PodMemRequest(*kube::DecodePod(p));
        auto a = ms::BindAnnotations(req, {g}, 24, 1);
        for (const auto& [key, v] : ms::ConfirmAnnotations(req, {{"main", g}})) a[key] = v;
        for (const auto& [key, v] : a) p["metadata"]["annotations"][key] = v;
        auto pod = std::make_shared<const kube::Pod>(*kube::DecodePod(p));
        cache.UpsertPod(*pod);
        if (g == 0) victims.push_back(json{{"UID", pod->metadata.uid}});  // node-total's choice
        pods[pod->Key()] = std::move(pod);
      }
    }
    if (n < candidates) meta[names[n]] = json{{"Pods", victims}, {"NumPDBViolations", 0}};
  }
  PreemptOptions po;
  po.pod_lookup = [&pods](const std::string& key) -> std::shared_ptr<const kube::Pod> {
    const auto it = pods.find(key);
    return it == pods.end() ? nullptr : it->second;
  };
  Preemptor preemptor(cache, po);
  std::vector<double> ms_taken;
  size_t victims = 0;
  int64_t i = 0;
  for (auto _ : state) {
    json pod = testing::SimplePod("serving-" + std::to_string(i++), 24);
    pod["spec"]["priority"] = 1000;
    const std::string body =
        json{{"Pod", pod}, {"NodeNameToVictims", nullptr}, {"NodeNameToMetaVictims", meta}}.dump();
    const auto t0 = std::chrono::steady_clock::now();
    HttpReply r = preemptor.Preempt(body);
    ms_taken.push_back(
        std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count());
    state.PauseTiming();
    const json reply = json::parse(r.body)["NodeNameToMetaVictims"];
    if (r.code != 200 || reply.size() != 1)
      state.SkipWithError(("unexpected reply: " + r.body).c_str());
    for (const auto& [node, v] : reply.items()) victims = v["Pods"].size();
    cache.DeletePod(*kube::DecodePod(pod));  // the hold ends; the cluster is as it was
    state.ResumeTiming();
  }
  state.counters["p50_ms"] = Percentile(ms_taken, 0.5);
  state.counters["p99_ms"] = Percentile(ms_taken, 0.99);
  state.counters["victims"] = static_cast<double>(victims);
}
BENCHMARK(BM_Preempt)
    ->Args({5000, 500})
    ->Args({5000, 5000})
    ->Unit(benchmark::kMillisecond)
    ->MinTime(2);

// --- binds -------------------------------------------------------------------------------------

struct BindRig {
  fakes::FakeApiServer api;
  std::unique_ptr<SchedulerService> service;
  std::vector<json> pods;
  std::atomic<size_t> next{0};
  std::vector<std::string> nodes;
  std::string dir;
  bool ok = false;

  BindRig() {
    if (!api.Start().ok()) return;
    for (int n = 0; n < 50; ++n) {
      nodes.push_back("gpu-node-" + std::to_string(n));
      api.Upsert(fakes::Resource::kNodes, NodeJson(nodes.back(), 8, 24));
    }
    for (int i = 0; i < 6000; ++i) {
      json p = PodJson("bind-" + std::to_string(i), 1);
      p["kind"] = "Pod";
      pods.push_back(api.Upsert(fakes::Resource::kPods, p));
    }
    char tmpl[] = "/tmp/gpushare-bench-XXXXXX";
    dir = ::mkdtemp(tmpl);
    const std::string kubeconfig = dir + "/kubeconfig";
    FILE* f = std::fopen(kubeconfig.c_str(), "w");
    std::fprintf(
        f,
        "apiVersion: v1\nkind: Config\nclusters:\n- name: c\n  cluster:\n    server: %s\nusers:\n- "
        "name: u\n  "
        "user: {}\ncontexts:\n- name: c\n  context: {cluster: c, user: u}\ncurrent-context: c\n",
        api.url().c_str());
    std::fclose(f);
    (void)ConfigureSchedulerLogging("warn");
    ServiceOptions o;
    o.kubeconfig = kubeconfig;
    o.http.host = "127.0.0.1";
    o.http.port = 0;
    o.kube_qps = 0;  // the API double is what is measured, not the client-side limiter
    service = std::make_unique<SchedulerService>(o);
    if (!service->Start().ok()) return;
    for (int i = 0; i < 2000 && !service->readiness().ready; ++i)
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
    ok = service->readiness().ready;
  }
  ~BindRig() {
    if (service) service->Stop();
    api.Stop();
  }
};

BindRig& Rig() {
  static BindRig* rig = new BindRig();  // shared by the runs; the process exits after them
  return *rig;
}

void BM_Bind(benchmark::State& state) {
  BindRig& rig = Rig();
  if (!rig.ok) {
    state.SkipWithError("cannot start the API double and the scheduler");
    return;
  }
  const int clients = static_cast<int>(state.range(0));
  const size_t kBatch = 400;
  int64_t errors = 0;
  for (auto _ : state) {
    std::atomic<int64_t> failed{0};
    const size_t end = std::min(rig.pods.size(), rig.next.load() + kBatch);
    std::vector<std::thread> threads;
    for (int c = 0; c < clients; ++c) {
      threads.emplace_back([&] {
        httplib::Client http("127.0.0.1", rig.service->port());
        http.set_keep_alive(true);
        http.set_tcp_nodelay(true);
        for (size_t i; (i = rig.next.fetch_add(1)) < end;) {
          const json& p = rig.pods[i];
          const std::string body = json{{"PodName", p["metadata"]["name"]},
                                        {"PodNamespace", "default"},
                                        {"PodUID", p["metadata"]["uid"]},
                                        {"Node", rig.nodes[i % rig.nodes.size()]}}
                                       .dump();
          httplib::Result r = http.Post("/gpushare-scheduler/bind", body, "application/json");
          if (!r || r->status != 200 || r->body != "{\"Error\":\"\"}") failed.fetch_add(1);
        }
      });
    }
    for (auto& t : threads) t.join();
    errors += failed.load();
    state.SetItemsProcessed(state.items_processed() + static_cast<int64_t>(kBatch));
  }
  state.counters["binds_per_s"] =
      benchmark::Counter(static_cast<double>(state.items_processed()), benchmark::Counter::kIsRate);
  state.counters["errors"] = static_cast<double>(errors);
}
BENCHMARK(BM_Bind)->Arg(1)->Arg(8)->Iterations(5)->UseRealTime()->Unit(benchmark::kMillisecond);

// The per-GPU part of a /metrics scrape (issue 14 §1) on a cache of state.range(0) nodes of 8
// GPUs, each GPU with one 3 GiB pod: mode 0 visits the GPUs under the cache's lock and does
// nothing (the floor), mode 1 copies what the samples need under the lock (GpuCollector::Take:
// what filter and bind wait for), mode 2 builds the samples and writes the text (the whole
// per-GPU exposition), mode 3 is everything /metrics serves (counters, histograms, per-GPU).
void BM_MetricsScrape(benchmark::State& state) {
  const int nodes = static_cast<int>(state.range(0));
  const int mode = static_cast<int>(state.range(1));
  GpuCache cache;
  cache.SetSynced(true);
  for (int n = 0; n < nodes; ++n) {
    const std::string name = "node-" + std::to_string(n);
    cache.UpsertNode(kube::DecodeNode(NodeJson(name, 8, 24)).value());
    for (int g = 0; g < 8; ++g) {
      const json pod = PodJson(name + "-" + std::to_string(g), 3);
      const kube::Pod p = kube::DecodePod(pod).value();
      Result<Reservation> r =
          cache.Reserve(p, kube::PodMemRequest(p, ms::kResourceName).value(), name, 1);
      if (r.ok()) cache.Commit(p.metadata.uid, r->token);
    }
  }
  GpuCollector gpus(cache, ms::MemoryUnit::kGiB);
  SchedulerMetrics metrics;
  size_t bytes = 0;
  for (auto _ : state) {
    if (mode == 0) {
      int64_t sum = 0;
      cache.VisitGpus([&](const GpuSample& g) { sum += g.used_units; });
      benchmark::DoNotOptimize(sum);
    } else if (mode == 1) {
      benchmark::DoNotOptimize(gpus.Take());
    } else if (mode == 2) {
      bytes = Serialize(gpus.Collect()).size();
    } else {
      const CacheStats c = cache.stats();
      MetricsSnapshot snap;
      snap.cache = &c;
      std::vector<prometheus::MetricFamily> all = StatsFamilies(snap);
      for (auto& f : metrics.Collect()) all.push_back(std::move(f));
      for (auto& f : gpus.Collect()) all.push_back(std::move(f));
      bytes = Serialize(std::move(all)).size();
    }
  }
  state.counters["gpus"] = nodes * 8;
  state.counters["bytes"] = static_cast<double>(bytes);
}
BENCHMARK(BM_MetricsScrape)->ArgsProduct({{1000}, {0, 1, 2, 3}})->Unit(benchmark::kMillisecond);

// PREFIX/inspect at state.range(0) nodes x 8 GPUs (see the header for the modes).
void BM_GpuChoice(benchmark::State& state) {
  const int nodes = static_cast<int>(state.range(0));
  const int mode = static_cast<int>(state.range(1));
  std::string log;
  std::unique_ptr<GpuCache> cache = testing::SyncedCache(&log);
  std::vector<std::string> names;
  for (int n = 0; n < nodes; ++n) {
    names.push_back("node-" + std::to_string(n));
    json node = NodeJson(names.back(), 8, 80);
    ms::NodeInventory inv = *ms::DecodeInventory(
        node["metadata"]["annotations"][std::string(ms::kInventoryAnnotation)].get<std::string>());
    for (ms::InventoryGpu& g : inv.gpus)
      if (g.index >= 4) g.model = "NVIDIA A100-SXM4-80GB";
    node["metadata"]["annotations"][std::string(ms::kInventoryAnnotation)] =
        ms::EncodeInventory(inv);
    cache->UpsertNode(*kube::DecodeNode(node));
    for (int g = 0; g < 8; ++g) {
      const json pod = PodJson(names.back() + "-" + std::to_string(g), 3);
      const kube::Pod p = *kube::DecodePod(pod);
      Result<Reservation> r = cache->Reserve(p, *kube::PodMemRequest(p), names.back(), 1);
      if (r.ok()) cache->Commit(p.metadata.uid, r->token);
    }
  }
  json pod = PodJson("chooser", 3);
  if (mode == 1) pod["metadata"]["annotations"]["nvidia.com/nouse-gpuuuid"] = "GPU-node-0-0";
  if (mode == 2) pod["metadata"]["annotations"]["nvidia.com/use-gputype"] = "A100";
  if (mode == 3) pod["metadata"]["annotations"]["nvidia.com/use-gputype"] = "H100";
  const ms::PodRequest req = *kube::PodPlacementRequest(*kube::DecodePod(pod));
  const std::vector<std::string_view> views(names.begin(), names.end());
  int64_t fits = 0;
  for (auto _ : state) {
    const std::vector<NodeVerdict> v = cache->Filter(req, views);
    const std::vector<int64_t> scores = cache->Score(req, views);
    fits = std::count_if(v.begin(), v.end(),
                         [](const NodeVerdict& x) { return x.kind == NodeVerdict::Kind::kFits; });
    benchmark::DoNotOptimize(scores.data());
  }
  state.counters["fits"] = static_cast<double>(fits);
}
BENCHMARK(BM_GpuChoice)->ArgsProduct({{1213, 5000}, {0, 1, 2, 3}})->Unit(benchmark::kMillisecond);

void BM_Inspect(benchmark::State& state) {
  const int nodes = static_cast<int>(state.range(0));
  const int mode = static_cast<int>(state.range(1));
  std::vector<std::shared_ptr<const kube::Node>> node_list;
  std::vector<std::shared_ptr<const kube::Pod>> pod_list;
  GpuCache cache;
  cache.SetSynced(true);
  for (int n = 0; n < nodes; ++n) {
    const std::string name = NodeName(n);
    const kube::Node node = kube::DecodeNode(NodeJson(name, 8, 24)).value();
    node_list.push_back(std::make_shared<const kube::Node>(node));
    if (mode == 6) cache.UpsertNode(node);
    for (int g = 0; g < 8; ++g) {
      json p = PodJson(name + "-" + std::to_string(g), 3);
      p["spec"]["nodeName"] = name;
      p["status"]["phase"] = "Running";
      const ms::PodRequest req = kube::PodMemRequest(kube::DecodePod(p).value()).value();
      auto ann = ms::BindAnnotations(req, {g}, 24, 1);
      for (const auto& [k, v] : ms::ConfirmAnnotations(req, {{"user-container", g}})) ann[k] = v;
      for (const auto& [k, v] : ann) p["metadata"]["annotations"][k] = v;
      const kube::Pod pod = kube::DecodePod(p).value();
      pod_list.push_back(std::make_shared<const kube::Pod>(pod));
      if (mode == 6) cache.UpsertPod(pod);
    }
  }
  // The informers hand out a copy of their list.
  InspectSource source;
  source.nodes = [&node_list] { return node_list; };
  source.pods = [&pod_list] { return pod_list; };
  source.synced = [] { return true; };
  const kube::inspect::Input input = InspectInput(node_list, pod_list);
  const kube::inspect::View view = kube::inspect::Build(input);
  const std::string one = "/" + NodeName(nodes / 2);
  size_t bytes = 0;
  for (auto _ : state) {
    switch (mode) {
      case 0:
        benchmark::DoNotOptimize(source.nodes().size() + source.pods().size());
        break;
      case 1:
        benchmark::DoNotOptimize(InspectInput(source.nodes(), source.pods()));
        break;
      case 2:
        benchmark::DoNotOptimize(kube::inspect::Build(input));
        break;
      case 3:
        bytes = kube::inspect::ToJson(view).dump().size();
        break;
      case 4:
        bytes = ServeInspect(source, "").body.size();
        break;
      case 5:
        bytes = ServeInspect(source, one).body.size();
        break;
      default:
        bytes = ServeCacheView(cache, ms::MemoryUnit::kGiB, "").body.size();
        break;
    }
  }
  state.counters["gpus"] = nodes * 8;
  state.counters["bytes"] = static_cast<double>(bytes);
}
BENCHMARK(BM_Inspect)->ArgsProduct({{1000}, {0, 1, 2, 3, 4, 5, 6}})->Unit(benchmark::kMillisecond);

}  // namespace
}  // namespace gpushare::scheduler

BENCHMARK_MAIN();
