// Node agent benchmarks: Allocate, GetPreferredAllocation and ListAndWatch over the real unix
// socket (8 GPUs x 48 replicas = 384 devices, and 24 x 48 = 1152 devices), and the resident
// memory of the real gpushare-node serving 4 resources while idle.
//
// Latencies are measured per call with a steady clock and reported as p50/p99 counters (in
// microseconds) next to Google Benchmark's mean. Figures go to docs/benchmarks.md.
#include <benchmark/benchmark.h>
#include <grpcpp/grpcpp.h>
#include <spdlog/spdlog.h>

#include <algorithm>
#include <atomic>
#include <fstream>
#include <thread>

#include "deviceplugin/preferred_allocation.h"
#include "deviceplugin/server.h"
#include "proto/deviceplugin/v1beta1/api.grpc.pb.h"
#include "tests/deviceplugin/fixtures.h"
#include "tests/fakes/kubelet/fake_kubelet.h"
#include "tests/node/agent_process.h"

namespace {

using namespace gpushare;
using Clock = std::chrono::steady_clock;

void ReportPercentiles(benchmark::State& state, std::vector<double>& us) {
  if (us.empty()) return;
  std::sort(us.begin(), us.end());
  state.counters["p50_us"] = us[us.size() / 2];
  state.counters["p99_us"] = us[std::min(us.size() - 1, us.size() * 99 / 100)];
  state.counters["max_us"] = us.back();
}

// A server for `gpus` x `replicas` devices and a client channel to it (no kubelet involved).
struct Served {
  Served(int gpus, int replicas) {
    spdlog::set_level(spdlog::level::warn);
    deviceplugin::DevicePluginServerOptions o;
    o.plugin_dir = dir.path();
    o.resource = testing::MakeGpuResource(gpus, replicas);
    resource = o.resource;
    auto s = deviceplugin::DevicePluginServer::Start(std::move(o));
    if (!s.ok()) std::abort();
    server = std::move(s).value();
    channel =
        grpc::CreateChannel("unix:" + server->socket_path(), grpc::InsecureChannelCredentials());
    stub = v1beta1::DevicePlugin::NewStub(channel);
  }
  testing::TempDir dir;
  PlannedResource resource;
  std::unique_ptr<deviceplugin::DevicePluginServer> server;
  std::shared_ptr<grpc::Channel> channel;
  std::unique_ptr<v1beta1::DevicePlugin::Stub> stub;
};

void BM_Allocate(benchmark::State& state) {
  Served s(static_cast<int>(state.range(0)), 48);
  std::vector<double> us;
  size_t i = 0;
  for (auto _ : state) {
    v1beta1::AllocateRequest req;
    req.add_container_requests()->add_devices_ids(
        s.resource.devices[i++ % s.resource.devices.size()].id);
    v1beta1::AllocateResponse resp;
    grpc::ClientContext ctx;
    auto t0 = Clock::now();
    grpc::Status st = s.stub->Allocate(&ctx, req, &resp);
    us.push_back(std::chrono::duration<double, std::micro>(Clock::now() - t0).count());
    if (!st.ok()) state.SkipWithError(st.error_message().c_str());
  }
  state.counters["devices"] = static_cast<double>(s.resource.devices.size());
  ReportPercentiles(state, us);
}
BENCHMARK(BM_Allocate)->Arg(8)->Arg(24)->Unit(benchmark::kMicrosecond)->Iterations(5000);

void BM_PreferredAllocation(benchmark::State& state) {
  Served s(static_cast<int>(state.range(0)), 48);
  v1beta1::PreferredAllocationRequest req;
  auto* c = req.add_container_requests();
  for (const auto& d : s.resource.devices) c->add_available_deviceids(d.id);
  c->set_allocation_size(1);
  std::vector<double> us;
  for (auto _ : state) {
    v1beta1::PreferredAllocationResponse resp;
    grpc::ClientContext ctx;
    auto t0 = Clock::now();
    grpc::Status st = s.stub->GetPreferredAllocation(&ctx, req, &resp);
    us.push_back(std::chrono::duration<double, std::micro>(Clock::now() - t0).count());
    if (!st.ok()) state.SkipWithError(st.error_message().c_str());
  }
  state.counters["devices"] = static_cast<double>(s.resource.devices.size());
  ReportPercentiles(state, us);
}
BENCHMARK(BM_PreferredAllocation)->Arg(8)->Arg(24)->Unit(benchmark::kMicrosecond)->Iterations(2000);

// The policy alone (no RPC): what GetPreferredAllocation costs inside the agent.
void BM_PreferredAllocationPolicyOnly(benchmark::State& state) {
  PlannedResource res = testing::MakeGpuResource(static_cast<int>(state.range(0)), 48);
  deviceplugin::DeviceIndex index(res);
  deviceplugin::PreferredAllocator alloc(AllocationPolicy::kDistributed);
  deviceplugin::PreferredAllocationQuery q;
  for (const auto& d : res.devices) q.available.push_back(d.id);
  q.allocation_size = 1;
  for (auto _ : state) {
    auto r = alloc.Choose(index, q);
    benchmark::DoNotOptimize(r);
  }
  state.counters["devices"] = static_cast<double>(res.devices.size());
}
BENCHMARK(BM_PreferredAllocationPolicyOnly)->Arg(8)->Arg(24)->Unit(benchmark::kMicrosecond);

// One health change of one GPU (48 devices flip) until the client has the new full list.
void BM_ListAndWatchUpdate(benchmark::State& state) {
  Served s(static_cast<int>(state.range(0)), 48);
  grpc::ClientContext ctx;
  v1beta1::Empty empty;
  auto reader = s.stub->ListAndWatch(&ctx, empty);
  v1beta1::ListAndWatchResponse resp;
  if (!reader->Read(&resp)) {
    state.SkipWithError("no initial list");
    return;
  }
  size_t bytes = resp.ByteSizeLong();
  std::vector<double> us;
  bool healthy = true;
  for (auto _ : state) {
    healthy = !healthy;
    std::map<std::string, bool> h;
    for (int n = 0; n < 48; ++n) h[s.resource.devices[n].id] = healthy;
    auto t0 = Clock::now();
    s.server->SetHealth(h);
    if (!reader->Read(&resp)) {
      state.SkipWithError("stream ended");
      break;
    }
    us.push_back(std::chrono::duration<double, std::micro>(Clock::now() - t0).count());
  }
  ctx.TryCancel();
  reader->Finish();
  state.counters["devices"] = static_cast<double>(s.resource.devices.size());
  state.counters["message_bytes"] = static_cast<double>(bytes);
  ReportPercentiles(state, us);
}
BENCHMARK(BM_ListAndWatchUpdate)->Arg(8)->Arg(24)->Unit(benchmark::kMicrosecond)->Iterations(500);

// Registration through the kubelet double until the full list arrived (connect-back included).
void BM_RegisterToFullList(benchmark::State& state) {
  spdlog::set_level(spdlog::level::warn);
  std::vector<double> us;
  for (auto _ : state) {
    testing::TempDir dir;
    fakes::FakeKubelet kubelet({dir.path()});
    if (!kubelet.Start().ok()) std::abort();
    deviceplugin::DevicePluginServerOptions o;
    o.plugin_dir = dir.path();
    o.resource = testing::MakeGpuResource(static_cast<int>(state.range(0)), 48);
    int n = static_cast<int>(o.resource.devices.size());
    auto t0 = Clock::now();
    auto server = deviceplugin::DevicePluginServer::Start(std::move(o));
    if (!server.ok() || !(*server)->Register().ok()) std::abort();
    kubelet.WaitForAllocatable("nvidia.com/gpu", n, std::chrono::seconds(10));
    us.push_back(std::chrono::duration<double, std::micro>(Clock::now() - t0).count());
  }
  ReportPercentiles(state, us);
}
BENCHMARK(BM_RegisterToFullList)->Arg(8)->Arg(24)->Unit(benchmark::kMillisecond)->Iterations(20);

long RssKiB(pid_t pid) {
  std::ifstream in("/proc/" + std::to_string(pid) + "/status");
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind("VmRSS:", 0) == 0) return std::stol(line.substr(6));
  }
  return -1;
}

// The real binary on the mixed example (4 resources), registered and idle for 3 s.
void BM_IdleAgentRss(benchmark::State& state) {
  for (auto _ : state) {
    testing::TempDir dir;
    fakes::FakeKubelet kubelet({dir.path() + "/dp"});
    if (!kubelet.Start().ok()) std::abort();
    std::string src = GPUSHARE_SOURCE_DIR;
    testing::AgentProcess agent(
        {"--inventory", src + "/examples/inventory/mixed.yaml", "--config",
         src + "/examples/config/mixed.yaml", "--device-plugin-dir", dir.path() + "/dp"},
        dir.path() + "/agent.log");
    bool ok = kubelet.WaitForAllocatable("nvidia.com/gpu.shared", 20, std::chrono::seconds(15)) &&
              kubelet.WaitForAllocatable("nvidia.com/mig-2g.20gb", 6, std::chrono::seconds(15));
    if (!ok) {
      state.SkipWithError("agent did not register");
      break;
    }
    std::this_thread::sleep_for(std::chrono::seconds(3));
    long rss = RssKiB(agent.pid());
    state.counters["rss_kib"] = static_cast<double>(rss);
    state.counters["rss_mib"] = rss / 1024.0;
    state.counters["resources"] = static_cast<double>(kubelet.Resources().size());
    agent.Signal(SIGTERM);
    agent.Wait(std::chrono::seconds(10));
  }
}
BENCHMARK(BM_IdleAgentRss)->Iterations(1)->Unit(benchmark::kSecond);

}  // namespace

BENCHMARK_MAIN();
