// The agent in-process with a memory-share resource and no memory-share mode (no API): units
// still come from one GPU (best fit), Allocate still checks it and sets the variables, and the
// memory-share mode, when given, is built once and told about every plan and health change.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <atomic>
#include <thread>

#include "core/memshare.h"
#include "node/agent.h"
#include "proto/deviceplugin/v1beta1/api.pb.h"
#include "tests/deviceplugin/fixtures.h"
#include "tests/fakes/kubelet/fake_kubelet.h"

namespace gpushare::node {
namespace {

using gpushare::testing::GpuUuid;
using ::testing::HasSubstr;
using namespace std::chrono_literals;

Inventory Gpus(int n) {
  Inventory inv;
  inv.source = "test";
  for (int i = 0; i < n; ++i) {
    Gpu g;
    g.index = i;
    g.uuid = GpuUuid(i);
    g.product = "NVIDIA A10";
    g.memory_mib = 8 * 1024;
    inv.gpus.push_back(g);
  }
  return inv;
}

struct CountingMode : MemoryShareMode {
  explicit CountingMode(std::atomic<int>* updates) : updates_(updates) {}
  void Update(const AgentInputs&, const ResourcePlan& plan) override {
    EXPECT_NE(plan.Find("aliyun.com/gpu-mem"), nullptr);
    updates_->fetch_add(1);
  }
  deviceplugin::PreferredChooser Preferred() override { return nullptr; }
  deviceplugin::AllocationDecorator Decorator() override {
    return [](const deviceplugin::ResolvedRequest&, deviceplugin::ContainerAllocation* a) {
      a->envs["FROM_MODE"] = "1";
      return Status::Ok();
    };
  }
  std::atomic<int>* updates_;
};

class MemoryAgentTest : public ::testing::Test {
 protected:
  void SetUp() override {
    kubelet_ = std::make_unique<fakes::FakeKubelet>(fakes::FakeKubeletOptions{dir_.path()});
    ASSERT_TRUE(kubelet_->Start().ok());
    config_.gpushare.memory_shares.devices = DeviceSelector{};
  }
  void TearDown() override {
    if (agent_) agent_->RequestStop();
    if (runner_.joinable()) runner_.join();
  }
  void StartAgent(MemoryShareFactory factory = nullptr) {
    AgentOptions o;
    o.plugin_dir = dir_.path();
    o.handle_signals = false;
    o.load = [this]() -> Result<AgentInputs> { return AgentInputs{Gpus(3), config_, {}}; };
    o.memory_shares = std::move(factory);
    agent_ = std::make_unique<Agent>(std::move(o));
    Status s = agent_->Init();
    ASSERT_TRUE(s.ok()) << s.ToString();
    runner_ = std::thread([this] { agent_->Run(); });
    ASSERT_TRUE(kubelet_->WaitForAllocatable("aliyun.com/gpu-mem", 24, 10s));
  }
  std::set<std::string> GpusOf(const std::vector<std::string>& ids) {
    std::set<std::string> out;
    for (const auto& id : ids) out.insert(memshare::ParseUnitDeviceId(id)->gpu_uuid);
    return out;
  }

  gpushare::testing::TempDir dir_;
  std::unique_ptr<fakes::FakeKubelet> kubelet_;
  NodeConfig config_;
  std::unique_ptr<Agent> agent_;
  std::thread runner_;
};

TEST_F(MemoryAgentTest, WithoutTheApiUnitsStillComeFromOneGpu) {
  StartAgent();
  // 5 + 5 + 5 on 3 GPUs of 8: every container on one GPU, packed best fit.
  for (int i = 0; i < 3; ++i) {
    fakes::Admission a =
        kubelet_->Admit("p" + std::to_string(i) + "/main", "aliyun.com/gpu-mem", 5);
    ASSERT_TRUE(a.admitted) << a.error;
    EXPECT_EQ(GpusOf(a.device_ids).size(), 1u);
    EXPECT_EQ(a.response.envs().at("ALIYUN_COM_GPU_MEM_CONTAINER"), "5");
    EXPECT_EQ(a.response.envs().at("ALIYUN_COM_GPU_MEM_DEV"), "8");
    EXPECT_EQ(a.response.envs().at("NVIDIA_VISIBLE_DEVICES"), *GpusOf(a.device_ids).begin());
  }
  // 9 units are free, 3 per GPU: a container of 4 cannot get one GPU and is refused.
  fakes::Admission a = kubelet_->Admit("big/main", "aliyun.com/gpu-mem", 4);
  EXPECT_FALSE(a.admitted);
  EXPECT_THAT(a.error, HasSubstr("must come from one GPU"));
  // A 3 fits on one GPU exactly.
  a = kubelet_->Admit("fits/main", "aliyun.com/gpu-mem", 3);
  ASSERT_TRUE(a.admitted) << a.error;
  EXPECT_EQ(GpusOf(a.device_ids).size(), 1u);
}

TEST_F(MemoryAgentTest, TheModeIsBuiltOnceAndToldAboutPlans) {
  std::atomic<int> builds{0}, updates{0};
  StartAgent([&](const AgentInputs&) -> Result<std::unique_ptr<MemoryShareMode>> {
    builds++;
    return std::unique_ptr<MemoryShareMode>(new CountingMode(&updates));
  });
  EXPECT_EQ(builds.load(), 1);
  EXPECT_GE(updates.load(), 1);
  fakes::Admission a = kubelet_->Admit("p/main", "aliyun.com/gpu-mem", 2);
  ASSERT_TRUE(a.admitted) << a.error;
  EXPECT_EQ(a.response.envs().at("FROM_MODE"), "1");
  const int before = updates.load();
  agent_->RequestReload();
  ASSERT_TRUE(kubelet_->WaitFor([&] { return updates.load() > before; }, 10s));
  EXPECT_EQ(builds.load(), 1);
}

TEST_F(MemoryAgentTest, AFailingModeStopsInit) {
  AgentOptions o;
  o.plugin_dir = dir_.path();
  o.handle_signals = false;
  o.load = [this]() -> Result<AgentInputs> { return AgentInputs{Gpus(1), config_, {}}; };
  o.memory_shares = [](const AgentInputs&) -> Result<std::unique_ptr<MemoryShareMode>> {
    return Status::InvalidArgument("--node-name (or NODE_NAME): required");
  };
  Agent agent(std::move(o));
  Status s = agent.Init();
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
  EXPECT_THAT(s.message(), HasSubstr("--node-name"));
}

// The plan's size guard counts exactly what the device plugin server sends.
TEST(ListAndWatchBytes, EqualsTheSerializedMessage) {
  Inventory inv = Gpus(3);
  inv.gpus[0].memory_mib = 24 * 1024;
  inv.gpus[1].numa_node = 0;
  inv.gpus[2].numa_node = 300;  // a multi-byte varint
  NodeConfig c;
  c.gpushare.memory_shares.devices = DeviceSelector{};
  c.gpushare.memory_shares.unit = memshare::MemoryUnit::kMiB;
  Result<ResourcePlan> plan = BuildResourcePlan(inv, c);
  ASSERT_TRUE(plan.ok()) << plan.status().ToString();
  ASSERT_EQ(plan->resources.size(), 2u);  // the units and alibabacloud.com/gpu-milli
  for (const PlannedResource& r : plan->resources) {
    v1beta1::ListAndWatchResponse msg;
    for (const PlannedDevice& d : r.devices) {
      v1beta1::Device* out = msg.add_devices();
      out->set_id(d.id);
      out->set_health("Unhealthy");
      for (int64_t n : d.numa_nodes) out->mutable_topology()->add_nodes()->set_id(n);
    }
    EXPECT_EQ(static_cast<int64_t>(msg.ByteSizeLong()), ListAndWatchBytes(r)) << r.name;
  }
  const PlannedResource* units = plan->Find(std::string(memshare::kResourceName));
  ASSERT_NE(units, nullptr);
  EXPECT_EQ(units->devices.size(), (24u + 8u + 8u) * 1024u);
  const PlannedResource* milli = plan->Find(std::string(memshare::kMilliResource));
  ASSERT_NE(milli, nullptr);
  EXPECT_EQ(milli->devices.size(), 3u * 1000u);
}

}  // namespace
}  // namespace gpushare::node
