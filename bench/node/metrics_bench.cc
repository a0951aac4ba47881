// A scrape of gpushare-node's /metrics content on a full node: 8 GPUs x 48 time-sliced replicas,
// one container per replica (384 containers, each with its accounting region), listed by the
// kubelet double's PodResources, every region flock-held (live) and every region's mutex held
// locked by another thread for the whole run: the scrape never takes a region's lock, so it
// completes at full speed anyway (a scrape that waited for one would hang here).
//
// Measures MetricsScraper::Scrape(): PodResources List over the unix socket, the 384 markers and
// regions read, the per-GPU and per-container series built and serialised. Target (issue 14):
// under 50 ms. Figures go to docs/benchmarks.md ("Node metrics").
#include <benchmark/benchmark.h>
#include <spdlog/spdlog.h>
#include <sys/file.h>

#include <algorithm>
#include <atomic>
#include <filesystem>
#include <fstream>
#include <thread>

#include "core/library_gc.h"
#include "deviceplugin/server.h"
#include "node/metrics.h"
#include "node/metrics_scrape.h"
#include "tests/deviceplugin/fixtures.h"
#include "tests/fakes/kubelet/fake_kubelet.h"
#include "tests/node/region_fixture.h"

namespace {

using namespace gpushare;
using namespace std::chrono_literals;
constexpr int kGpus = 8;
constexpr int kPerGpu = 48;

struct FullNode {
  FullNode() {
    spdlog::set_level(spdlog::level::warn);
    fakes::FakeKubeletOptions ko{dir.Sub("dp")};
    ko.pod_resources_socket = dir.Sub("pr.sock");
    ko.pod_resources_qps = 1e6;  // kubelet allows 100/s; the benchmark scrapes back to back
    ko.pod_resources_burst = 1000000;
    std::filesystem::create_directories(dir.Sub("dp"));
    kubelet = std::make_unique<fakes::FakeKubelet>(ko);
    if (!kubelet->Start().ok()) std::abort();
    deviceplugin::DevicePluginServerOptions o;
    o.plugin_dir = dir.Sub("dp");
    o.kubelet_socket = kubelet->kubelet_socket();
    o.resource = testing::MakeGpuResource(kGpus, kPerGpu);
    for (PlannedDevice& d : o.resource.devices) {
      d.memory_limit_mib = 512;
      d.sm_share_ppm = 1'000'000 / kPerGpu;
    }
    plan.resources = {o.resource};
    auto s = deviceplugin::DevicePluginServer::Start(o);
    if (!s.ok()) std::abort();
    server = std::move(s).value();
    std::atomic<bool> done{false};
    server->StartRegister([&](const Status&) { done = true; });
    if (!kubelet->WaitForAllocatable("nvidia.com/gpu", kGpus * kPerGpu, 20s)) std::abort();

    const uint64_t now =
        static_cast<uint64_t>(std::chrono::duration_cast<std::chrono::seconds>(
                                  std::chrono::system_clock::now().time_since_epoch())
                                  .count());
    for (int i = 0; i < kGpus * kPerGpu; ++i) {
      fakes::FakePod pod;
      pod.namespace_ = "bench";
      pod.name = "pod-" + std::to_string(i);
      pod.containers = {{"c", {{"nvidia.com/gpu", 1}}}};
      fakes::PodAdmission a = kubelet->AdmitPod(pod);
      if (!a.admitted) std::abort();
      const std::string id = a.steps.at(0).admission.device_ids.at(0);
      const std::string sub = dir.Sub("state/" + std::to_string(i));
      std::filesystem::create_directories(sub + "/shared");
      AllocationMarker m;
      m.resource = "nvidia.com/gpu";
      m.device_ids = {id};
      std::ofstream(sub + "/" + kAllocationMarkerName) << EncodeAllocationMarker(m);
      auto r = std::make_unique<testing::MappedRegion>(sub + "/shared/region");
      if (r->file() == nullptr) std::abort();
      testing::AddDevice(r->file(), 0, id.substr(0, id.find("::")), uint64_t{512} << 20, 2);
      testing::AddProcess(r->file(), 0, 1, 0, 0, static_cast<uint64_t>(i) << 20);
      r->file()->devices[0].last_launch_s = now - static_cast<uint64_t>(i);
      if (::flock(r->fd(), LOCK_SH) != 0) std::abort();
      regions.push_back(std::move(r));
    }
    // Every region's lock, held by another thread until the end.
    holder = std::thread([this] {
      for (auto& r : regions) pthread_mutex_lock(&r->file()->header.mutex);
      locked = true;
      while (!stop) std::this_thread::sleep_for(1ms);
      for (auto& r : regions) pthread_mutex_unlock(&r->file()->header.mutex);
    });
    while (!locked) std::this_thread::yield();

    metrics = std::make_shared<node::NodeMetrics>(node::NodeMetricsOptions{});
    node::AgentInputs in;
    for (int g = 0; g < kGpus; ++g) {
      Gpu gpu;
      gpu.index = g;
      gpu.uuid = testing::GpuUuid(g);
      gpu.product = "NVIDIA A10";
      gpu.memory_mib = 24576;
      in.inventory.gpus.push_back(gpu);
    }
    in.config.gpushare.container_state_dir = dir.Sub("state");
    metrics->PlanChanged(in, plan);
    node::ScrapeSources src;
    src.node_name = "bench-node";
    src.pod_resources_socket = dir.Sub("pr.sock");
    scraper = std::make_unique<node::MetricsScraper>(metrics, src);
  }
  ~FullNode() {
    stop = true;
    holder.join();
  }
  testing::TempDir dir;
  ResourcePlan plan;
  std::unique_ptr<fakes::FakeKubelet> kubelet;
  std::unique_ptr<deviceplugin::DevicePluginServer> server;
  std::vector<std::unique_ptr<testing::MappedRegion>> regions;
  std::atomic<bool> locked{false}, stop{false};
  std::thread holder;
  std::shared_ptr<node::NodeMetrics> metrics;
  std::unique_ptr<node::MetricsScraper> scraper;
};

size_t Count(const std::string& text, const std::string& what) {
  size_t n = 0;
  for (size_t p = text.find(what); p != std::string::npos; p = text.find(what, p + 1)) ++n;
  return n;
}

void BM_Scrape48x8(benchmark::State& state) {
  static FullNode node;
  std::vector<double> ms;
  size_t bytes = 0;
  std::string text;
  for (auto _ : state) {
    const auto t0 = std::chrono::steady_clock::now();
    text = node.scraper->Scrape();
    ms.push_back(
        std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count());
    bytes = text.size();
    benchmark::DoNotOptimize(text);
  }
  // Every container with its usage, from its region, while every region's lock is held.
  if (Count(text, "gpushare_container_memory_used_bytes{") != kGpus * kPerGpu ||
      Count(text, "gpushare_container_seconds_since_last_kernel_launch{") != kGpus * kPerGpu) {
    state.SkipWithError("the scrape did not show every container's region");
    return;
  }
  std::sort(ms.begin(), ms.end());
  state.counters["p50_ms"] = ms[ms.size() / 2];
  state.counters["p99_ms"] = ms[std::min(ms.size() - 1, ms.size() * 99 / 100)];
  state.counters["max_ms"] = ms.back();
  state.counters["bytes"] = static_cast<double>(bytes);
  state.counters["regions"] = static_cast<double>(node.regions.size());
}
BENCHMARK(BM_Scrape48x8)->Unit(benchmark::kMillisecond)->MinTime(2.0);

}  // namespace

BENCHMARK_MAIN();
