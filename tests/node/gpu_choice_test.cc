// Integration: the real gpushare-node advises time-slices and whole GPUs on the GPUs the
// waiting pod allows (HAMi's nvidia.com/use-gputype, nouse-gputype, use-gpuuuid, nouse-gpuuuid),
// with the pods from the API-server double and kubelet's side played by the kubelet double
// (which calls GetPreferredAllocation and takes its advice, as kubelet does).
#include <gtest/gtest.h>

#include <fstream>
#include <map>
#include <set>

#include "tests/node/api_agent_fixture.h"

namespace gpushare {
namespace {

using namespace std::chrono_literals;
using json = nlohmann::json;

constexpr auto kWait = 20s;

// Two A100s (GPUs 0 and 1) and two H100s (2 and 3), all whole.
constexpr const char* kInventory = R"(version: v1
gpus:
- {index: 0, uuid: GPU-00000000-0000-0000-0000-0000000000a0, product: NVIDIA A100-SXM4-80GB, computeCapability: "8.0", memoryMiB: 81920, numaNode: 0}
- {index: 1, uuid: GPU-00000000-0000-0000-0000-0000000000a1, product: NVIDIA A100-SXM4-80GB, computeCapability: "8.0", memoryMiB: 81920, numaNode: 0}
- {index: 2, uuid: GPU-00000000-0000-0000-0000-0000000000b2, product: NVIDIA H100 80GB HBM3, computeCapability: "9.0", memoryMiB: 81559, numaNode: 1}
- {index: 3, uuid: GPU-00000000-0000-0000-0000-0000000000b3, product: NVIDIA H100 80GB HBM3, computeCapability: "9.0", memoryMiB: 81559, numaNode: 1}
)";
constexpr const char* kWholeConfig = "version: v1\n";

class GpuChoiceTest : public testing::ApiAgentTest {
 protected:
  std::string Write(const std::string& name, const std::string& text) {
    const std::string path = dir_.Sub(name);
    std::ofstream(path) << text;
    return path;
  }

  // A pod bound to n1, not started, asking `count` of `resource` in container "c".
  void Bind(const std::string& name, const std::string& resource, int count,
            std::map<std::string, std::string> annotations = {},
            const std::string& created = "2026-12-07T10:00:00Z") {
    json meta = {{"name", name}, {"namespace", "ml"}, {"creationTimestamp", created}};
    if (!annotations.empty()) meta["annotations"] = annotations;
    api_.Upsert(
        fakes::Resource::kPods,
        {{"kind", "Pod"},
         {"metadata", meta},
         {"spec",
          {{"nodeName", "n1"},
           {"containers",
            {{{"name", "c"}, {"resources", {{"limits", {{resource, std::to_string(count)}}}}}}}}}},
         {"status", {{"phase", "Pending"}}}});
  }
  // Kubelet admits the pod: the devices it got.
  std::vector<std::string> Admit(const std::string& name, const std::string& resource, int count) {
    fakes::FakePod p;
    p.namespace_ = "ml";
    p.name = name;
    p.containers = {{"c", {{resource, count}}}};
    fakes::PodAdmission a = kubelet_->AdmitPod(p);
    EXPECT_TRUE(a.admitted) << name << ": " << a.error;
    std::vector<std::string> out;
    for (const fakes::AllocationRecord& r : kubelet_->Allocations())
      if (r.pod_name == name && r.resource == resource)
        out.insert(out.end(), r.device_ids.begin(), r.device_ids.end());
    return out;
  }
  // The GPUs (UUIDs) of device IDs "<uuid>" or "<uuid>::<n>".
  static std::set<std::string> Gpus(const std::vector<std::string>& ids) {
    std::set<std::string> out;
    for (const std::string& id : ids) out.insert(id.substr(0, id.find("::")));
    return out;
  }
};

TEST_F(GpuChoiceTest, WholeGpusGoWhereThePodAllows) {
  StartAgent(Write("inv.yaml", kInventory), Write("config.yaml", kWholeConfig));
  ASSERT_TRUE(kubelet_->WaitForAllocatable("nvidia.com/gpu", 4, kWait));

  // Without a choice, NUMA-aligned as always: the first GPU of node 0 (an A100).
  Bind("plain", "nvidia.com/gpu", 1);
  EXPECT_EQ(Gpus(Admit("plain", "nvidia.com/gpu", 1)),
            (std::set<std::string>{"GPU-00000000-0000-0000-0000-0000000000a0"}));
  // An H100 by model, case and substring as HAMi matches.
  Bind("h100", "nvidia.com/gpu", 1, {{"nvidia.com/use-gputype", "h100"}});
  EXPECT_EQ(Gpus(Admit("h100", "nvidia.com/gpu", 1)),
            (std::set<std::string>{"GPU-00000000-0000-0000-0000-0000000000b2"}));
  // Not A100s and not GPU-h2: GPU-h3.
  Bind("not", "nvidia.com/gpu", 1,
       {{"nvidia.com/nouse-gputype", "A100"},
        {"nvidia.com/nouse-gpuuuid", "GPU-00000000-0000-0000-0000-0000000000b2"}});
  EXPECT_EQ(Gpus(Admit("not", "nvidia.com/gpu", 1)),
            (std::set<std::string>{"GPU-00000000-0000-0000-0000-0000000000b3"}));
  // By UUID.
  Bind("uuid", "nvidia.com/gpu", 1,
       {{"nvidia.com/use-gpuuuid", "GPU-00000000-0000-0000-0000-0000000000a1"}});
  EXPECT_EQ(Gpus(Admit("uuid", "nvidia.com/gpu", 1)),
            (std::set<std::string>{"GPU-00000000-0000-0000-0000-0000000000a1"}));
  EXPECT_NE(
      agent_->Log().find(
          "event=gpu_choice resource=nvidia.com/gpu size=1 rule=common pod=ml/h100 allowed=2"),
      std::string::npos);
}

TEST_F(GpuChoiceTest, PodsWaitingTogetherEachGetTheirOwnChoice) {
  StartAgent(Write("inv.yaml", kInventory), Write("config.yaml", kWholeConfig));
  ASSERT_TRUE(kubelet_->WaitForAllocatable("nvidia.com/gpu", 4, kWait));
  // Both bound before kubelet admits either; kubelet admits the older first.
  Bind("first", "nvidia.com/gpu", 2, {{"nvidia.com/use-gputype", "H100"}}, "2026-12-07T10:00:00Z");
  Bind("second", "nvidia.com/gpu", 2, {{"nvidia.com/use-gputype", "A100"}}, "2026-12-07T10:00:01Z");
  ASSERT_TRUE(kubelet_->WaitFor(
      [&] { return agent_->Log().find("event=gpu_choice_started") != std::string::npos; }, kWait));
  EXPECT_EQ(Gpus(Admit("first", "nvidia.com/gpu", 2)),
            (std::set<std::string>{"GPU-00000000-0000-0000-0000-0000000000b2",
                                   "GPU-00000000-0000-0000-0000-0000000000b3"}));
  // The first still looks Pending in the API, but kubelet's PodResources says it holds its GPUs.
  EXPECT_EQ(Gpus(Admit("second", "nvidia.com/gpu", 2)),
            (std::set<std::string>{"GPU-00000000-0000-0000-0000-0000000000a0",
                                   "GPU-00000000-0000-0000-0000-0000000000a1"}));
}

TEST_F(GpuChoiceTest, APodThatHoldsItsGpusNoLongerSteersTheOthers) {
  StartAgent(Write("inv.yaml", kInventory), Write("config.yaml", kWholeConfig));
  ASSERT_TRUE(kubelet_->WaitForAllocatable("nvidia.com/gpu", 4, kWait));
  const std::string b3 = "GPU-00000000-0000-0000-0000-0000000000b3";
  Bind("h100", "nvidia.com/gpu", 1, {{"nvidia.com/use-gputype", "H100"}}, "2026-12-07T10:00:00Z");
  Bind("notb3", "nvidia.com/gpu", 1, {{"nvidia.com/nouse-gpuuuid", b3}}, "2026-12-07T10:00:01Z");
  // Both allow GPU b2 only: the first gets it.
  EXPECT_EQ(Gpus(Admit("h100", "nvidia.com/gpu", 1)),
            (std::set<std::string>{"GPU-00000000-0000-0000-0000-0000000000b2"}));
  // Still Pending in the API, the first would now steer the second to b3 (the one H100 left);
  // kubelet's PodResources says it holds its GPU, so the second's own choice decides.
  const std::set<std::string> got = Gpus(Admit("notb3", "nvidia.com/gpu", 1));
  EXPECT_EQ(got.count(b3), 0u);
  EXPECT_EQ(got.size(), 1u);
}

TEST_F(GpuChoiceTest, APodTheInformerHasNotSeenYetIsListedFromTheApi) {
  StartAgent(Write("inv.yaml", kInventory), Write("config.yaml", kWholeConfig));
  ASSERT_TRUE(kubelet_->WaitForAllocatable("nvidia.com/gpu", 4, kWait));
  // The agent's pod watch is cut and its next ones wait 5 s at the API server: a pod bound now
  // reaches kubelet before it reaches the agent's informer.
  fakes::Fault slow;
  slow.kind = fakes::Fault::Kind::kDelay;
  slow.count = 1000;
  slow.watch = 1;
  slow.path_contains = "/pods";
  slow.delay = 5s;
  api_.InjectFault(slow);
  api_.CloseWatches(fakes::FakeApiServer::CloseMode::kDrop);
  Bind("late", "nvidia.com/gpu", 1,
       {{"nvidia.com/use-gpuuuid", "GPU-00000000-0000-0000-0000-0000000000b3"}});
  EXPECT_EQ(Gpus(Admit("late", "nvidia.com/gpu", 1)),
            (std::set<std::string>{"GPU-00000000-0000-0000-0000-0000000000b3"}));
}

TEST_F(GpuChoiceTest, TimeSlicesComeFromTheChosenGpu) {
  // examples/config/mixed.yaml: the two A10s (GPUs 1 and 2) time-sliced 10 ways.
  StartAgent(testing::ExamplePath("inventory/mixed.yaml"),
             testing::ExamplePath("config/mixed.yaml"));
  ASSERT_TRUE(kubelet_->WaitForAllocatable("nvidia.com/gpu.shared", 20, kWait));
  const std::string gpu2 = "GPU-c6365aed-4725-29bd-75f9-e1e4ccab2da5";
  // Without a choice, two replicas spread over both A10s (distributed).
  Bind("spread", "nvidia.com/gpu.shared", 2);
  EXPECT_EQ(Gpus(Admit("spread", "nvidia.com/gpu.shared", 2)).size(), 2u);
  // With one, both on GPU 2.
  Bind("one", "nvidia.com/gpu.shared", 2, {{"nvidia.com/use-gpuuuid", gpu2}});
  EXPECT_EQ(Gpus(Admit("one", "nvidia.com/gpu.shared", 2)), (std::set<std::string>{gpu2}));
}

TEST_F(GpuChoiceTest, AChoiceNothingFreeMeetsIsLoggedWithTheGpusItExcluded) {
  StartAgent(Write("inv.yaml", kInventory), Write("config.yaml", kWholeConfig));
  ASSERT_TRUE(kubelet_->WaitForAllocatable("nvidia.com/gpu", 4, kWait));
  Bind("t4", "nvidia.com/gpu", 1, {{"nvidia.com/use-gputype", "T4"}});
  // Kubelet places it anyway (kubelet, not the plugin, decides); the node says why.
  EXPECT_EQ(Admit("t4", "nvidia.com/gpu", 1).size(), 1u);
  const std::string log = agent_->Log();
  EXPECT_NE(log.find("event=gpu_choice_unsatisfiable resource=nvidia.com/gpu size=1 free=4"),
            std::string::npos)
      << log;
  EXPECT_NE(log.find("ml/t4: GPU 0: nvidia.com/use-gputype=T4 does not match "
                     "\\\"NVIDIA A100-SXM4-80GB\\\""),
            std::string::npos)
      << log;
}

}  // namespace
}  // namespace gpushare
