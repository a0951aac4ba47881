// Integration: gpushare.io/allocations written by the real gpushare-node, from the kubelet
// double's PodResources List, on pods of the API-server double, in every sharing mode (whole,
// time-sliced, MIG with replicas: examples/config/mixed.yaml; memory shares). Only pods bound to
// this node are patched, with their UID as the precondition; a pod that went away or sits on
// another node is left alone; nothing is written again when nothing changed, also after the
// agent restarts; failed patches are retried with backoff.
#include "node/allocation_recorder.h"

#include <gtest/gtest.h>

#include <fstream>
#include <thread>

#include "core/allocation_json.h"
#include "core/allocation_record.h"
#include "core/memshare.h"
#include "tests/deviceplugin/fixtures.h"
#include "tests/fakes/apiserver/fake_apiserver.h"
#include "tests/fakes/apiserver/kubeconfig_text.h"
#include "tests/fakes/kubelet/fake_kubelet.h"
#include "tests/node/agent_process.h"
#include "tests/node/api_agent_fixture.h"

namespace gpushare {
namespace {

using fakes::FakeKubelet;
using testing::AgentProcess;
using testing::TempDir;
using namespace std::chrono_literals;
using json = nlohmann::json;

constexpr auto kWait = 20s;
constexpr const char* kAnnotation = "gpushare.io/allocations";

class AllocationRecorderTest : public testing::ApiAgentTest {
 protected:
  void StartAgent(const std::string& inventory, const std::string& config) {
    ApiAgentTest::StartAgent(inventory, config, {"--reconcile-interval", "200ms"});
  }

  // The next `count` PATCH requests whose path contains `path` fail with 500.
  void FailPatches(const std::string& path, int count) {
    fakes::Fault f;
    f.count = count;
    f.http_code = 500;
    f.method = "PATCH";
    f.path_contains = path;
    api_.InjectFault(f);
  }
  // A pod bound to `node` asking for `count` of `resource` in container "c".
  json PodJson(const std::string& name, const std::string& node, const std::string& resource,
               int count) {
    return {
        {"kind", "Pod"},
        {"metadata", {{"name", name}, {"namespace", "ml"}}},
        {"spec",
         {{"nodeName", node},
          {"containers",
           {{{"name", "c"}, {"resources", {{"limits", {{resource, std::to_string(count)}}}}}}}}}},
        {"status", {{"phase", "Running"}}}};
  }
  // Admits the pod in kubelet (Allocate on the agent's plugin).
  void Admit(const std::string& name, const std::string& resource, int count) {
    fakes::FakePod p;
    p.namespace_ = "ml";
    p.name = name;
    p.containers = {{"c", {{resource, count}}}};
    fakes::PodAdmission a = kubelet_->AdmitPod(p);
    ASSERT_TRUE(a.admitted) << name << ": " << a.error;
  }
  std::optional<alloc::AllocationRecord> Record(const std::string& name) {
    auto pod = api_.Get(fakes::Resource::kPods, "ml", name);
    if (!pod) return std::nullopt;
    const json& ann = (*pod)["metadata"].value("annotations", json::object());
    if (!ann.contains(kAnnotation)) return std::nullopt;
    Result<alloc::AllocationRecord> r =
        alloc::DecodeAllocationRecord(ann[kAnnotation].get<std::string>());
    EXPECT_TRUE(r.ok()) << r.status().message();
    return r.ok() ? std::optional(*r) : std::nullopt;
  }
  bool WaitRecord(const std::string& name) {
    return kubelet_->WaitFor([&] { return Record(name).has_value(); }, kWait);
  }
  size_t Patches(const std::string& pod = "") {
    return api_.CountRequests("PATCH", "/namespaces/ml/pods/" + pod, 0);
  }
  // Waits until the agent has listed PodResources `n` more times (its rounds).
  void Rounds(int n) {
    const uint64_t start = kubelet_->pod_resources_calls();
    ASSERT_TRUE(kubelet_->WaitFor(
        [&] { return kubelet_->pod_resources_calls() >= start + static_cast<uint64_t>(n); },
        kWait));
  }
};

TEST_F(AllocationRecorderTest, WholeTimeSlicedAndMigOnlyHereOnlyOnceAcrossRestarts) {
  StartAgent(testing::ExamplePath("inventory/mixed.yaml"),
             testing::ExamplePath("config/mixed.yaml"));
  for (const auto& [name, count] : testing::MixedExampleCounts())
    ASSERT_TRUE(kubelet_->WaitForAllocatable(name, count, kWait)) << name;

  // The first two patches of ml/whole fail: retried with backoff (1 s, then 2 s), not every
  // round (200 ms).
  FailPatches("/pods/whole", 2);
  api_.Upsert(fakes::Resource::kPods, PodJson("whole", "n1", "nvidia.com/gpu", 1));
  api_.Upsert(fakes::Resource::kPods, PodJson("ts", "n1", "nvidia.com/gpu.shared", 2));
  api_.Upsert(fakes::Resource::kPods, PodJson("mig", "n1", "nvidia.com/mig-3g.40gb", 1));
  // Kubelet lists ml/elsewhere, but the API's pod of that name is bound to another node; and
  // ml/gone has no API object at all.
  api_.Upsert(fakes::Resource::kPods, PodJson("elsewhere", "n2", "nvidia.com/gpu.shared", 1));
  Admit("whole", "nvidia.com/gpu", 1);
  Admit("ts", "nvidia.com/gpu.shared", 2);
  Admit("mig", "nvidia.com/mig-3g.40gb", 1);
  Admit("elsewhere", "nvidia.com/gpu.shared", 1);
  Admit("gone", "nvidia.com/mig-3g.40gb", 1);

  ASSERT_TRUE(WaitRecord("whole") && WaitRecord("ts") && WaitRecord("mig"));
  // The double logs a request once answered, so a moment after its effect shows.
  ASSERT_TRUE(kubelet_->WaitFor([&] { return Patches() >= 5; }, kWait)) << Patches();
  alloc::AllocationRecord whole = *Record("whole");
  EXPECT_EQ(whole.node, "n1");
  ASSERT_EQ(whole.containers.size(), 1u);
  ASSERT_EQ(whole.containers[0].devices.size(), 1u);
  EXPECT_EQ(whole.containers[0].resource, "nvidia.com/gpu");
  EXPECT_EQ(whole.containers[0].devices[0].kind, alloc::DeviceKind::kWhole);
  EXPECT_EQ(whole.containers[0].devices[0].gpu, 0);
  EXPECT_EQ(whole.containers[0].devices[0].memory_mib, 81920);
  ASSERT_EQ(whole.gpus.size(), 1u);
  EXPECT_EQ(whole.gpus[0].model, "NVIDIA A100 80GB PCIe");

  alloc::AllocationRecord ts = *Record("ts");
  ASSERT_EQ(ts.containers[0].devices.size(), 2u);
  for (const alloc::DeviceRecord& d : ts.containers[0].devices) {
    EXPECT_EQ(d.kind, alloc::DeviceKind::kReplica);
    EXPECT_TRUE(d.gpu == 1 || d.gpu == 2) << d.gpu;
    EXPECT_GE(d.replica, 0);
    EXPECT_EQ(d.memory_mib, 23028 / 10);  // memoryLimit: evenSplit
  }

  alloc::AllocationRecord mig = *Record("mig");
  const alloc::DeviceRecord& m = mig.containers[0].devices[0];
  EXPECT_EQ(m.kind, alloc::DeviceKind::kMig);
  EXPECT_EQ(m.gpu, 3);
  EXPECT_EQ(m.profile, "3g.40gb");
  EXPECT_EQ(m.mig.rfind("MIG-", 0), 0u);
  EXPECT_GE(m.replica, 0);

  // Rounds go by: nothing more is written, the pod elsewhere is untouched, the gone one too.
  const size_t patches = Patches();
  EXPECT_EQ(Patches("whole"), 3u);  // two failures, then success
  EXPECT_EQ(patches, 5u);
  const std::string log = agent_->Log();
  size_t failed = 0;
  for (size_t at = log.find("event=allocations_patch_failed pod=ml/whole"); at != std::string::npos;
       at = log.find("event=allocations_patch_failed pod=ml/whole", at + 1))
    ++failed;
  EXPECT_EQ(failed, 2u);
  Rounds(5);
  EXPECT_EQ(Patches(), patches);
  EXPECT_FALSE(Record("elsewhere").has_value());
  EXPECT_EQ(Patches("elsewhere"), 0u);
  EXPECT_EQ(Patches("gone"), 0u);

  // A restarted agent finds every value in place: no patch.
  StopAgent();
  StartAgent(testing::ExamplePath("inventory/mixed.yaml"),
             testing::ExamplePath("config/mixed.yaml"));
  ASSERT_TRUE(agent_->WaitForLog("event=allocations_started", kWait));
  Rounds(5);
  EXPECT_EQ(Patches(), patches);

  // The pod goes away and a namesake appears on another node: not patched.
  api_.Remove(fakes::Resource::kPods, "ml", "ts");
  api_.Upsert(fakes::Resource::kPods, PodJson("ts", "n2", "nvidia.com/gpu.shared", 2));
  Rounds(5);
  EXPECT_EQ(Patches(), patches);
  EXPECT_FALSE(Record("ts").has_value());
}

// Without memory shares the recorder publishes the node's GPUs (gpushare.io/gpu-inventory, each
// with its mode), retries a failed patch, and does not patch again while nothing changes.
TEST_F(AllocationRecorderTest, PublishesTheGpusOfANodeWithoutMemoryShares) {
  FailPatches("/nodes/n1", 1);
  StartAgent(testing::ExamplePath("inventory/mixed.yaml"),
             testing::ExamplePath("config/mixed.yaml"));
  auto inventory = [&]() -> std::optional<memshare::NodeInventory> {
    auto node = api_.Get(fakes::Resource::kNodes, "", "n1");
    if (!node) return std::nullopt;
    const json ann = (*node)["metadata"].value("annotations", json::object());
    if (!ann.contains("gpushare.io/gpu-inventory")) return std::nullopt;
    Result<memshare::NodeInventory> inv =
        memshare::DecodeInventory(ann["gpushare.io/gpu-inventory"].get<std::string>());
    EXPECT_TRUE(inv.ok()) << inv.status().message();
    return inv.ok() ? std::optional(*inv) : std::nullopt;
  };
  ASSERT_TRUE(kubelet_->WaitFor([&] { return inventory().has_value(); }, kWait));
  const memshare::NodeInventory inv = *inventory();
  ASSERT_EQ(inv.gpus.size(), 4u);
  const std::vector<std::string> modes = {"exclusive", "time-slicing", "time-slicing", "mig"};
  for (size_t i = 0; i < inv.gpus.size(); ++i) {
    EXPECT_EQ(inv.gpus[i].index, static_cast<int>(i));
    EXPECT_EQ(inv.gpus[i].mode, modes[i]) << i;
    EXPECT_EQ(inv.gpus[i].units, 0) << i;
    EXPECT_TRUE(inv.gpus[i].healthy) << i;
  }
  EXPECT_EQ(inv.gpus[0].uuid, "GPU-44bbd733-46c7-9355-b753-148bdb0f4e74");
  EXPECT_EQ(inv.gpus[1].model, "NVIDIA A10");
  EXPECT_EQ(inv.gpus[0].memory_mib, 81920);
  EXPECT_EQ(inv.max_clients_per_gpu, 48);
  EXPECT_TRUE(agent_->WaitForLog("event=inventory_publish_failed node=n1 retry_ms=1000", kWait));
  ASSERT_TRUE(
      kubelet_->WaitFor([&] { return api_.CountRequests("PATCH", "/nodes/n1", 0) >= 2; }, kWait));
  const size_t patches = api_.CountRequests("PATCH", "/nodes/n1", 0);
  EXPECT_EQ(patches, 2u);  // the failure, then the retry
  Rounds(5);
  EXPECT_EQ(api_.CountRequests("PATCH", "/nodes/n1", 0), patches);
}

// The pod cache follows a watch, which lags behind the writes on a busy API server: while the
// cache still shows the pod as it was before the recorder's patch, that patch counts as in
// place, and nothing is patched twice. Once the watch catches up the cache is the truth again.
TEST_F(AllocationRecorderTest, ALaggingWatchDoesNotCauseTheSamePatchTwice) {
  // The pod is there before the agent, so the informer's first list has it.
  api_.Upsert(fakes::Resource::kPods, PodJson("whole", "n1", "nvidia.com/gpu", 1));
  StartAgent(testing::ExamplePath("inventory/mixed.yaml"),
             testing::ExamplePath("config/mixed.yaml"));
  ASSERT_TRUE(kubelet_->WaitForAllocatable("nvidia.com/gpu", 1, kWait));
  ASSERT_TRUE(agent_->WaitForLog("event=allocations_started", kWait));

  api_.HoldWatchEvents(true);
  Admit("whole", "nvidia.com/gpu", 1);
  ASSERT_TRUE(WaitRecord("whole"));
  ASSERT_TRUE(kubelet_->WaitFor([&] { return Patches("whole") >= 1; }, kWait));
  Rounds(5);  // the cache still shows the pod without the annotation
  EXPECT_EQ(Patches("whole"), 1u);

  api_.HoldWatchEvents(false);
  Rounds(5);
  EXPECT_EQ(Patches("whole"), 1u);

  // Someone else changes the annotation: the cache, now current, says so, and it is put back.
  auto pod = api_.Get(fakes::Resource::kPods, "ml", "whole");
  ASSERT_TRUE(pod.has_value());
  const std::string recorded = (*pod)["metadata"]["annotations"][kAnnotation];
  (*pod)["metadata"]["annotations"][kAnnotation] = "{}";
  api_.Upsert(fakes::Resource::kPods, *pod);
  ASSERT_TRUE(kubelet_->WaitFor([&] { return Patches("whole") >= 2; }, kWait));
  ASSERT_TRUE(kubelet_->WaitFor(
      [&] {
        auto p = api_.Get(fakes::Resource::kPods, "ml", "whole");
        return p && (*p)["metadata"]["annotations"][kAnnotation] == recorded;
      },
      kWait));
  Rounds(5);
  EXPECT_EQ(Patches("whole"), 2u);
}

TEST_F(AllocationRecorderTest, MemorySharesAreOneEntryPerGpu) {
  const std::string inv = dir_.Sub("inventory.yaml");
  std::ofstream(inv) << "version: v1\ngpus:\n- index: 0\n  uuid: "
                        "GPU-0a0a0a0a-0000-4000-8000-000000000000\n  product: NVIDIA A10\n  "
                        "memoryMiB: 23028\n  computeCapability: \"8.6\"\n";
  const std::string cfg = dir_.Sub("config.yaml");
  std::ofstream(cfg) << "version: v1\ngpushare:\n  memoryShares:\n    devices: all\n";
  StartAgent(inv, cfg);
  ASSERT_TRUE(kubelet_->WaitForAllocatable("aliyun.com/gpu-mem", 22, kWait));

  api_.Upsert(fakes::Resource::kPods, PodJson("mem", "n1", "aliyun.com/gpu-mem", 3));
  Admit("mem", "aliyun.com/gpu-mem", 3);
  ASSERT_TRUE(WaitRecord("mem"));
  alloc::AllocationRecord r = *Record("mem");
  ASSERT_EQ(r.containers.size(), 1u);
  ASSERT_EQ(r.containers[0].devices.size(), 1u);  // the units of one GPU: one entry
  const alloc::DeviceRecord& d = r.containers[0].devices[0];
  EXPECT_EQ(d.kind, alloc::DeviceKind::kMemory);
  EXPECT_EQ(d.units, 3);
  EXPECT_EQ(d.memory_mib, 3 * 1024);
  EXPECT_EQ(d.gpu, 0);
}

// The recorder's inputs follow every plan the agent adopts (health applied): RecorderInputs is
// one of the agent's observers (AgentTest.EveryObserverHearsThePlansAndEveryAllocate checks
// that the agent tells each of them).
TEST(RecorderInputsTest, FollowTheAdoptedPlans) {
  auto inputs = std::make_shared<node::RecorderInputs>();
  node::RecorderInput got;
  EXPECT_FALSE(inputs->Current(&got));

  node::AgentInputs in;
  in.inventory.gpus.resize(1);
  in.inventory.gpus[0].uuid = "GPU-1";
  ResourcePlan plan;
  plan.resources.resize(1);
  plan.resources[0].name = "nvidia.com/gpu";
  inputs->PlanChanged(in, plan);
  ASSERT_TRUE(inputs->Current(&got));
  EXPECT_EQ(got.inventory.gpus[0].uuid, "GPU-1");
  ASSERT_EQ(got.plan.resources.size(), 1u);
  EXPECT_EQ(got.plan.resources[0].name, "nvidia.com/gpu");

  plan.resources[0].name = "nvidia.com/gpu.shared";  // e.g. after a reload
  inputs->PlanChanged(in, plan);
  ASSERT_TRUE(inputs->Current(&got));
  EXPECT_EQ(got.plan.resources[0].name, "nvidia.com/gpu.shared");
}

}  // namespace
}  // namespace gpushare
