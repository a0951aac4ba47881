// node/allocate_events.h against the API-server double: a refused Allocate's Event goes on the
// one pod it can be for (Pending or failed by kubelet for it, bound here, a container asking
// exactly the refused devices), and on the Node, naming the candidates, when none or several
// can; rate limiting per reason still holds (a fake clock, no timers); the lookup never blocks
// Refused and is cancelled at destruction. And the agent's Allocate steps (AllocationSteps) and
// observers with a real device plugin server against the kubelet double: every refusal path's gRPC
// message starts with its core/reasons.h code, the same code as
// gpushare_node_allocate_refusals_total{reason}.
#include "node/allocate_events.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <atomic>
#include <future>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "core/allocation_json.h"
#include "core/memshare.h"
#include "core/reasons.h"
#include "deviceplugin/server.h"
#include "node/agent.h"
#include "node/memshare_service.h"
#include "node/metrics.h"
#include "proto/deviceplugin/v1beta1/api.pb.h"
#include "tests/deviceplugin/fixtures.h"
#include "tests/fakes/apiserver/fake_apiserver.h"
#include "tests/fakes/kubelet/fake_kubelet.h"

namespace gpushare::node {
namespace {

using gpushare::testing::GpuUuid;
using nlohmann::json;
using ::testing::HasSubstr;
using ::testing::StartsWith;
using namespace std::chrono_literals;

constexpr auto kWait = 20s;  // generous: a bound on a hang, never what a test decides on
constexpr const char* kMem = "aliyun.com/gpu-mem";
constexpr const char* kGpu = "nvidia.com/gpu";

std::vector<std::string> Units(int gpu, int n) {
  std::vector<std::string> ids;
  for (int j = 0; j < n; ++j) ids.push_back(memshare::UnitDeviceId(GpuUuid(gpu), j));
  return ids;
}

// A pod bound to `node` whose containers ask for `asks` (container -> count) of `resource`.
json PodJson(const std::string& name, const std::string& node, const std::string& phase,
             const std::vector<std::pair<std::string, int>>& asks,
             const std::string& resource = kMem) {
  json containers = json::array();
  for (const auto& [c, n] : asks) {
    containers.push_back({{"name", c},
                          {"image", "x"},
                          {"resources", {{"limits", {{resource, std::to_string(n)}}}}}});
  }
  return {{"apiVersion", "v1"},
          {"kind", "Pod"},
          {"metadata", {{"name", name}, {"namespace", "ns1"}}},
          {"spec", {{"nodeName", node}, {"containers", containers}}},
          {"status", {{"phase", phase}}}};
}

class AllocateEventsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_TRUE(api_.Start().ok());
    kube::ClientConfig cfg;
    cfg.server = api_.url();
    auto c = kube::Client::Create(cfg);
    ASSERT_TRUE(c.ok()) << c.status().ToString();
    client_ = *c;
    kube::EventRecorderOptions eo;
    eo.component = "gpushare-node";
    eo.host = "n1";
    recorder_ = std::make_shared<kube::EventRecorder>(client_, eo);
  }
  std::unique_ptr<AllocateEvents> Make(PodLister pods) {
    AllocateEventsOptions o;
    o.node_name = "n1";
    o.interval_ms = 60'000;
    o.pods = std::move(pods);
    return std::make_unique<AllocateEvents>(recorder_, o, clock_);
  }
  std::unique_ptr<AllocateEvents> Make() { return Make(NodePodLister(client_, "n1")); }
  void Settle(AllocateEvents& e) {
    ASSERT_TRUE(e.Flush(kWait));
    ASSERT_TRUE(recorder_->Flush(kWait));
  }
  std::string Add(json pod) {
    return api_.Upsert(fakes::Resource::kPods, std::move(pod))["metadata"]["uid"]
        .get<std::string>();
  }
  std::vector<json> Events() const { return api_.List(fakes::Resource::kEvents); }

  fakes::FakeApiServer api_;
  std::shared_ptr<kube::Client> client_;
  std::shared_ptr<kube::EventRecorder> recorder_;
  std::shared_ptr<SimulatedClock> clock_ = std::make_shared<SimulatedClock>(1'000'000);
};

const std::string kUnhealthyWhy = "resource aliyun.com/gpu-mem: devices are Unhealthy: x";

TEST_F(AllocateEventsTest, TheOneCandidateGetsThePodEvent) {
  const std::string uid = Add(PodJson("train", "n1", "Pending", {{"main", 4}}));
  Add(PodJson("running", "n1", "Running", {{"main", 4}}));      // admitted long ago
  Add(PodJson("elsewhere", "n2", "Pending", {{"main", 4}}));    // another node's
  Add(PodJson("small", "n1", "Pending", {{"main", 2}}));        // asks another count
  json held = PodJson("held", "n1", "Pending", {{"main", 4}});  // holds its units already
  alloc::AllocationRecord record;
  record.node = "n1";
  alloc::DeviceRecord unit;
  unit.id = Units(1, 1)[0];
  unit.kind = alloc::DeviceKind::kMemory;
  unit.gpu = 1;
  unit.uuid = GpuUuid(1);
  unit.units = 4;
  record.containers.push_back({"main", kMem, {unit}});
  held["metadata"]["annotations"][std::string(alloc::kAllocationsAnnotation)] =
      alloc::EncodeAllocationRecord(record);
  Add(held);
  auto events = Make();
  events->Refused(kMem, reasons::kGpuUnhealthy, Units(0, 4), kUnhealthyWhy);
  Settle(*events);

  std::vector<json> got = Events();
  ASSERT_EQ(got.size(), 1u);
  const json& e = got[0];
  EXPECT_EQ(e["metadata"]["namespace"], "ns1");
  EXPECT_EQ(e["involvedObject"]["kind"], "Pod");
  EXPECT_EQ(e["involvedObject"]["namespace"], "ns1");
  EXPECT_EQ(e["involvedObject"]["name"], "train");
  EXPECT_EQ(e["involvedObject"]["uid"], uid);
  EXPECT_EQ(e["reason"], "GpuUnhealthy");
  EXPECT_EQ(e["type"], "Warning");
  EXPECT_EQ(e["source"]["component"], "gpushare-node");
  EXPECT_EQ(e["source"]["host"], "n1");
  EXPECT_EQ(e["message"], "Allocate of aliyun.com/gpu-mem [" + GpuUuid(0) +
                              ": 4 units] for container main refused: " + kUnhealthyWhy);
  EXPECT_EQ(events->stats().pod_events, 1u);
  EXPECT_EQ(events->stats().node_events, 0u);
}

TEST_F(AllocateEventsTest, APodKubeletFailedForTheRefusalIsStillFound) {
  json pod = PodJson("train", "n1", "Failed", {{"main", 4}});
  pod["status"]["reason"] = "UnexpectedAdmissionError";
  pod["status"]["message"] =
      "Pod was rejected: Allocate failed due to rpc error: code = FailedPrecondition desc = "
      "GpuUnhealthy: " +
      kUnhealthyWhy + ", which is unexpected";
  Add(pod);
  json other = PodJson("older", "n1", "Failed", {{"main", 4}});
  other["status"]["reason"] = "UnexpectedAdmissionError";
  other["status"]["message"] = "Allocate failed due to something else";
  Add(other);
  auto events = Make();
  events->Refused(kMem, reasons::kGpuUnhealthy, Units(0, 4), kUnhealthyWhy);
  Settle(*events);
  std::vector<json> got = Events();
  ASSERT_EQ(got.size(), 1u);
  EXPECT_EQ(got[0]["involvedObject"]["kind"], "Pod");
  EXPECT_EQ(got[0]["involvedObject"]["name"], "train");
}

TEST_F(AllocateEventsTest, SeveralCandidatesKeepTheNodeEventNamingThem) {
  Add(PodJson("a", "n1", "Pending", {{"main", 1}}, kGpu));
  Add(PodJson("b", "n1", "Pending", {{"side", 1}}, kGpu));
  auto events = Make();
  const std::string why = "resource nvidia.com/gpu: unknown device IDs: GPU-bogus::0";
  events->Refused(kGpu, reasons::kUnknownDevice, {"GPU-bogus::0"}, why);
  Settle(*events);
  std::vector<json> got = Events();
  ASSERT_EQ(got.size(), 1u);
  const json& e = got[0];
  EXPECT_EQ(e["metadata"]["namespace"], "default");
  EXPECT_EQ(e["involvedObject"]["kind"], "Node");
  EXPECT_EQ(e["involvedObject"]["name"], "n1");
  EXPECT_EQ(e["reason"], "UnknownDevice");
  EXPECT_EQ(e["type"], "Warning");
  EXPECT_EQ(e["message"], "Allocate of nvidia.com/gpu [GPU-bogus::0] refused: " + why +
                              "; pod not identified: 2 pods could be it: ns1/a, ns1/b");
  EXPECT_EQ(events->stats().node_events, 1u);
}

TEST_F(AllocateEventsTest, NoCandidateKeepsTheNodeEventSayingSo) {
  Add(PodJson("busy", "n1", "Running", {{"main", 1}}, kGpu));
  auto events = Make();
  events->Refused(kGpu, reasons::kUnknownDevice, {"GPU-bogus::0"}, "unknown");
  Settle(*events);
  std::vector<json> got = Events();
  ASSERT_EQ(got.size(), 1u);
  EXPECT_EQ(got[0]["involvedObject"]["kind"], "Node");
  EXPECT_THAT(got[0]["message"].get<std::string>(),
              HasSubstr("; pod not identified: no pod in admission on n1 has a container asking "
                        "for 1 nvidia.com/gpu that it does not hold yet"));
}

TEST_F(AllocateEventsTest, AFailedLookupKeepsTheNodeEvent) {
  Add(PodJson("train", "n1", "Pending", {{"main", 4}}));
  fakes::Fault f;
  f.http_code = 403;
  f.method = "GET";
  f.path_contains = "/pods";
  f.message = "pods is forbidden";
  api_.InjectFault(f);
  auto events = Make();
  events->Refused(kMem, reasons::kGpuUnhealthy, Units(0, 4), kUnhealthyWhy);
  Settle(*events);
  std::vector<json> got = Events();
  ASSERT_EQ(got.size(), 1u);
  EXPECT_EQ(got[0]["involvedObject"]["kind"], "Node");
  EXPECT_THAT(got[0]["message"].get<std::string>(),
              HasSubstr("; pod not identified: listing the pods of n1 failed: "));
  EXPECT_EQ(events->stats().lookup_failed, 1u);
}

TEST_F(AllocateEventsTest, RateLimitStillHoldsPerReason) {
  Add(PodJson("train", "n1", "Pending", {{"main", 4}}));
  auto events = Make();
  for (int i = 0; i < 3; ++i)
    events->Refused(kMem, reasons::kGpuUnhealthy, Units(0, 4), kUnhealthyWhy);
  events->Refused(kMem, reasons::kInterposerSetupFailed, Units(0, 4), "cannot write");
  Settle(*events);
  EXPECT_EQ(Events().size(), 2u) << "one Event per reason";
  EXPECT_EQ(api_.CountRequests("GET", "/api/v1/pods", 0), 2u) << "a lookup per Event only";
  EXPECT_EQ(events->stats().rate_limited, 2u);

  clock_->Advance(59'999);
  events->Refused(kMem, reasons::kGpuUnhealthy, Units(0, 4), kUnhealthyWhy);
  Settle(*events);
  EXPECT_EQ(Events().size(), 2u);
  clock_->Advance(1);
  events->Refused(kMem, reasons::kGpuUnhealthy, Units(0, 4), kUnhealthyWhy);
  Settle(*events);
  std::vector<json> got = Events();
  ASSERT_EQ(got.size(), 3u);
  int with_count = 0;
  for (const json& e : got) {
    EXPECT_EQ(e["involvedObject"]["name"], "train");
    const std::string m = e["message"];
    if (m.find("(and 3 more refusals for this reason since the last event)") != std::string::npos)
      ++with_count;
  }
  EXPECT_EQ(with_count, 1);
  EXPECT_EQ(events->stats().pod_events, 3u);
}

TEST_F(AllocateEventsTest, RefusedNeverWaitsForTheLookup) {
  std::promise<void> entered, release;
  std::shared_future<void> go = release.get_future().share();
  std::atomic<int> calls{0};
  auto events = Make([&](const kube::Cancellation*) -> Result<std::vector<kube::Pod>> {
    if (calls++ == 0) {
      entered.set_value();
      go.wait();
    }
    return std::vector<kube::Pod>{};
  });
  events->Refused(kGpu, reasons::kUnknownDevice, {"a"}, "one");
  entered.get_future().wait();  // the worker is in the lookup, blocked
  // Returns at once although the lookup is blocked (a blocking Refused would hang here).
  events->Refused(kGpu, reasons::kGpuUnhealthy, {"b"}, "two");
  EXPECT_EQ(events->stats().node_events, 0u);
  release.set_value();
  Settle(*events);
  EXPECT_EQ(events->stats().node_events, 2u);
  EXPECT_EQ(Events().size(), 2u);
}

TEST_F(AllocateEventsTest, DestructionCancelsTheLookupAndKeepsTheEvents) {
  std::promise<void> entered;
  auto events = Make([&](const kube::Cancellation* cancel) -> Result<std::vector<kube::Pod>> {
    entered.set_value();
    cancel->SleepFor(std::chrono::hours(1));  // returns when cancelled
    return Status::Unavailable("request cancelled");
  });
  events->Refused(kGpu, reasons::kUnknownDevice, {"a"}, "one");
  entered.get_future().wait();
  events->Refused(kGpu, reasons::kGpuUnhealthy, {"b"}, "two");  // queued behind it
  events.reset();                                               // must not wait out the lookup
  ASSERT_TRUE(recorder_->Flush(kWait));
  std::vector<json> got = Events();
  ASSERT_EQ(got.size(), 2u);
  for (const json& e : got) EXPECT_EQ(e["involvedObject"]["kind"], "Node");
}

TEST_F(AllocateEventsTest, WithoutALookupEveryEventGoesOnTheNode) {
  Add(PodJson("train", "n1", "Pending", {{"main", 4}}));
  auto events = Make(nullptr);
  events->Refused(kMem, reasons::kGpuUnhealthy, Units(0, 4), kUnhealthyWhy);
  ASSERT_TRUE(recorder_->Flush(kWait));
  std::vector<json> got = Events();
  ASSERT_EQ(got.size(), 1u);
  EXPECT_EQ(got[0]["involvedObject"]["kind"], "Node");
  EXPECT_EQ(api_.CountRequests("GET", "/api/v1/pods", 0), 0u);
}

TEST(AllocateEventsMessages, DevicesContainersAndCandidates) {
  EXPECT_EQ(AllocateEvents::Devices(Units(0, 3)), GpuUuid(0) + ": 3 units");
  std::vector<std::string> mixed = Units(0, 1);
  for (const std::string& id : Units(1, 2)) mixed.push_back(id);
  EXPECT_EQ(AllocateEvents::Devices(mixed), GpuUuid(0) + ": 1 unit, " + GpuUuid(1) + ": 2 units");
  EXPECT_EQ(AllocateEvents::Devices({"a", "b"}), "a,b");
  RefusalFacts f{kGpu, "UnknownDevice", {"a"}, "why", 2};
  EXPECT_EQ(AllocateEvents::PodMessage(f, {"l", "r"}),
            "Allocate of nvidia.com/gpu [a] for one of containers l, r refused: why (and 2 more "
            "refusals for this reason since the last event)");
  std::vector<attribution::PodCandidate> pods(7);
  std::vector<attribution::PodMatch> matches;
  for (size_t i = 0; i < pods.size(); ++i) {
    pods[i].namespace_ = "ns";
    pods[i].name = "p" + std::to_string(i);
    matches.push_back({i, {"c"}});
  }
  EXPECT_EQ(AllocateEvents::Candidates(f, "n1", pods, matches),
            "7 pods could be it: ns/p0, ns/p1, ns/p2, ns/p3, ns/p4, and 2 more");
}

// --- the code in front of every refusal's gRPC message ---------------------------------------

class RefusalCodeTest : public ::testing::Test {
 protected:
  void SetUp() override {
    kubelet_ = std::make_unique<fakes::FakeKubelet>(fakes::FakeKubeletOptions{dir_.path()});
    ASSERT_TRUE(kubelet_->Start().ok());
    metrics_ = std::make_shared<NodeMetrics>(NodeMetricsOptions{});
    // What the Events hear (the observer after the metrics in the agent's fan-out).
    struct Last : deviceplugin::AllocateObserver {
      explicit Last(RefusalCodeTest* t) : t(t) {}
      void OnAllocate(const deviceplugin::AllocateOutcome& o) override {
        if (o.answered()) return;
        std::lock_guard<std::mutex> l(t->mu_);
        t->last_reason_ = std::string(o.reason);
        t->last_message_ = std::string(o.message);
      }
      RefusalCodeTest* t;
    };
    observer_ = std::make_shared<deviceplugin::AllocateFanOut>(
        std::vector<std::shared_ptr<deviceplugin::AllocateObserver>>{metrics_,
                                                                     std::make_shared<Last>(this)});
  }
  std::unique_ptr<deviceplugin::DevicePluginServer> Serve(PlannedResource r, PluginFlags flags,
                                                          deviceplugin::AllocationDecorator memory,
                                                          deviceplugin::AllocationDecorator inter,
                                                          int allocatable) {
    deviceplugin::DevicePluginServerOptions o;
    o.plugin_dir = dir_.path();
    o.resource = r;
    o.plugin = flags;
    o.steps = AllocationSteps(std::move(memory), std::move(inter));
    o.observer = observer_;
    auto s = deviceplugin::DevicePluginServer::Start(std::move(o));
    EXPECT_TRUE(s.ok()) << s.status().ToString();
    if (!s.ok()) return nullptr;
    EXPECT_TRUE((*s)->Register().ok());
    EXPECT_TRUE(kubelet_->WaitForAllocatable(r.name, allocatable, kWait));
    return std::move(s).value();
  }
  // Allocates `ids`; the refusal's message must be "<code>: <what the Events heard>".
  void ExpectRefused(const std::string& resource, const std::vector<std::string>& ids,
                     std::string_view code) {
    SCOPED_TRACE(std::string(code));
    v1beta1::AllocateRequest req;
    auto* c = req.add_container_requests();
    for (const std::string& id : ids) c->add_devices_ids(id);
    v1beta1::AllocateResponse resp;
    {
      std::lock_guard<std::mutex> l(mu_);
      last_reason_.clear();
    }
    grpc::Status s = kubelet_->RawAllocate(resource, req, &resp);
    ASSERT_FALSE(s.ok());
    EXPECT_THAT(s.error_message(), StartsWith(std::string(code) + ": "));
    std::lock_guard<std::mutex> l(mu_);
    EXPECT_EQ(last_reason_, code) << "the metrics label";
    EXPECT_EQ(s.error_message(), std::string(code) + ": " + last_message_);
    ++refused_[std::string(code)];
  }

  gpushare::testing::TempDir dir_;
  std::unique_ptr<fakes::FakeKubelet> kubelet_;
  std::shared_ptr<NodeMetrics> metrics_;
  std::shared_ptr<deviceplugin::AllocateObserver> observer_;  // metrics_, then what the Events hear
  std::mutex mu_;
  std::string last_reason_, last_message_;  // guarded by mu_ (written on gRPC threads)
  std::map<std::string, int> refused_;
};

TEST_F(RefusalCodeTest, EveryRefusalStartsWithItsCode) {
  // Whole GPUs x4 replicas, one per container; the interposer's files fail on GPU 1.
  PlannedResource gpus = gpushare::testing::MakeGpuResource(2, 4);
  gpus.fail_requests_greater_than_one = true;
  auto interposer = [](const deviceplugin::ResolvedRequest& q,
                       deviceplugin::ContainerAllocation*) -> Status {
    if (q.devices.front()->gpu_index == 1) return Status::Unavailable("cannot write config");
    return Status::Ok();
  };
  auto gpu = Serve(gpus, {}, nullptr, interposer, 8);
  ASSERT_TRUE(gpu);
  ExpectRefused(kGpu, {"GPU-bogus::0"}, reasons::kUnknownDevice);
  ExpectRefused(kGpu, {GpuUuid(0) + "::0", GpuUuid(0) + "::1"}, reasons::kInvalidRequest);
  ExpectRefused(kGpu, {GpuUuid(1) + "::0"}, reasons::kInterposerSetupFailed);
  gpu->SetHealth({{GpuUuid(0) + "::2", false}});
  ExpectRefused(kGpu, {GpuUuid(0) + "::2"}, reasons::kGpuUnhealthy);

  // Memory units of two GPUs: the memory-share decorator refuses.
  PlannedResource mem = gpushare::testing::EmptyResource(kMem, 1);
  mem.unit_mib = 1024;
  for (int g = 0; g < 2; ++g) {
    for (const std::string& id : Units(g, 2)) {
      PlannedDevice d;
      d.id = id;
      d.gpu_index = g;
      d.gpu_uuid = d.device_uuid = GpuUuid(g);
      d.memory_mib = 2048;
      mem.devices.push_back(d);
    }
  }
  auto units = Serve(mem, {}, MemoryUnitsDecorator(), nullptr, 4);
  ASSERT_TRUE(units);
  std::vector<std::string> two_gpus = {Units(0, 1)[0], Units(1, 1)[0]};
  ExpectRefused(kMem, two_gpus, reasons::kInvalidRequest);

  // A MIG device whose capability nodes are unknown (passDeviceSpecs, no mig-minors).
  PlannedResource mig = gpushare::testing::MakeMigResource(1, 1, 1);
  PluginFlags flags;
  flags.pass_device_specs = true;
  flags.nvidia_dev_root = dir_.Sub("no-dev");
  auto caps = Serve(mig, flags, nullptr, nullptr, 1);
  ASSERT_TRUE(caps);
  ExpectRefused(mig.name, {mig.devices[0].id}, reasons::kDeviceNodesUnavailable);

  // The codes are the refusal counter's labels.
  ScrapeInput in;
  in.node_name = "n1";
  in.node = metrics_->View();
  const std::string text = metrics_->Exposition(in);
  for (const auto& [code, n] : refused_) {
    EXPECT_THAT(text, HasSubstr("gpushare_node_allocate_refusals_total{reason=\"" + code + "\""))
        << code;
  }
  EXPECT_EQ(refused_.size(), 5u);
}

TEST_F(RefusalCodeTest, DecoratorRefusalsAreCodedWithoutAnObserver) {
  PlannedResource gpus = gpushare::testing::MakeGpuResource(1, 1);
  deviceplugin::DevicePluginServerOptions o;
  o.plugin_dir = dir_.path();
  o.resource = gpus;
  o.steps = AllocationSteps(
      nullptr, [](const deviceplugin::ResolvedRequest&, deviceplugin::ContainerAllocation*) {
        return Status::Unavailable("disk full");
      });
  EXPECT_FALSE(o.observer);
  auto s = deviceplugin::DevicePluginServer::Start(std::move(o));
  ASSERT_TRUE(s.ok());
  ASSERT_TRUE((*s)->Register().ok());
  ASSERT_TRUE(kubelet_->WaitForAllocatable(kGpu, 1, kWait));
  v1beta1::AllocateRequest req;
  req.add_container_requests()->add_devices_ids(GpuUuid(0));
  v1beta1::AllocateResponse resp;
  grpc::Status st = kubelet_->RawAllocate(kGpu, req, &resp);
  EXPECT_EQ(st.error_message(), "InterposerSetupFailed: disk full");
}

}  // namespace
}  // namespace gpushare::node
