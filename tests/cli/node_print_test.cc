// gpushare-node --print-resources as a real process: exit codes, the 80 and 21 figures, JSON.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "base/strings.h"
#include "tests/cli/run_process.h"

namespace gpushare {
namespace {

using ::testing::HasSubstr;
using testing::RunProcess;
using testing::WriteTempFile;

const std::string kNode = std::string(GPUSHARE_BIN_DIR) + "/gpushare-node";
const std::string kSrc = GPUSHARE_SOURCE_DIR;
const std::string kFakeNvml = std::string(GPUSHARE_BIN_DIR) + "/../fakes/nvml/libnvidia-ml.so.1";

std::string Inv(const std::string& name) {
  return kSrc + "/examples/inventory/" + name + ".yaml";
}
std::string Cfg(const std::string& name) {
  return kSrc + "/examples/config/" + name + ".yaml";
}

// Resource name -> count, from the JSON output.
std::map<std::string, int> Counts(const std::string& json_text) {
  auto j = nlohmann::json::parse(json_text);
  std::map<std::string, int> out;
  for (const auto& r : j.at("resources")) {
    out[r.at("name").get<std::string>()] = r.at("count").get<int>();
    EXPECT_EQ(r.at("devices").size(), r.at("count").get<size_t>());
  }
  return out;
}

TEST(NodePrint, EightA10TimesTenIsEighty) {
  auto r = RunProcess(
      {kNode, "--inventory", Inv("8x-a10"), "--config", Cfg("8x-a10"), "--print-resources"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_THAT(r.out, HasSubstr("nvidia.com/gpu  80"));
  r = RunProcess({kNode, "--inventory", Inv("8x-a10"), "--config", Cfg("8x-a10"),
                  "--print-resources", "--output", "json"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(Counts(r.out), (std::map<std::string, int>{{"nvidia.com/gpu", 80}}));
  auto j = nlohmann::json::parse(r.out);
  const auto& devices = j["resources"][0]["devices"];
  std::set<std::string> ids;
  for (const auto& d : devices) {
    ids.insert(d["id"].get<std::string>());
    EXPECT_EQ(d["health"], "Healthy");
    EXPECT_EQ(d["id"].get<std::string>(),
              d["deviceUuid"].get<std::string>() + "::" + std::to_string(d["replica"].get<int>()));
  }
  EXPECT_EQ(ids.size(), 80u);
  EXPECT_EQ(devices[0]["numaNodes"], nlohmann::json::array({0}));
  EXPECT_EQ(devices[79]["numaNodes"], nlohmann::json::array({1}));
  EXPECT_EQ(j["inventory"]["gpus"].size(), 8u);
  EXPECT_EQ(j["resources"][0]["socket"], "gpushare-gpu.sock");
}

// --output node: the Node object the API shows once gpushare-node and kubelet have published the
// plan (what the scale harness registers its simulated nodes from): the inventory annotation
// gpushare-node writes, devices as capacity and healthy ones as allocatable.
TEST(NodePrint, NodeObjectCarriesTheInventoryAndTheAllocatable) {
  auto r = RunProcess({kNode, "--inventory", Inv("8x-a10"), "--config", Cfg("memory-shares"),
                       "--print-resources", "--output", "node", "--node-name", "sim-1"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  auto j = nlohmann::json::parse(r.out);
  EXPECT_EQ(j["kind"], "Node");
  EXPECT_EQ(j["metadata"]["name"], "sim-1");
  EXPECT_EQ(j["status"]["allocatable"]["aliyun.com/gpu-mem"], "176");
  EXPECT_EQ(j["status"]["capacity"]["aliyun.com/gpu-count"], "8");
  auto inv = nlohmann::json::parse(
      j["metadata"]["annotations"]["gpushare.io/gpu-inventory"].get<std::string>());
  EXPECT_EQ(inv["unit"], "GiB");
  ASSERT_EQ(inv["gpus"].size(), 8u);
  EXPECT_EQ(inv["gpus"][7]["units"], 22);
  EXPECT_EQ(inv["gpus"][7]["mode"], "memory");
  // Whole GPUs: one device each, no memory units, the GPUs published in their mode.
  r = RunProcess({kNode, "--inventory", Inv("8x-a10"), "--print-resources", "--output", "node",
                  "--node-name", "sim-2"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  j = nlohmann::json::parse(r.out);
  EXPECT_EQ(j["status"]["allocatable"]["nvidia.com/gpu"], "8");
  EXPECT_FALSE(j["status"]["allocatable"].contains("aliyun.com/gpu-count"));
  inv = nlohmann::json::parse(
      j["metadata"]["annotations"]["gpushare.io/gpu-inventory"].get<std::string>());
  EXPECT_EQ(inv["gpus"][0]["mode"], "exclusive");
  // The name is needed.
  r = RunProcess({kNode, "--inventory", Inv("8x-a10"), "--print-resources", "--output", "node"});
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_THAT(r.err, HasSubstr("--output node: needs --node-name"));
}

TEST(NodePrint, H100MigTimesThreeIsTwentyOne) {
  auto r = RunProcess({kNode, "--inventory", Inv("h100-80gb-mig-1g.10gb"), "--config",
                       Cfg("h100-80gb-mig-1g.10gb"), "--print-resources", "--output=json"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(Counts(r.out), (std::map<std::string, int>{{"nvidia.com/mig-1g.10gb", 21}}));
  auto j = nlohmann::json::parse(r.out);
  EXPECT_TRUE(j["resources"][0]["failRequestsGreaterThanOne"].get<bool>());
  EXPECT_THAT(j["resources"][0]["devices"][0]["id"].get<std::string>(), HasSubstr("MIG-"));
}

TEST(NodePrint, MixedSharesEachGpuItsOwnWay) {
  auto r = RunProcess({kNode, "--inventory", Inv("mixed"), "--config", Cfg("mixed"),
                       "--print-resources", "--output", "json"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(Counts(r.out), (std::map<std::string, int>{{"nvidia.com/gpu", 1},
                                                       {"nvidia.com/gpu.shared", 20},
                                                       {"nvidia.com/mig-2g.20gb", 6},
                                                       {"nvidia.com/mig-3g.40gb", 3}}));
  auto j = nlohmann::json::parse(r.out);
  for (const auto& res : j["resources"]) {
    if (res["name"] == "nvidia.com/gpu.shared") {
      EXPECT_EQ(res["devices"][0]["memoryLimitMiB"], 2302) << "evenSplit: 23028 / 10";
    }
  }
}

TEST(NodePrint, WithoutConfigEveryGpuIsWhole) {
  auto r =
      RunProcess({kNode, "--inventory", Inv("8x-a10"), "--print-resources", "--output", "json"},
                 {{"CONFIG_FILE", ""}});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(Counts(r.out), (std::map<std::string, int>{{"nvidia.com/gpu", 8}}));
}

TEST(NodePrint, ConfigProblemsExitTwoOneLineEach) {
  std::string bad =
      WriteTempFile("bad.yaml",
                    "flags:\n  migStrategy: hybrid\nsharing:\n  timeSlicing:\n    resources:\n"
                    "    - name: nvidia.com/gpu\n      replicas: 60\n      extra: 1\n");
  auto r = RunProcess({kNode, "--inventory", Inv("8x-a10"), "--config", bad, "--print-resources"});
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_EQ(r.out, "") << "nothing printed or served";
  auto lines = SplitLines(r.err);
  ASSERT_EQ(lines.size(), 3u) << r.err;
  EXPECT_THAT(lines[0],
              HasSubstr("flags.migStrategy: must be none, single or mixed, got \"hybrid\""));
  EXPECT_THAT(lines[1],
              HasSubstr("sharing.timeSlicing.resources[0].replicas: must be 2..48, got 60"));
  EXPECT_THAT(lines[2], HasSubstr("sharing.timeSlicing.resources[0].extra: unknown key"));
}

TEST(NodePrint, PlanProblemsExitTwo) {
  std::string cfg =
      WriteTempFile("plan.yaml",
                    "sharing:\n  timeSlicing:\n    resources:\n    - name: nvidia.com/gpu\n"
                    "      devices: [0, 9]\n      replicas: 4\n");
  auto r = RunProcess({kNode, "--inventory", Inv("8x-a10"), "--config", cfg, "--print-resources"});
  EXPECT_EQ(r.exit_code, 2);
  auto lines = SplitLines(r.err);
  ASSERT_EQ(lines.size(), 2u) << r.err;
  EXPECT_THAT(r.err, HasSubstr("sharing.timeSlicing.resources[0].devices[1]: \"9\" matches no "
                               "nvidia.com/gpu device on this node"));
  EXPECT_THAT(r.err, HasSubstr("sharing.timeSlicing.resources[0].name: nvidia.com/gpu collides"));
}

TEST(NodePrint, InventoryProblemsExitTwo) {
  std::string inv = WriteTempFile("inv.yaml", "gpus:\n- index: 0\n  uuid: GPU-x\n");
  auto r = RunProcess({kNode, "--inventory", inv, "--print-resources"});
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_THAT(r.err, HasSubstr("gpus[0].uuid: must be GPU-<8-4-4-4-12 hex digits>"));
  EXPECT_THAT(r.err, HasSubstr("gpus[0].product: is required"));
}

TEST(NodePrint, PrecedenceFlagOverEnvironmentOverFile) {
  // The file says mixed (21 MIG replicas); MIG_STRATEGY=none makes it one whole GPU... which
  // the file's MIG entry then refuses; a flag brings mixed back.
  const std::vector<std::string> base = {kNode,
                                         "--inventory",
                                         Inv("h100-80gb-mig-1g.10gb"),
                                         "--config",
                                         Cfg("h100-80gb-mig-1g.10gb"),
                                         "--print-resources",
                                         "--output",
                                         "json"};
  auto r = RunProcess(base, {{"MIG_STRATEGY", "none"}});
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_THAT(r.err, HasSubstr("exists only with flags.migStrategy mixed, got none"));
  std::vector<std::string> with_flag = base;
  with_flag.push_back("--mig-strategy=mixed");
  r = RunProcess(with_flag, {{"MIG_STRATEGY", "none"}});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(Counts(r.out)["nvidia.com/mig-1g.10gb"], 21);
  r = RunProcess(base, {{"GPUSHARE_MAX_CLIENTS_PER_GPU", "20"}});
  EXPECT_EQ(r.exit_code, 2) << "7 x 3 = 21 clients > 20";
  EXPECT_THAT(r.err, HasSubstr("would have 21 clients (7 MIG devices x 3 replicas), more than "
                               "gpushare.maxClientsPerGpu 20"));
}

TEST(NodePrint, ConfigFileFromTheEnvironment) {
  auto r =
      RunProcess({kNode, "--inventory", Inv("8x-a10"), "--print-resources", "--output", "json"},
                 {{"CONFIG_FILE", Cfg("8x-a10")}});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(Counts(r.out)["nvidia.com/gpu"], 80);
}

TEST(NodePrint, BadFlagValueExitsTwo) {
  auto r =
      RunProcess({kNode, "--inventory", Inv("8x-a10"), "--print-resources", "--output", "xml"});
  EXPECT_EQ(r.exit_code, 2);
  r = RunProcess(
      {kNode, "--inventory", Inv("8x-a10"), "--print-resources", "--device-id-strategy", "x"});
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_THAT(r.err, HasSubstr("--device-id-strategy: must be uuid or index, got \"x\""));
}

TEST(NodePrint, NvmlThroughTheFakeLibrary) {
  std::string conf = WriteTempFile("fake.conf",
                                   "driver 570.124.06\ncuda 12080\n"
                                   "gpu uuid=GPU-0a100000-0000-4000-8000-000000000000 "
                                   "name=\"NVIDIA A10\" memory_mib=23028 cc=8.6\n"
                                   "gpu uuid=GPU-0a100000-0000-4000-8000-000000000001 "
                                   "name=\"NVIDIA A10\" memory_mib=23028 cc=8.6\n");
  auto r = RunProcess({kNode, "--nvml-library", kFakeNvml, "--config", Cfg("8x-a10"),
                       "--print-resources", "--output", "json"},
                      {{"FAKE_NVML_CONFIG", conf}});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(Counts(r.out)["nvidia.com/gpu"], 20);
  auto j = nlohmann::json::parse(r.out);
  EXPECT_EQ(j["inventory"]["source"], "nvml");
  EXPECT_EQ(j["inventory"]["driverVersion"], "570.124.06");
}

TEST(NodePrint, NoNvmlLibraryExitsWithAClearMessage) {
  auto r =
      RunProcess({kNode, "--nvml-library", "/nonexistent/libnvidia-ml.so.1", "--print-resources"});
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_THAT(r.err, HasSubstr("could not be loaded"));
  EXPECT_THAT(r.err, HasSubstr("failOnInitError is true"));
}

TEST(NodePrint, NoGpusExitsNonZero) {
  std::string inv = WriteTempFile("empty.yaml", "gpus: []\n");
  auto r = RunProcess({kNode, "--inventory", inv, "--print-resources"});
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_THAT(r.err, HasSubstr("lists no GPUs"));
}

// failOnInitError=false: log the reason and wait idle until SIGTERM (exit 0).
TEST(NodeInit, WaitsIdleWithoutGpusWhenFailOnInitErrorIsFalse) {
  testing::Child c({kNode, "--nvml-library", "/nonexistent/libnvidia-ml.so.1",
                    "--device-plugin-dir", ::testing::TempDir()},
                   {{"FAIL_ON_INIT_ERROR", "false"}});
  ASSERT_TRUE(c.WaitForStderr("failOnInitError is false")) << c.Wait().err;
  EXPECT_FALSE(c.Exited()) << "it waits instead of exiting";
  c.Signal(SIGTERM);
  auto r = c.Wait();
  EXPECT_EQ(r.exit_code, 0) << r.err;
}

}  // namespace
}  // namespace gpushare
