// gpushare.memoryShares in the config file: defaults (none), every key, flag > environment >
// file precedence, and the refusals with their field paths.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "config/node_config_loader.h"
#include "base/strings.h"

namespace gpushare {
namespace {

using ::testing::Contains;
using ::testing::HasSubstr;

Result<LoadedNodeConfig> Parse(const std::string& text, const Environment& env = {}, const NodeConfigFlags& flags = {}) {
  return LoadNodeConfigFromText(flags, env, text, "node.yaml");
}

std::vector<std::string> Problems(const std::string& text) {
  auto r = Parse(text);
  if (r.ok()) return {"(accepted)"};
  EXPECT_EQ(r.status().code(), StatusCode::kInvalidArgument);
  return SplitLines(r.status().message());
}

TEST(MemorySharesConfig, AbsentMeansNoGpu) {
  auto r = Parse("version: v1\n");
  ASSERT_TRUE(r.ok());
  const MemoryShares& m = r->config.gpushare.memory_shares;
  EXPECT_FALSE(m.enabled());
  EXPECT_EQ(m.resource_name, "aliyun.com/gpu-mem");
  EXPECT_EQ(m.unit, memshare::MemoryUnit::kGiB);
  EXPECT_TRUE(m.publish_gpu_count);
  // A section without devices serves nothing either, and says so.
  r = Parse("gpushare:\n  memoryShares:\n    unit: MiB\n");
  ASSERT_TRUE(r.ok());
  EXPECT_FALSE(r->config.gpushare.memory_shares.enabled());
  EXPECT_THAT(r->notes, Contains(HasSubstr("gpushare.memoryShares.devices is not set")));
  for (const char* none : {"none", "[]"}) {
    r = Parse(std::string("gpushare:\n  memoryShares:\n    devices: ") + none + "\n");
    ASSERT_TRUE(r.ok()) << none;
    EXPECT_FALSE(r->config.gpushare.memory_shares.enabled()) << none;
  }
}

TEST(MemorySharesConfig, EveryKey) {
  auto r = Parse(R"(version: v1
gpushare:
  maxClientsPerGpu: 20
  memoryShares:
    devices: [0, "2", GPU-02ff349d-4f87-6aa3-9c2b-9d9f2ae75e2e]
    resourceName: example.com/vram
    unit: MiB
    publishGpuCount: false
)");
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  const MemoryShares& m = r->config.gpushare.memory_shares;
  ASSERT_TRUE(m.enabled());
  EXPECT_EQ(m.devices->kind, DeviceSelector::Kind::kList);
  EXPECT_EQ(m.devices->items, (std::vector<std::string>{"0", "2", "GPU-02ff349d-4f87-6aa3-9c2b-9d9f2ae75e2e"}));
  EXPECT_EQ(m.resource_name, "example.com/vram");
  EXPECT_EQ(m.unit, memshare::MemoryUnit::kMiB);
  EXPECT_FALSE(m.publish_gpu_count);
  EXPECT_EQ(r->config.gpushare.max_clients_per_gpu, 20);

  r = Parse("gpushare:\n  memoryShares:\n    devices: all\n");
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->config.gpushare.memory_shares.devices->kind, DeviceSelector::Kind::kAll);
  r = Parse("gpushare:\n  memoryShares:\n    devices: 3\n");
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->config.gpushare.memory_shares.devices->kind, DeviceSelector::Kind::kCount);
  EXPECT_EQ(r->config.gpushare.memory_shares.devices->count, 3);
}

TEST(MemorySharesConfig, FlagBeatsEnvironmentBeatsFile) {
  const std::string file = "gpushare:\n  memoryShares:\n    devices: all\n    unit: GiB\n";
  auto r = Parse(file, {{"GPUSHARE_MEMORY_UNIT", "MiB"}, {"GPUSHARE_PUBLISH_GPU_COUNT", "false"}});
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->config.gpushare.memory_shares.unit, memshare::MemoryUnit::kMiB);
  EXPECT_FALSE(r->config.gpushare.memory_shares.publish_gpu_count);
  NodeConfigFlags flags;
  flags.values["memoryUnit"] = "GiB";
  flags.values["memoryResourceName"] = "example.com/mem";
  r = Parse(file, {{"GPUSHARE_MEMORY_UNIT", "MiB"}}, flags);
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->config.gpushare.memory_shares.unit, memshare::MemoryUnit::kGiB);
  EXPECT_EQ(r->config.gpushare.memory_shares.resource_name, "example.com/mem");
  auto bad = Parse(file, {{"GPUSHARE_MEMORY_UNIT", "GB"}});
  ASSERT_FALSE(bad.ok());
  EXPECT_THAT(bad.status().message(), HasSubstr("GPUSHARE_MEMORY_UNIT: must be GiB or MiB, got \"GB\""));
}

TEST(MemorySharesConfig, RefusalsNameTheField) {
  EXPECT_THAT(Problems("gpushare:\n  memoryShares:\n    devices: 0\n"),
              Contains("gpushare.memoryShares.devices: a count of GPUs must be > 0, got 0 (use none for no GPU) "
                       "(node.yaml:3:14)"));
  EXPECT_THAT(Problems("gpushare:\n  memoryShares:\n    devices: some\n"),
              Contains(HasSubstr("gpushare.memoryShares.devices: must be \"all\", \"none\", a positive count")));
  EXPECT_THAT(Problems("gpushare:\n  memoryShares:\n    devices: [\"0:1\"]\n"),
              Contains(HasSubstr("gpushare.memoryShares.devices[0]: memory shares need whole GPUs")));
  EXPECT_THAT(Problems("gpushare:\n  memoryShares:\n    devices: [x]\n"),
              Contains(HasSubstr("gpushare.memoryShares.devices[0]: must be a GPU index (0) or a GPU UUID")));
  EXPECT_THAT(Problems("gpushare:\n  memoryShares:\n    devices: all\n    unit: GB\n"),
              Contains("gpushare.memoryShares.unit: must be GiB or MiB, got \"GB\" (node.yaml:4:11)"));
  EXPECT_THAT(Problems("gpushare:\n  memoryShares:\n    devices: all\n    resourceName: gpu-mem\n"),
              Contains(HasSubstr("gpushare.memoryShares.resourceName: \"gpu-mem\" is not a valid extended resource name")));
  EXPECT_THAT(Problems("gpushare:\n  memoryShares:\n    devices: all\n    resourceName: nvidia.com/mem\n"),
              Contains(HasSubstr("the nvidia.com domain is kept for whole, time-sliced and MIG devices")));
  EXPECT_THAT(Problems("gpushare:\n  memoryShares:\n    devices: all\n    publishGpuCount: maybe\n"),
              Contains(HasSubstr("gpushare.memoryShares.publishGpuCount: must be true or false")));
  EXPECT_THAT(Problems("gpushare:\n  memoryShares: [0]\n"),
              Contains(HasSubstr("gpushare.memoryShares: must be a mapping")));
}

TEST(MemorySharesConfig, OverlapWithTimeSlicingOfAllGpus) {
  const std::string ts = "sharing:\n  timeSlicing:\n    resources:\n    - name: nvidia.com/gpu\n      replicas: 4\n";
  EXPECT_THAT(Problems(ts + "gpushare:\n  memoryShares:\n    devices: [0, 1]\n"),
              Contains(HasSubstr("gpushare.memoryShares.devices: overlaps sharing.timeSlicing.resources[0], which "
                                 "time-slices nvidia.com/gpu (one of them selects all GPUs)")));
  const std::string ts_list = "sharing:\n  timeSlicing:\n    resources:\n    - name: nvidia.com/gpu\n      devices: [2]\n"
                              "      replicas: 4\n";
  EXPECT_THAT(Problems(ts_list + "gpushare:\n  memoryShares:\n    devices: all\n"),
              Contains(HasSubstr("gpushare.memoryShares.devices: overlaps sharing.timeSlicing.resources[0]")));
  // Explicit, disjoint lists are fine here (the plan checks real overlaps against the GPUs).
  auto r = Parse(ts_list + "gpushare:\n  memoryShares:\n    devices: [0, 1]\n");
  EXPECT_TRUE(r.ok()) << r.status().ToString();
  // MIG time-slicing never overlaps a memory GPU.
  r = Parse("flags:\n  migStrategy: mixed\nsharing:\n  timeSlicing:\n    resources:\n    - name: nvidia.com/mig-1g.10gb\n"
            "      replicas: 3\ngpushare:\n  memoryShares:\n    devices: all\n");
  EXPECT_TRUE(r.ok()) << r.status().ToString();
}

TEST(MemorySharesConfig, TheExampleIsValid) {
  auto r = ValidateConfigFile(std::string(GPUSHARE_SOURCE_DIR) + "/examples/config/memory-shares.yaml");
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_TRUE(r->config.gpushare.memory_shares.enabled());
}

}  // namespace
}  // namespace gpushare
