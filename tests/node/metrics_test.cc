// node/metrics.h: every series against known states (an inventory and plan, the containers
// PodResources lists, their regions) compared line by line with the exposition; the agent's
// counters through the observer interface; /healthz and /readyz; HAMi's names.
#include "node/metrics.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <prometheus/registry.h>
#include <prometheus/text_serializer.h>

#include <sstream>

#include "core/reasons.h"
#include "node/allocate_events.h"
#include "tests/dashboard_series.h"
#include "tests/deviceplugin/fixtures.h"

namespace gpushare::node {
namespace {

using testing::GpuUuid;
using ::testing::HasSubstr;
using ::testing::Not;

constexpr uint64_t kGiB = uint64_t{1} << 30;
constexpr uint64_t kMiB = uint64_t{1} << 20;

// GPU 0 time-sliced (4 replicas, evenSplit limits), GPU 1 memory shares (units of 1 GiB).
NodeView TwoGpus() {
  NodeView v;
  v.loaded = true;
  v.max_clients_per_gpu = 48;
  for (int i = 0; i < 2; ++i) {
    Gpu g;
    g.index = i;
    g.uuid = GpuUuid(i);
    g.product = "NVIDIA A10";
    g.memory_mib = 24 * 1024;
    v.inventory.gpus.push_back(g);
  }
  PlannedResource ts;
  ts.name = "nvidia.com/gpu";
  ts.replicas = 4;
  for (int n = 0; n < 4; ++n) {
    PlannedDevice d;
    d.id = GpuUuid(0) + "::" + std::to_string(n);
    d.gpu_index = 0;
    d.gpu_uuid = GpuUuid(0);
    d.device_uuid = GpuUuid(0);
    d.replica = n;
    d.memory_mib = 24 * 1024;
    d.memory_limit_mib = 6 * 1024;
    d.sm_share_ppm = 250'000;
    ts.devices.push_back(d);
  }
  PlannedResource mem;
  mem.name = "aliyun.com/gpu-mem";
  mem.unit_mib = 1024;
  for (int n = 0; n < 24; ++n) {
    PlannedDevice d;
    d.id = "u1-" + std::to_string(n);
    d.gpu_index = 1;
    d.gpu_uuid = GpuUuid(1);
    d.device_uuid = GpuUuid(1);
    d.memory_mib = 24 * 1024;
    d.memory_limit_mib = 1024;
    mem.devices.push_back(d);
  }
  v.plan.resources = {mem, ts};
  return v;
}

ContainerRegion Region(const std::string& resource, std::vector<std::string> ids,
                       const std::string& uuid, uint64_t limit, uint64_t used, uint64_t launch) {
  ContainerRegion r;
  r.dir = "/state/x";
  r.marker.resource = resource;
  r.marker.device_ids = std::move(ids);
  r.has_region = true;
  RegionDeviceReading d;
  d.uuid_hex = UuidHex(uuid);
  d.memory_limited = true;
  d.memory_limit = limit;
  d.used = used;
  d.last_launch_s = launch;
  r.reading.devices.push_back(d);
  r.reading.processes = 1;
  return r;
}

ScrapeInput Known() {
  ScrapeInput in;
  in.node_name = "node-1";
  in.node = TwoGpus();
  in.node.last_xid[GpuUuid(1)] = 79;
  in.node.plan.resources[0].devices[5].healthy = false;  // a unit of GPU 1
  in.now_s = 1'000'000;
  in.pods_known = true;
  in.pods = {
      {"ns1", "pod-a", "main", "nvidia.com/gpu", {GpuUuid(0) + "::1"}},
      {"ns1", "pod-b", "side", "nvidia.com/gpu", {GpuUuid(0) + "::2"}},  // no region
      {"ns2", "pod-c", "c", "aliyun.com/gpu-mem", {"u1-0", "u1-1"}},
      {"ns3", "other", "x", "example.com/fpga", {"f0"}},  // not ours
  };
  in.regions = {
      Region("nvidia.com/gpu", {GpuUuid(0) + "::1"}, GpuUuid(0), 6 * kGiB, kGiB, 1'000'000 - 30),
      Region("aliyun.com/gpu-mem", {"u1-1", "u1-0"}, GpuUuid(1), 2 * kGiB, kGiB / 2, 0),
  };
  return in;
}

std::string Render(const ScrapeInput& in, MetricNames names) {
  prometheus::Registry r;
  AddStateSeries(in, names, &r);
  return prometheus::TextSerializer().Serialize(r.Collect());
}

std::set<std::string> Lines(const std::string& text) {
  std::set<std::string> out;
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);) out.insert(line);
  return out;
}

// Every wanted line is a line of the exposition (labels in prometheus-cpp's order: constant
// labels first, then the others sorted by name).
void ExpectLines(const std::string& text, const std::vector<std::string>& want) {
  const std::set<std::string> lines = Lines(text);
  for (const std::string& line : want) EXPECT_TRUE(lines.count(line)) << "missing: " << line;
}

std::string G0(const std::string& mode = "timeslice") {
  return "index=\"0\",mode=\"" + mode + "\",model=\"NVIDIA A10\",node=\"node-1\",uuid=\"" +
         GpuUuid(0) + "\"";
}
std::string G0R(const std::string& resource) {
  return "index=\"0\",mode=\"timeslice\",model=\"NVIDIA A10\",node=\"node-1\",resource=\"" +
         resource + "\",uuid=\"" + GpuUuid(0) + "\"";
}
std::string G1R(const std::string& resource) {
  return "index=\"1\",mode=\"memshare\",model=\"NVIDIA A10\",node=\"node-1\",resource=\"" +
         resource + "\",uuid=\"" + GpuUuid(1) + "\"";
}
std::string G1() {
  return "index=\"1\",mode=\"memshare\",model=\"NVIDIA A10\",node=\"node-1\",uuid=\"" + GpuUuid(1) +
         "\"";
}
std::string C(const std::string& ns, const std::string& pod, const std::string& c, int gpu) {
  return "container=\"" + c + "\",namespace=\"" + ns + "\",node=\"node-1\",pod=\"" + pod +
         "\",uuid=\"" + GpuUuid(gpu) + "\"";
}

TEST(NodeMetricsSeries, PerGpuSeries) {
  const std::string text = Render(Known(), MetricNames::kGpushare);
  const std::vector<std::string> want = {
      "# HELP gpushare_gpu_memory_bytes Total memory of the GPU.",
      "# TYPE gpushare_gpu_memory_bytes gauge",
      "gpushare_gpu_memory_bytes{" + G0() + "} 25769803776",
      "gpushare_gpu_memory_bytes{" + G1() + "} 25769803776",
      // GPU 0: two replicas of 6 GiB; GPU 1: two units of 1 GiB.
      "gpushare_gpu_memory_allocated_bytes{" + G0() + "} 12884901888",
      "gpushare_gpu_memory_allocated_bytes{" + G1() + "} 2147483648",
      "gpushare_gpu_memory_used_bytes{" + G0() + "} 1073741824",
      "gpushare_gpu_memory_used_bytes{" + G1() + "} 536870912",
      "gpushare_gpu_devices_advertised{" + G0R("nvidia.com/gpu") + "} 4",
      "gpushare_gpu_devices_advertised{" + G1R("aliyun.com/gpu-mem") + "} 24",
      "gpushare_gpu_devices_allocated{" + G0R("nvidia.com/gpu") + "} 2",
      "gpushare_gpu_devices_allocated{" + G1R("aliyun.com/gpu-mem") + "} 2",
      "gpushare_gpu_healthy{" + G0() + "} 1",
      "gpushare_gpu_healthy{" + G1() + "} 0",
      "gpushare_gpu_last_xid{" + G0() + "} 0",
      "gpushare_gpu_last_xid{" + G1() + "} 79",
      "gpushare_gpu_clients{" + G0() + "} 2",
      "gpushare_gpu_clients{" + G1() + "} 1",
      "gpushare_gpu_clients_max{" + G0() + "} 48",
      "gpushare_gpu_clients_max{" + G1() + "} 48",
  };
  ExpectLines(text, want);
  EXPECT_THAT(text, Not(HasSubstr("hami_")));
}

TEST(NodeMetricsSeries, PerContainerSeries) {
  const std::string text = Render(Known(), MetricNames::kGpushare);
  const std::vector<std::string> want = {
      "# TYPE gpushare_container_memory_limit_bytes gauge",
      "gpushare_container_memory_limit_bytes{" + C("ns1", "pod-a", "main", 0) + "} 6442450944",
      "gpushare_container_memory_limit_bytes{" + C("ns1", "pod-b", "side", 0) + "} 6442450944",
      "gpushare_container_memory_limit_bytes{" + C("ns2", "pod-c", "c", 1) + "} 2147483648",
      "gpushare_container_memory_used_bytes{" + C("ns1", "pod-a", "main", 0) + "} 1073741824",
      "gpushare_container_memory_used_bytes{" + C("ns2", "pod-c", "c", 1) + "} 536870912",
      "gpushare_container_compute_limit_ratio{" + C("ns1", "pod-a", "main", 0) + "} 0.25",
      "gpushare_container_compute_limit_ratio{" + C("ns2", "pod-c", "c", 1) + "} 1",
      "gpushare_container_seconds_since_last_kernel_launch{" + C("ns1", "pod-a", "main", 0) +
          "} 30",
  };
  ExpectLines(text, want);
  // No region: no used series; no launch recorded: no seconds series; not ours: nothing.
  EXPECT_THAT(
      text, Not(HasSubstr("gpushare_container_memory_used_bytes{" + C("ns1", "pod-b", "side", 0))));
  EXPECT_THAT(text, Not(HasSubstr("gpushare_container_seconds_since_last_kernel_launch{" +
                                  C("ns2", "pod-c", "c", 1))));
  EXPECT_THAT(text, Not(HasSubstr("pod=\"other\"")));
}

TEST(NodeMetricsSeries, ContextChargeNamesItsSource) {
  ScrapeInput in = Known();
  in.regions[0].reading.devices[0].context_charge = 518 * kMiB;
  in.regions[0].reading.devices[0].context_charge_source = "measured";
  const std::string text = Render(in, MetricNames::kGpushare);
  ExpectLines(text, {"# TYPE gpushare_container_context_charge_bytes gauge",
                     "gpushare_container_context_charge_bytes{container=\"main\",namespace=\"ns1\","
                     "node=\"node-1\",pod=\"pod-a\",source=\"measured\",uuid=\"" +
                         GpuUuid(0) + "\"} 543162368"});
  // A container whose region shows no context yet has no series.
  EXPECT_THAT(
      text, Not(HasSubstr("gpushare_container_context_charge_bytes{" + C("ns2", "pod-c", "c", 1))));
}

TEST(NodeMetricsSeries, EveryFamilyHasHelpAndType) {
  const std::string text = Render(Known(), MetricNames::kBoth);
  std::istringstream in(text);
  std::set<std::string> help, type, sampled;
  for (std::string line; std::getline(in, line);) {
    if (line.rfind("# HELP ", 0) == 0)
      help.insert(line.substr(7, line.find(' ', 7) - 7));
    else if (line.rfind("# TYPE ", 0) == 0)
      type.insert(line.substr(7, line.find(' ', 7) - 7));
    else if (!line.empty())
      sampled.insert(line.substr(0, line.find_first_of("{ ")));
  }
  for (const std::string& s : sampled) {
    EXPECT_TRUE(help.count(s)) << s;
    EXPECT_TRUE(type.count(s)) << s;
  }
  EXPECT_GE(sampled.size(), 20u);
}

// Every series the chart's Grafana dashboard queries from gpushare-node is one it exposes.
TEST(NodeMetricsSeries, EveryDashboardSeriesIsExposed) {
  const std::set<std::string> wanted = gpushare::testing::DashboardSeries(
      {"gpushare_gpu_", "gpushare_container_", "gpushare_node_"});
  ASSERT_GE(wanted.size(), 10u) << "the dashboard's queries were not found";
  // An agent that has registered its resources and done nothing else yet: the dashboard's
  // counters must be there at 0 (rate() and increase() see no series otherwise).
  NodeMetrics m(NodeMetricsOptions{});
  m.Registered("nvidia.com/gpu");
  m.Registered("aliyun.com/gpu-mem");
  const std::set<std::string> typed = gpushare::testing::TypedFamilies(m.Exposition(Known()));
  for (const std::string& name : wanted) EXPECT_TRUE(typed.count(name)) << name;
}

TEST(NodeMetricsSeries, HamiNames) {
  const std::string text = Render(Known(), MetricNames::kHami);
  const std::string a = "container=\"main\",device_uuid=\"" + GpuUuid(0) +
                        "\",namespace=\"ns1\",pod=\"pod-a\",vdevice_index=\"0\"";
  const std::string gpu0 =
      "zone=\"vGPU\",device_index=\"0\",device_type=\"NVIDIA-NVIDIA A10\","
      "device_uuid=\"" +
      GpuUuid(0) + "\",node=\"node-1\"";
  const std::vector<std::string> want = {
      "hami_vgpu_memory_used_bytes{" + a + "} 1073741824",
      "hami_vgpu_memory_limit_bytes{" + a + "} 6442450944",
      "hami_container_device_memory_bytes{" + a + "} 1073741824",
      "hami_container_last_kernel_elapsed_seconds{" + a + "} 30",
      "hami_gpu_memory_limit_bytes{" + gpu0 + "} 25769803776",
      "hami_gpu_memory_allocated_bytes{" + gpu0 + "} 12884901888",
      "hami_gpu_shared_count{" + gpu0 + "} 2",
      "hami_gpu_core_allocated_ratio{" + gpu0 + "} 0.5",
      "hami_vgpu_memory_allocated_bytes{zone=\"vGPU\",container_index=\"0\",device_uuid=\"" +
          GpuUuid(0) + "\",namespace=\"ns1\",node=\"node-1\",pod=\"pod-a\"} 6442450944",
  };
  ExpectLines(text, want);
  EXPECT_THAT(text, Not(HasSubstr("gpushare_")));
}

TEST(NodeMetricsSeries, NewestStateDirectoryOfAContainerWins) {
  ScrapeInput in = Known();
  ContainerRegion old = in.regions[0];
  old.reading.devices[0].used = 5 * kGiB;
  old.marker_mtime_ns = -1;  // older than the other
  in.regions.push_back(old);
  EXPECT_THAT(Render(in, MetricNames::kGpushare),
              HasSubstr("gpushare_container_memory_used_bytes{" + C("ns1", "pod-a", "main", 0) +
                        "} 1073741824\n"));
}

TEST(NodeMetricsSeries, StaleRegionReportsNoUseAndNoLaunch) {
  ScrapeInput in = Known();
  in.regions[0].reading.live = false;
  in.regions[0].reading.devices[0].used = 0;  // what the reader reports for a stale region
  const std::string text = Render(in, MetricNames::kGpushare);
  EXPECT_THAT(text, HasSubstr("gpushare_container_memory_used_bytes{" +
                              C("ns1", "pod-a", "main", 0) + "} 0\n"));
  EXPECT_THAT(text, Not(HasSubstr("gpushare_container_seconds_since_last_kernel_launch{" +
                                  C("ns1", "pod-a", "main", 0))));
}

TEST(NodeMetricsSeries, NothingBeforeTheFirstLoadAndNoContainersWithoutPodResources) {
  ScrapeInput in = Known();
  in.pods_known = false;
  const std::string text = Render(in, MetricNames::kGpushare);
  EXPECT_THAT(text, HasSubstr("gpushare_gpu_clients{" + G0() + "} 0\n"));
  EXPECT_THAT(text, Not(HasSubstr("gpushare_container_memory_limit_bytes{")));
  in.node.loaded = false;
  EXPECT_EQ(Render(in, MetricNames::kGpushare), "");
}

TEST(NodeMetricsSeries, ModeOfEachGpu) {
  ScrapeInput in = Known();
  in.node.plan.resources[1].replicas = 1;  // whole GPUs
  EXPECT_THAT(Render(in, MetricNames::kGpushare),
              HasSubstr("gpushare_gpu_memory_bytes{" + G0("whole") + "}"));
  for (PlannedDevice& d : in.node.plan.resources[1].devices) d.is_mig = true;
  EXPECT_THAT(Render(in, MetricNames::kGpushare),
              HasSubstr("gpushare_gpu_memory_bytes{" + G0("mig") + "}"));
}

// The agent's counters, through the observer interface, and the probes.
TEST(NodeMetricsAgent, CountersProbesAndBuildInfo) {
  NodeMetricsOptions o;
  o.version = "0.1.0";
  o.commit = "abc";
  o.stall_ms = 1000;
  auto owned = std::make_shared<NodeMetrics>(o);
  NodeMetrics& m = *owned;
  EXPECT_FALSE(m.Readyz().ok);
  EXPECT_THAT(m.Readyz().reason, HasSubstr("inventory"));
  EXPECT_TRUE(m.Healthz(0).ok);  // starting
  AgentInputs inputs;
  inputs.inventory = TwoGpus().inventory;
  m.PlanChanged(inputs, TwoGpus().plan);
  EXPECT_EQ(m.Readyz().reason, "not registered with kubelet: aliyun.com/gpu-mem, nvidia.com/gpu");
  m.Registered("nvidia.com/gpu");
  m.Registered("aliyun.com/gpu-mem");
  m.Registered("nvidia.com/gpu");
  EXPECT_TRUE(m.Readyz().ok);
  m.KubeletRestarted();
  EXPECT_FALSE(m.Readyz().ok) << "registrations are void after a kubelet restart";
  m.Registered("nvidia.com/gpu");
  m.Registered("aliyun.com/gpu-mem");
  m.LoopTurned(5000);
  EXPECT_TRUE(m.Healthz(5900).ok);
  EXPECT_FALSE(m.Healthz(7000).ok);
  EXPECT_THAT(m.Healthz(7000).reason, HasSubstr("has not turned for 2 s"));

  HealthEvent ev;
  ev.xid = 48;
  ev.uuid = GpuUuid(0);
  m.HealthEventSeen(ev);
  // The metrics count Allocate as one of the observers of the servers' fan-out; the next one
  // (the Events) hears the same refusal.
  struct Seen : deviceplugin::AllocateObserver {
    std::vector<std::string> seen;
    void OnAllocate(const deviceplugin::AllocateOutcome& o) override {
      if (!o.answered())
        seen.push_back(std::string(o.resource) + " " + std::string(o.reason) + " " +
                       o.device_ids.front());
    }
  };
  auto next = std::make_shared<Seen>();
  deviceplugin::AllocateFanOut fan({owned, next});
  const std::vector<std::string> answered_ids = {GpuUuid(0) + "::0"};
  const std::vector<std::string> bogus = {"bogus"};
  fan.OnAllocate({"nvidia.com/gpu", answered_ids, "", ""});
  fan.OnAllocate({"nvidia.com/gpu", answered_ids, "", ""});
  fan.OnAllocate({"nvidia.com/gpu", bogus, reasons::kUnknownDevice, "unknown device IDs"});
  const std::vector<std::string>& seen = next->seen;
  m.ReconcileCorrected("assignment");
  m.RegionSkipped(RegionSkip::kUnknownLayout);
  m.ScrapeTook(0.002);
  EXPECT_EQ(seen, std::vector<std::string>{"nvidia.com/gpu UnknownDevice bogus"});

  ScrapeInput in;
  in.node_name = "node-1";
  in.node = m.View();
  const std::string text = m.Exposition(in);
  const std::vector<std::string> want = {
      "# TYPE gpushare_node_registrations_total counter",
      "gpushare_node_registrations_total{resource=\"nvidia.com/gpu\"} 3",
      "gpushare_node_registrations_total{resource=\"aliyun.com/gpu-mem\"} 2",
      "gpushare_node_kubelet_restarts_total 1",
      "gpushare_node_allocate_total{resource=\"nvidia.com/gpu\"} 2",
      "gpushare_node_allocate_refusals_total{reason=\"UnknownDevice\",resource=\"nvidia.com/gpu\"} "
      "1",
      "gpushare_node_reconcile_corrections_total{kind=\"assignment\"} 1",
      "gpushare_node_region_skips_total{reason=\"unknown_layout\"} 1",
      "gpushare_node_region_skips_total{reason=\"truncated\"} 0",
      "# TYPE gpushare_node_scrape_duration_seconds histogram",
      "gpushare_node_scrape_duration_seconds_count 1",
      "gpushare_build_info{commit=\"abc\",version=\"0.1.0\"} 1",
      "gpushare_gpu_last_xid{" + G0() + "} 48",
  };
  ExpectLines(text, want);
}

TEST(NodeMetricsAgent, ParseMetricNames) {
  EXPECT_EQ(*ParseMetricNames("hami"), MetricNames::kHami);
  EXPECT_EQ(*ParseMetricNames("both"), MetricNames::kBoth);
  EXPECT_EQ(*ParseMetricNames("gpushare"), MetricNames::kGpushare);
  EXPECT_THAT(ParseMetricNames("HAMi").status().message(), HasSubstr("gpushare, hami or both"));
}

TEST(AllocateEventsMessage, NamesResourceDevicesAndWhy) {
  EXPECT_EQ(AllocateEvents::Message("nvidia.com/gpu", {"a", "b"}, "unknown device IDs: b", 0),
            "Allocate of nvidia.com/gpu [a,b] refused: unknown device IDs: b");
  std::vector<std::string> many(10, "x");
  EXPECT_THAT(AllocateEvents::Message("r", many, "why", 3),
              HasSubstr("x,x,x,x,x,x,x,x,... (10 devices)] refused: why (and 3 more refusals"));
}

}  // namespace
}  // namespace gpushare::node
